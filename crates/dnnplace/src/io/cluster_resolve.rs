//! Clusters from what users write: the `--cluster` short form and the cluster file
//! ([`super::cluster_file`]), with the defaults filled in from the device profiles.
//!
//! **Short form**: terms joined by `+`; `MxNxTYPE` is M machines with N accelerators of
//! profile TYPE each, `NxTYPE` is one machine (`2x8xa100-80gb`, `1x4xa100-80gb+1x4xv100`).
//! Each term is one `[[machines]]` entry of the file with every default.
//!
//! **Defaults** (written in `docs/cluster.md`):
//! - a type's memory, price per hour and speed: its profile's `memory_bytes`,
//!   `price_per_hour` and [`DeviceProfile::speed`]; accelerators of one profile with the same
//!   three numbers are one type, named after the profile (`a100-80gb`, then `a100-80gb#2`, …
//!   for the same profile with other numbers);
//! - a machine: 1 CPU core; host link = the slowest `host_link_bytes_per_s` of its profiles
//!   with latency [`HOST_LATENCY_MS`]; peer link = its profile's `device_link_bytes_per_s`
//!   with latency [`PEER_LATENCY_MS`] when all its accelerators share one profile, else none
//!   (different generations share no NVLink); network = the cluster's;
//! - the network: [`NETWORK_BYTES_PER_S`] (100 Gb/s) with latency [`NETWORK_LATENCY_MS`];
//! - a CPU core: price 0 (the accelerators' prices include their host).
//!
//! A machine without accelerators gets the paper's PCIe 3 host link (15.75 GB/s); no
//! transfer uses it.

use super::cluster_file::{AcceleratorSpec, ClusterFile, LinkSpec, MachineSpec, PeerSpec};
use crate::model::count::{MAX_COUNT, MAX_DEVICES};
use crate::model::profiles::{find_profile, DeviceProfile};
use crate::model::{AcceleratorType, Cluster, Count, Link, Machine};

/// Latency of a host-link transfer (a DMA copy and its synchronisation), ms.
pub const HOST_LATENCY_MS: f64 = 0.01;
/// Latency of a peer-link transfer, ms.
pub const PEER_LATENCY_MS: f64 = 0.01;
/// Default network bandwidth between machines: 100 Gb/s, bytes/s.
pub const NETWORK_BYTES_PER_S: f64 = 12.5e9;
/// Default network latency (RDMA plus the communication library), ms.
pub const NETWORK_LATENCY_MS: f64 = 0.02;

/// Resolves a cluster document: defaults from `profiles` (searched first) and the built-ins,
/// every number checked. Errors name the field (`machines[1].accelerators[0].profile: …`).
///
/// A profile is looked up only for a number the document leaves out, so a fully explicit
/// document (as [`ClusterFile::of_cluster`] writes) needs no profile at all.
///
/// Counts beyond what a plan on `nodes` nodes can use (or [`MAX_COUNT`] when the workload
/// is not known) are clamped, each with a note ([`Cluster::notes`]; [`crate::model::count`]).
pub fn resolve(file: &ClusterFile, profiles: &[DeviceProfile]) -> Result<Cluster, String> {
    resolve_for(file, profiles, None)
}

