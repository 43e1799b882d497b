//! The cluster file (TOML), and the same document as the workload JSON's `cluster` section.
//!
//! ```toml
//! cpu_price_per_hour = 0.0                               # optional [default: 0]
//! network = { bytes_per_s = 12.5e9, latency_ms = 0.02 }  # between machines [default: 100 Gb/s, 0.02 ms]
//!
//! [[machines]]
//! name = "a100-box"        # optional [default: m<index>]; with count > 1: a100-box-0, a100-box-1, ...
//! count = 2                # identical machines [default: 1]
//! cpus = 8                 # CPU cores [default: 1]
//! host = { bytes_per_s = 31.5e9, latency_ms = 0.01 }   # [default: the slowest profile's host link, 0.01 ms]
//! peer = { bytes_per_s = 300e9, latency_ms = 0.01 }    # or "none" [default: the profile's device link, 0.01 ms, when the machine holds one profile; else none]
//! network = { bytes_per_s = 25e9 }                     # this machine's network link [default: the cluster's]
//! accelerators = [
//!   { profile = "a100-80gb", count = 8 },
//!   { profile = "a100-80gb", count = 2, memory = "40GiB", price_per_hour = 4.1, speed = 1.5 },
//! ]
//! ```
//!
//! Numbers are in base SI units (bytes per second, bytes) except `latency_ms`; `memory` may
//! also be a string with a unit (`"40GiB"`). Unknown keys are rejected. This module only
//! reads and writes the document; [`super::cluster_resolve`] fills the defaults from the
//! device profiles and checks every number, naming the field (`machines[1].accelerators[0].count`).
//! Counts (`count`, `cpus`) are [`Count`]s: whole numbers read without overflow, clamped
//! to what a plan can use with a note ([`crate::model::count`]).

use crate::model::Count;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A link as written: bandwidth and, optionally, latency.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub bytes_per_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

/// A machine's peer link: a link, or `"none"` (transfers staged through host memory).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PeerSpec {
    None,
    Link(LinkSpec),
}

impl Serialize for PeerSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PeerSpec::None => s.serialize_str("none"),
            PeerSpec::Link(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for PeerSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PeerSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"none\" or a table with bytes_per_s and latency_ms")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PeerSpec, E> {
                if v == "none" {
                    Ok(PeerSpec::None)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PeerSpec, A::Error> {
                LinkSpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(PeerSpec::Link)
            }
        }
        d.deserialize_any(V)
    }
}

/// A byte count: a number, or a string with a unit (`"40GiB"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BytesSpec {
    Number(f64),
    Text(String),
}

impl BytesSpec {
    /// The number of bytes, or a message saying what is wrong.
    pub fn bytes(&self) -> Result<f64, String> {
        match self {
            BytesSpec::Number(b) if b.is_finite() && *b >= 0.0 => Ok(*b),
            BytesSpec::Number(b) => {
                Err(format!("is {b}; it must be a finite number of bytes >= 0"))
            }
            BytesSpec::Text(t) => crate::model::parse_bytes(t),
        }
    }
}

/// Accelerators of one profile on a machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceleratorSpec {
    pub profile: String,
    pub count: Count,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<BytesSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
}

/// One machine (or `count` identical ones).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Count>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Count>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<LinkSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<LinkSpec>,
    #[serde(default)]
    pub accelerators: Vec<AcceleratorSpec>,
}

/// The whole document (module documentation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_price_per_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<LinkSpec>,
    pub machines: Vec<MachineSpec>,
}

impl ClusterFile {
    /// Parses the TOML document (syntax and keys only; numbers are checked when resolved).
    pub fn from_toml(text: &str) -> Result<ClusterFile, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// The document as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a cluster file serialises")
    }

    /// The document of a resolved cluster, every number explicit (so it resolves to the same
    /// cluster without any device profile).
    pub fn of_cluster(c: &crate::model::Cluster) -> ClusterFile {
        let link = |l: &crate::model::Link| LinkSpec {
            bytes_per_s: l.bytes_per_s,
            latency_ms: Some(l.latency_ms),
        };
        let machines = c
            .machines()
            .iter()
            .map(|m| MachineSpec {
                name: Some(m.name.clone()),
                count: None,
                cpus: Some(m.cpus.into()),
                host: Some(link(&m.host)),
                peer: Some(
                    m.peer
                        .as_ref()
                        .map_or(PeerSpec::None, |p| PeerSpec::Link(link(p))),
                ),
                network: Some(link(&m.network)),
                accelerators: m
                    .accelerators
                    .iter()
                    .map(|&(t, count)| {
                        let ty = &c.types()[t];
                        AcceleratorSpec {
                            profile: ty.profile.clone(),
                            count: count.into(),
                            memory: Some(BytesSpec::Number(ty.memory_bytes)),
                            price_per_hour: Some(ty.price_per_hour),
                            speed: Some(ty.speed),
                        }
                    })
                    .collect(),
            })
            .collect();
        ClusterFile {
            cpu_price_per_hour: Some(c.cpu_price_per_hour()),
            network: None,
            machines,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_example() {
        let text = r#"
            network = { bytes_per_s = 12.5e9, latency_ms = 0.02 }
            [[machines]]
            name = "a100-box"
            count = 2
            cpus = 8
            peer = "none"
            accelerators = [
              { profile = "a100-80gb", count = 8 },
              { profile = "a100-80gb", count = 2, memory = "40GiB", price_per_hour = 4.1 },
            ]
            [[machines]]
            peer = { bytes_per_s = 1e11 }
            accelerators = [{ profile = "v100", count = 4, memory = 17179869184 }]
        "#;
        let f = ClusterFile::from_toml(text).unwrap();
        assert_eq!(f.machines.len(), 2);
        assert_eq!(f.machines[0].peer, Some(PeerSpec::None));
        assert_eq!(
            f.machines[1].peer,
            Some(PeerSpec::Link(LinkSpec {
                bytes_per_s: 1e11,
                latency_ms: None
            }))
        );
        assert_eq!(
            f.machines[0].accelerators[1]
                .memory
                .as_ref()
                .unwrap()
                .bytes()
                .unwrap(),
            40.0 * 1024.0 * 1024.0 * 1024.0
        );
        assert_eq!(ClusterFile::from_toml(&f.to_toml()).unwrap(), f);
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<ClusterFile>(&json).unwrap(), f);
    }

    #[test]
    fn bad_documents_say_where() {
        let e = ClusterFile::from_toml("[[machines]]\npeer = \"nvlink\"\n").unwrap_err();
        assert!(e.contains("peer") && e.contains("none"), "{e}");
        let e = ClusterFile::from_toml("[[machines]]\ngpus = 3\n").unwrap_err();
        assert!(e.contains("gpus"), "{e}");
        let e = ClusterFile::from_toml("[[machines]]\naccelerators = [{ profile = \"v100\" }]\n")
            .unwrap_err();
        assert!(e.contains("count"), "{e}");
    }
}
