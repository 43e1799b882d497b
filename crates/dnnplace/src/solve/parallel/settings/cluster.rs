//! The cluster of a 3D search: its spec (`MxNxTYPE` terms or a cluster TOML) read with the
//! device files' profiles, its topology (one accelerator type) or its groups (several
//! types), `--memory` applied, and the price cap (`--budget`).

use std::path::PathBuf;

use super::{setting, ParallelSettings, SettingsError};
use crate::model::parallel::{MixedTopology, Topology};
use crate::model::profiles::DeviceProfile;
use crate::model::schedule::Schedule;
use crate::model::Cluster;
use crate::solve::parallel::Space;

impl ParallelSettings {
    /// The cluster and the profiles of its types ([`cluster_of`]).
    pub(super) fn cluster_and_profiles(
        &self,
        notes: &mut Vec<String>,
    ) -> Result<(Cluster, Vec<DeviceProfile>), SettingsError> {
        cluster_of(self.cluster.as_deref(), &self.device_files, notes)
    }

    /// The cluster, its profiles and its topology ([`cluster_topology`]).
    pub fn topology(
        &self,
        notes: &mut Vec<String>,
    ) -> Result<(Cluster, Vec<DeviceProfile>, Topology), SettingsError> {
        cluster_topology(
            self.cluster.as_deref(),
            &self.device_files,
            self.memory_bytes,
            notes,
        )
    }