/// [`resolve`] for a workload of `nodes` nodes (`None`: not known).
pub fn resolve_for(
    file: &ClusterFile,
    profiles: &[DeviceProfile],
    nodes: Option<usize>,
) -> Result<Cluster, String> {
    let limit = nodes.map_or(MAX_COUNT, |n| n.clamp(1, MAX_COUNT));
    let mut notes = Vec::new();
    let mut devices: usize = 0;
    let network = match &file.network {
        Some(l) => link(l, NETWORK_LATENCY_MS, "network")?,
        None => Link {
            bytes_per_s: NETWORK_BYTES_PER_S,
            latency_ms: NETWORK_LATENCY_MS,
        },
    };
    let mut types: Vec<AcceleratorType> = Vec::new();
    let mut machines = Vec::new();
    if file.machines.is_empty() {
        return Err("machines: the cluster has no machine".into());
    }
    for (m, spec) in file.machines.iter().enumerate() {
        let at = |f: &str| format!("machines[{m}].{f}");
        let count = spec
            .count
            .unwrap_or(Count(1))
            .clamped(limit, &at("count"), &mut notes);
        if count == 0 {
            return Err(format!("{}: must be at least 1", at("count")));
        }
        let cpus = spec
            .cpus
            .unwrap_or(Count(1))
            .clamped(limit, &at("cpus"), &mut notes);
        let MachineAccelerators {
            entries,
            slowest_host,
            peer_default,
            one_profile,
        } = machine_accelerators(spec, m, profiles, limit, &mut notes, &mut types)?;
        let host = match &spec.host {
            Some(l) => link(l, HOST_LATENCY_MS, &at("host"))?,
            None if slowest_host.is_finite() => Link {
                bytes_per_s: slowest_host,
                latency_ms: HOST_LATENCY_MS,
            },
            None => Link {
                bytes_per_s: 15.75e9,
                latency_ms: HOST_LATENCY_MS,
            },
        };
        let peer = match &spec.peer {
            Some(PeerSpec::None) => None,
            Some(PeerSpec::Link(l)) => Some(link(l, PEER_LATENCY_MS, &at("peer"))?),
            None if one_profile => peer_default.map(|b| Link {
                bytes_per_s: b,
                latency_ms: PEER_LATENCY_MS,
            }),
            None => None,
        };
        let machine_network = match &spec.network {
            Some(l) => link(l, NETWORK_LATENCY_MS, &at("network"))?,
            None => network,
        };
        let per_machine = entries.iter().map(|&(_, c)| c).sum::<usize>() + cpus;
        devices = per_machine
            .checked_mul(count)
            .and_then(|d| d.checked_add(devices))
            .filter(|&d| d <= MAX_DEVICES)
            .ok_or_else(|| {
                format!(
                    "{}: {count} machines of {per_machine} devices each make the cluster hold more than {MAX_DEVICES} devices",
                    at("count")
                )
            })?;
        let base = spec.name.clone();
        for i in 0..count {
            let name = match (&base, count) {
                (Some(b), 1) => b.clone(),
                (Some(b), _) => format!("{b}-{i}"),
                (None, _) => format!("m{}", machines.len()),
            };
            machines.push(Machine {
                name,
                accelerators: entries.clone(),
                cpus,
                host,
                peer,
                network: machine_network,
            });
        }
    }
    let cpu_price = file.cpu_price_per_hour.unwrap_or(0.0);
    check(cpu_price, "cpu_price_per_hour".into(), false)?;
    Cluster::new(types, machines, cpu_price)
        .map(|c| c.with_notes(notes))
        .map_err(|e| e.to_string())
}

/// One machine's accelerators, resolved: `(type, count)` entries (types added to `types`
/// as they first appear), the slowest host link and the slowest peer link of the profiles
/// looked up, and whether all entries name one profile (module documentation: defaults).
struct MachineAccelerators {
    entries: Vec<(usize, usize)>,
    slowest_host: f64,
    peer_default: Option<f64>,
    one_profile: bool,
}

