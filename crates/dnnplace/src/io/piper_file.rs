//! Piper's input JSON (`msr-fiddle/piper`, `inputs/*.json`) read into a
//! [`PiperInstance`].
//!
//! Fields: `maxMemoryPerDevice`, `maxDevices`, `bandwidth`, `mbsInBatch`, `nodes` (each
//! `id`, optional `name`, `TMPCs`: an object from tensor-parallel degree (a decimal string)
//! to a list of `{id, timePerSample, parameterSize, memoryUsageA, memoryUsageB,
//! syncTimeFw, syncTimeBw}`, the sync maps keyed by node id) and `edges` (`sourceId`,
//! `destId`, `communicationCost`). The text is read within [`super::TEXT_LIMIT_BYTES`] and
//! parsed by the rules of [`super::json`]; a mistyped field is reported with its JSON path,
//! a bad value by [`PiperInstance::build`] with the node, edge or field.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::json::parse_json;
use super::{read_text, IoError};
use crate::model::piper::{NodeSpec, PiperHeader, PiperInstance, TmpcSpec};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInstance {
    max_memory_per_device: f64,
    max_devices: i64,
    bandwidth: f64,
    mbs_in_batch: i64,
    nodes: Vec<RawNode>,
    edges: Vec<RawEdge>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNode {
    id: i64,
    #[serde(default)]
    name: String,
    #[serde(rename = "TMPCs")]
    tmpcs: BTreeMap<String, Vec<RawTmpc>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTmpc {
    id: String,
    time_per_sample: f64,
    parameter_size: f64,
    memory_usage_a: f64,
    memory_usage_b: f64,
    sync_time_fw: BTreeMap<String, f64>,
    sync_time_bw: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEdge {
    source_id: i64,
    dest_id: i64,
    communication_cost: f64,
}

fn key<T: std::str::FromStr>(k: &str, at: impl Fn() -> String) -> Result<T, IoError> {
    k.trim()
        .parse::<T>()
        .map_err(|_| IoError::Format(format!("{}: key {k:?} is not an integer", at())))
}

fn count(x: i64, name: &str) -> Result<usize, IoError> {
    usize::try_from(x)
        .map_err(|_| IoError::Format(format!("{name}: {x} is not a count (must be ≥ 0)")))
}

/// Parses the text of a Piper input file.
pub fn parse_piper(text: &str) -> Result<PiperInstance, IoError> {
    let raw: RawInstance = parse_json(text)?;
    let header = PiperHeader {
        max_memory_per_device: raw.max_memory_per_device,
        max_devices: count(raw.max_devices, "maxDevices")?,
        bandwidth: raw.bandwidth,
        mbs_in_batch: count(raw.mbs_in_batch, "mbsInBatch")?,
    };
    let mut nodes = Vec::with_capacity(raw.nodes.len());
    for (i, n) in raw.nodes.into_iter().enumerate() {
        let mut configs = Vec::new();
        for (t, list) in n.tmpcs {
            let t: usize = key(&t, || format!("nodes[{i}] (id {}).TMPCs", n.id))?;
            let mut specs = Vec::with_capacity(list.len());
            for (j, c) in list.into_iter().enumerate() {
                let at = |m: &str| format!("nodes[{i}] (id {}).TMPCs[{t}][{j}].{m}", n.id);
                let map = |m: BTreeMap<String, f64>, name: &str| {
                    m.into_iter()
                        .map(|(k, x)| Ok((key::<i64>(&k, || at(name))?, x)))
                        .collect::<Result<Vec<_>, IoError>>()
                };
                specs.push(TmpcSpec {
                    sync_fw: map(c.sync_time_fw, "syncTimeFw")?,
                    sync_bw: map(c.sync_time_bw, "syncTimeBw")?,
                    id: c.id,
                    time_per_sample: c.time_per_sample,
                    parameter_bytes: c.parameter_size,
                    memory_a: c.memory_usage_a,
                    memory_b: c.memory_usage_b,
                });
            }
            configs.push((t, specs));
        }
        nodes.push(NodeSpec {
            id: n.id,
            name: n.name,
            configs,
        });
    }
    let edges = raw
        .edges
        .into_iter()
        .map(|e| (e.source_id, e.dest_id, e.communication_cost))
        .collect();
    PiperInstance::build(header, nodes, edges).map_err(|e| IoError::Format(e.to_string()))
}

/// Reads a Piper input file; every error names the file and the field, node or edge.
pub fn read_piper(path: &Path) -> Result<PiperInstance, IoError> {
    let text = read_text(path)?;
    parse_piper(&text).map_err(|e| e.in_file(path))
}