    /// What a cluster of several types (`names`) does not take: the interleaved schedule.
    /// (An export of a uniform layout is written with a node-rank table: docs/parallel.md.)
    pub(super) fn check_several_types(&self, names: &[&str]) -> Result<(), SettingsError> {
        let refused = [(
            "--schedule",
            "--schedule interleaved",
            matches!(self.schedule, Some(Schedule::Interleaved { .. })),
            "the interleaved schedule is planned on one accelerator type",
        )];
        match refused.iter().find(|r| r.2) {
            Some((flag, name, _, why)) => Err(setting(
                flag,
                format!(
                    "{name} does not apply to a cluster of several types ({}): {why}",
                    names.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    /// The cluster's topology and profiles when it holds several accelerator types (uniform
    /// or free layouts; `--budget`: cut to the machines it buys, [`capped_by_price`]); `None`
    /// for one type.
    pub(super) fn mixed_cluster(
        &self,
        notes: &mut Vec<String>,
    ) -> Result<Option<(MixedTopology, Vec<DeviceProfile>)>, SettingsError> {
        let Some(spec) = self.cluster.as_deref() else {
            return Ok(None);
        };
        let loaded = loaded_profiles(&self.device_files)?;
        match crate::io::cluster_resolve::cluster_and_profiles(spec, &loaded) {
            Ok((c, _)) if c.types().len() > 1 => {}
            _ => return Ok(None),
        }
        let (cluster, profiles) = self.cluster_and_profiles(notes)?;
        let names: Vec<&str> = cluster.types().iter().map(|t| t.name.as_str()).collect();
        self.check_several_types(&names)?;
        let mut topo = MixedTopology::from_cluster(&cluster)
            .map_err(|e| SettingsError::Cluster(format!("--cluster {spec}: {e}")))?;
        if let Some(m) = self.memory_bytes {
            for g in &mut topo.groups {
                g.memory_bytes = m;
            }
        }
        if let Some(price) = self.price_cap {
            topo = capped_by_price(&topo, &cluster, price, notes)?;
        }
        Ok(Some((topo, profiles)))
    }

    /// `price_cap` caps the accelerators at what the price buys (one type: the price over
    /// its price per hour).
    pub(super) fn cap_by_price(
        &self,
        cluster: &Cluster,
        space: &mut Space,
        notes: &mut Vec<String>,
    ) -> Result<(), SettingsError> {
        let Some(price) = self.price_cap else {
            return Ok(());
        };
        let per = cluster.types()[0].price_per_hour;
        if per > 0.0 {
            let n = (price / per).floor();
            if n < 1.0 {
                return Err(setting(
                    "--budget",
                    format!("--budget {price}: one {} costs {per} per hour, so the budget buys no accelerator", cluster.types()[0].name),
                ));
            }
            space.max_devices = space.max_devices.min(n.min(1e9) as usize);
            notes.push(format!(
                "--budget {price} buys {} of the cluster's accelerators at {per} per hour each",
                space.max_devices
            ));
        }
        Ok(())
    }
}

/// `topo` cut to the most machines, in the cluster's order, whose accelerators cost at most
/// `price` per hour together (each type at its `price_per_hour`; a type without a price costs
/// nothing): what `--budget` buys on a cluster of several types, as on one type the most
/// accelerators (the sweep's and the fewest-devices search's order, docs/parallel.md).
fn capped_by_price(
    topo: &MixedTopology,
    cluster: &Cluster,
    price: f64,
    notes: &mut Vec<String>,
) -> Result<MixedTopology, SettingsError> {
    let per_hour = |name: &str| {
        cluster
            .types()
            .iter()
            .find(|t| t.name == name)
            .map_or(0.0, |t| t.price_per_hour.max(0.0))
    };
    let (mut machines, mut spent) = (0, 0.0);
    'groups: for g in &topo.groups {
        let machine = per_hour(&g.type_name) * g.per_machine as f64;
        for _ in 0..g.machines {
            if spent + machine > price {
                break 'groups;
            }
            spent += machine;
            machines += 1;
        }
    }
    let Some(cut) = topo.first_machines(machines) else {
        let first = &topo.groups[0];
        return Err(setting(
            "--budget",
            format!(
                "--budget {price}: a machine of {} {} costs {} per hour, so the budget buys no machine",
                first.per_machine,
                first.type_name,
                per_hour(&first.type_name) * first.per_machine as f64
            ),
        ));
    };
    notes.push(format!(
        "--budget {price} buys the cluster's first {machines} machines in its order ({} accelerators: {}) at {spent:.2} per hour",
        cut.devices(),
        cut.groups
            .iter()
            .map(|g| format!("{}x{}x{}", g.machines, g.per_machine, g.type_name))
            .collect::<Vec<_>>()
            .join("+")
    ));
    Ok(cut)
}

/// The profiles of `device_files`.
fn loaded_profiles(device_files: &[PathBuf]) -> Result<Vec<DeviceProfile>, SettingsError> {
    device_files
        .iter()
        .map(|f| DeviceProfile::read(f).map_err(|e| SettingsError::Cluster(e.to_string())))
        .collect()
}

/// The cluster of `spec` (`MxNxTYPE` terms or a cluster TOML file) and the profiles of its
/// types (`device_files` looked up first); its notes to `notes`.
pub fn cluster_of(
    spec: Option<&str>,
    device_files: &[PathBuf],
    notes: &mut Vec<String>,
) -> Result<(Cluster, Vec<DeviceProfile>), SettingsError> {
    let Some(spec) = spec else {
        return Err(setting(
            "--cluster",
            "--parallel 3d needs --cluster MxNxTYPE (e.g. 16x8xh100) or a cluster TOML file".into(),
        ));
    };
    let loaded = loaded_profiles(device_files)?;
    let (cluster, profiles) = crate::io::cluster_resolve::cluster_and_profiles(spec, &loaded)
        .map_err(SettingsError::Cluster)?;
    notes.extend(cluster.notes().iter().cloned());
    Ok((cluster, profiles))
}

/// The cluster of `spec`, its profiles and its topology with `memory_bytes` per
/// accelerator when given; an error without a cluster or when its machines differ.
pub fn cluster_topology(
    spec: Option<&str>,
    device_files: &[PathBuf],
    memory_bytes: Option<f64>,
    notes: &mut Vec<String>,
) -> Result<(Cluster, Vec<DeviceProfile>, Topology), SettingsError> {
    let (cluster, profiles) = cluster_of(spec, device_files, notes)?;
    let mut topo = Topology::from_cluster(&cluster).map_err(|e| {
        SettingsError::Cluster(format!("--cluster {}: {e}", spec.unwrap_or_default()))
    })?;
    if let Some(m) = memory_bytes {
        topo.memory_bytes = m;
    }
    Ok((cluster, profiles, topo))
}