/// The accelerators of `spec`, machine `m` of the document, counts clamped to `limit`
/// (with a note each); errors name the field.
fn machine_accelerators(
    spec: &MachineSpec,
    m: usize,
    profiles: &[DeviceProfile],
    limit: usize,
    notes: &mut Vec<String>,
    types: &mut Vec<AcceleratorType>,
) -> Result<MachineAccelerators, String> {
    let mut entries = Vec::new();
    let mut slowest_host = f64::INFINITY;
    let mut peer_default: Option<f64> = None;
    let mut one_profile = true;
    for (e, acc) in spec.accelerators.iter().enumerate() {
        let at = |f: &str| format!("machines[{m}].accelerators[{e}].{f}");
        let acc_count = acc.count.clamped(limit, &at("count"), notes);
        if acc_count == 0 {
            return Err(format!("{}: must be at least 1", at("count")));
        }
        let needs_profile = acc.memory.is_none()
            || acc.price_per_hour.is_none()
            || acc.speed.is_none()
            || spec.host.is_none()
            || spec.peer.is_none();
        let profile = if needs_profile {
            Some(
                find_profile(&acc.profile, profiles)
                    .map_err(|err| format!("{}: {err}", at("profile")))?,
            )
        } else {
            None
        };
        let memory = match &acc.memory {
            Some(b) => b
                .bytes()
                .map_err(|err| format!("{}: {err}", at("memory")))?,
            None => profile.as_ref().expect("looked up").memory_bytes,
        };
        let price = acc
            .price_per_hour
            .unwrap_or_else(|| profile.as_ref().expect("looked up").price_per_hour);
        let speed = acc
            .speed
            .unwrap_or_else(|| profile.as_ref().expect("looked up").speed());
        check(price, at("price_per_hour"), false)?;
        check(speed, at("speed"), true)?;
        if let Some(p) = &profile {
            slowest_host = slowest_host.min(p.host_link_bytes_per_s);
            peer_default = Some(peer_default.map_or(p.device_link_bytes_per_s, |x: f64| {
                x.min(p.device_link_bytes_per_s)
            }));
        }
        one_profile &= spec.accelerators[0]
            .profile
            .eq_ignore_ascii_case(&acc.profile);
        let t = type_index(types, &acc.profile, memory, price, speed);
        entries.push((t, acc_count));
    }
    Ok(MachineAccelerators {
        entries,
        slowest_host,
        peer_default,
        one_profile,
    })
}

fn check(value: f64, field: String, positive: bool) -> Result<(), String> {
    let ok = value.is_finite() && if positive { value > 0.0 } else { value >= 0.0 };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{field}: is {value}; it must be a finite number {}",
            if positive { "> 0" } else { ">= 0" }
        ))
    }
}

fn link(l: &LinkSpec, default_latency_ms: f64, field: &str) -> Result<Link, String> {
    check(l.bytes_per_s, format!("{field}.bytes_per_s"), true)?;
    let latency_ms = l.latency_ms.unwrap_or(default_latency_ms);
    check(latency_ms, format!("{field}.latency_ms"), false)?;
    Ok(Link {
        bytes_per_s: l.bytes_per_s,
        latency_ms,
    })
}

/// The type with these numbers, added when new (module documentation for its name).
fn type_index(
    types: &mut Vec<AcceleratorType>,
    profile: &str,
    memory: f64,
    price: f64,
    speed: f64,
) -> usize {
    let profile = profile.to_ascii_lowercase();
    if let Some(t) = types.iter().position(|t| {
        t.profile == profile
            && t.memory_bytes == memory
            && t.price_per_hour == price
            && t.speed == speed
    }) {
        return t;
    }
    let same = types.iter().filter(|t| t.profile == profile).count();
    let name = if same == 0 {
        profile.clone()
    } else {
        format!("{profile}#{}", same + 1)
    };
    types.push(AcceleratorType {
        name,
        profile,
        memory_bytes: memory,
        price_per_hour: price,
        speed,
    });
    types.len() - 1
}

/// The document of a short form (module documentation), before resolution.
pub fn parse_short(text: &str) -> Result<ClusterFile, String> {
    let mut machines = Vec::new();
    for term in text.split('+') {
        let term = term.trim();
        let parts: Vec<&str> = term.splitn(3, ['x', 'X']).collect();
        let number = |s: &str| Count::parse(s).filter(|&n| n.0 > 0);
        let (count, per_machine, profile) = match parts.as_slice() {
            [m, n, ty] if number(m).is_some() && number(n).is_some() => {
                (number(m), number(n), ty.to_string())
            }
            [n, rest @ ..] if number(n).is_some() && !rest.is_empty() => {
                (Some(Count(1)), number(n), rest.join("x"))
            }
            _ => (None, None, String::new()),
        };
        let (Some(count), Some(n)) = (count, per_machine) else {
            return Err(format!(
                "'{term}' in --cluster '{text}' is not MxNxTYPE or NxTYPE (machines x accelerators x profile, counts >= 1; e.g. 2x8xa100-80gb+1x4xv100)"
            ));
        };
        if profile.trim().is_empty() {
            return Err(format!("'{term}' in --cluster '{text}' names no profile"));
        }
        machines.push(MachineSpec {
            count: Some(count),
            accelerators: vec![AcceleratorSpec {
                profile: profile.trim().to_string(),
                count: n,
                memory: None,
                price_per_hour: None,
                speed: None,
            }],
            ..MachineSpec::default()
        });
    }
    Ok(ClusterFile {
        machines,
        ..ClusterFile::default()
    })
}

/// The `--cluster` argument: a TOML file when it names one (or ends in `.toml`), else the
/// short form; resolved with `profiles`.
pub fn cluster_from_arg(arg: &str, profiles: &[DeviceProfile]) -> Result<Cluster, String> {
    cluster_for(arg, profiles, None)
}

/// [`cluster_from_arg`] for a workload of `nodes` nodes: counts clamped to them
/// ([`resolve_for`]).
pub fn cluster_for(
    arg: &str,
    profiles: &[DeviceProfile],
    nodes: Option<usize>,
) -> Result<Cluster, String> {
    let path = std::path::Path::new(arg);
    if arg.ends_with(".toml") || path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{arg}: {e}"))?;
        let file = ClusterFile::from_toml(&text).map_err(|e| format!("{arg}: {e}"))?;
        return resolve_for(&file, profiles, nodes).map_err(|e| format!("{arg}: {e}"));
    }
    let file = parse_short(arg)?;
    let cluster = resolve_for(&file, profiles, nodes).map_err(|e| {
        format!(
            "--cluster {arg}: {}",
            e.split_once(": ").map_or(e.as_str(), |(_, m)| m)
        )
    })?;
    // Notes name the term, not the document the short form stands for.
    let terms: Vec<&str> = arg.split('+').map(str::trim).collect();
    let notes = cluster
        .notes()
        .iter()
        .map(|note| {
            let term = note
                .strip_prefix("machines[")
                .and_then(|r| r.split_once(']'))
                .and_then(|(i, _)| i.parse::<usize>().ok())
                .and_then(|i| terms.get(i));
            let what = if note.contains(".accelerators[") {
                "accelerators per machine"
            } else {
                "machines"
            };
            match (term, note.split_once(" is more than")) {
                (Some(t), Some((field, rest))) => format!(
                    "--cluster {t}: {what} {} is more than{rest}",
                    field.rsplit(" = ").next().unwrap_or(field)
                ),
                _ => format!("--cluster {arg}: {note}"),
            }
        })
        .collect();
    Ok(cluster.with_notes(notes))
}

/// The `--cluster` argument resolved as [`cluster_from_arg`] does, with the profile of each
/// of its accelerator types (looked up in `extra` first, then among the built-in profiles),
/// each profile once, in the order the types first appear.
pub fn cluster_and_profiles(
    arg: &str,
    extra: &[DeviceProfile],
) -> Result<(Cluster, Vec<DeviceProfile>), String> {
    let cluster = cluster_from_arg(arg, extra)?;
    let mut profiles: Vec<DeviceProfile> = Vec::new();
    for t in cluster.types() {
        let p = find_profile(&t.profile, extra).map_err(|e| format!("--cluster {arg}: {e}"))?;
        if !profiles.iter().any(|q| q.name == p.name) {
            profiles.push(p);
        }
    }
    Ok((cluster, profiles))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    #[test]
    fn short_form() {
        let c = cluster_from_arg("1x4xa100-80gb+1x4xv100", &[]).unwrap();
        assert_eq!(c.machines().len(), 2);
        assert_eq!(
            c.types()
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            ["a100-80gb", "v100"]
        );
        assert_eq!(c.types()[1].memory_bytes, 16.0 * GIB);
        assert_eq!(c.types()[0].price_per_hour, 5.12);
        let m = &c.machines()[0];
        assert_eq!(
            m.host,
            Link {
                bytes_per_s: 31.5e9,
                latency_ms: HOST_LATENCY_MS
            }
        );
        assert_eq!(
            m.peer,
            Some(Link {
                bytes_per_s: 300e9,
                latency_ms: PEER_LATENCY_MS
            })
        );
        assert_eq!(m.network.bytes_per_s, NETWORK_BYTES_PER_S);
        assert_eq!(m.cpus, 1);
        let two = cluster_from_arg("2x8xa100-80gb", &[]).unwrap();
        assert_eq!(
            two.machines()
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>(),
            ["m0", "m1"]
        );
        assert_eq!(two.accelerators().len(), 16);
        assert_eq!(
            cluster_from_arg("8xh100", &[])
                .unwrap()
                .accelerators()
                .len(),
            8
        );
    }

    #[test]
    fn short_form_errors_name_the_term() {
        for (bad, says) in [
            ("4", "not MxNxTYPE"),
            ("0x4xv100", "not MxNxTYPE"),
            ("2x8xa100-80gb+x4", "'x4'"),
            ("1x4xtpu", "unknown device 'tpu'"),
            ("1x2x", "names no profile"),
        ] {
            let e = cluster_from_arg(bad, &[]).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn file_defaults_overrides_and_types() {
        let text = r#"
            [[machines]]
            name = "mixed"
            cpus = 4
            accelerators = [{ profile = "a100-80gb", count = 2 }, { profile = "v100", count = 2 },
                            { profile = "a100-80gb", count = 1, memory = "40GiB" }]
            [[machines]]
            count = 2
            peer = "none"
            accelerators = [{ profile = "v100", count = 1, price_per_hour = 1.5 }]
        "#;
        let c = resolve(&ClusterFile::from_toml(text).unwrap(), &[]).unwrap();
        let names: Vec<&str> = c.types().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a100-80gb", "v100", "a100-80gb#2", "v100#2"]);
        assert_eq!(c.types()[2].memory_bytes, 40.0 * GIB);
        let mixed = &c.machines()[0];
        assert_eq!(mixed.host.bytes_per_s, 15.75e9, "the slowest host link");
        assert!(
            mixed.peer.is_none(),
            "two profiles share no peer link by default"
        );
        assert_eq!(c.machines()[1].name, "m1");
        assert_eq!(c.machines()[2].name, "m2");
        assert!(c.machines()[2].peer.is_none());
        // Written back with every number explicit, it resolves to the same cluster without profiles.
        let mut again = ClusterFile::of_cluster(&c);
        assert_eq!(resolve(&again, &[]).unwrap(), c);
        for m in &mut again.machines {
            for a in &mut m.accelerators {
                a.profile = format!("custom-{}", a.profile);
            }
        }
        assert_eq!(
            resolve(&again, &[]).unwrap().accelerators(),
            c.accelerators(),
            "no profile is looked up"
        );
    }

    #[test]
    fn file_errors_name_the_field() {
        for (text, says) in [
            ("[[machines]]\naccelerators = [{ profile = \"v100\", count = 0 }]", "machines[0].accelerators[0].count"),
            ("[[machines]]\naccelerators = [{ profile = \"v100\", count = 1, speed = -1 }]", "machines[0].accelerators[0].speed"),
            ("[[machines]]\nhost = { bytes_per_s = 0 }\naccelerators = [{ profile = \"v100\", count = 1 }]", "machines[0].host.bytes_per_s"),
            ("[[machines]]\naccelerators = [{ profile = \"v100\", count = 1, memory = \"lots\" }]", "machines[0].accelerators[0].memory"),
            ("[[machines]]\ncount = 0", "machines[0].count"),
            ("[[machines]]\ncpus = 0", "no accelerator and no CPU"),
            ("machines = []", "no machine"),
            ("network = { bytes_per_s = -5 }\n[[machines]]\ncpus = 1", "network.bytes_per_s"),
        ] {
            let e = ClusterFile::from_toml(text).and_then(|f| resolve(&f, &[]).map(|_| ())).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
