//! The reader of 3D plan files: the JSON `plan --parallel 3d --json` (or `--out`) writes,
//! uniform and free (`--free`), read back into a [`Layout`] for `simulate`.
//!
//! Fields read (every other field is ignored): `parallel` (must be `"3d"`), `microBatch`,
//! `globalBatch`, `zero` (0–3), `schedule` (`gpipe`, `1f1b` or `interleaved:v`: then each
//! stage's `chunks`, its `v` chunks' layers, give the split), `recompute`,
//! `sequenceParallel` (absent: off), and per stage `layers` (unit names, contiguous, in
//! chain order), `tensorParallel`, `dataParallel`, `devices` (the stage's `t·d`
//! consecutive devices, first to last) and `microBatchTimeMs` (the planned time, which the
//! caller compares with its own scoring to catch a plan made with other flags). Each
//! failure names its field (`stages[2].devices`); the layout's own rules (alignment,
//! overlap, divisibility) are the scorer's ([`crate::score::parallel::score_layout`]).
//!
//! Cost: O(|text| + Σ layers) with a hash map of the unit names.

use std::collections::HashMap;

use serde::Deserialize;

use super::json::parse_json;
use crate::model::parallel::{Layout, StageLayout, Zero};
use crate::model::schedule::Schedule;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawStage {
    layers: Vec<String>,
    tensor_parallel: usize,
    data_parallel: usize,
    devices: Vec<usize>,
    micro_batch_time_ms: f64,
    /// Interleaved: the layers of each chunk the stage holds.
    #[serde(default)]
    chunks: Option<Vec<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPlan {
    parallel: String,
    stages: Vec<RawStage>,
    micro_batch: usize,
    global_batch: usize,
    zero: u8,
    schedule: String,
    recompute: bool,
    #[serde(default)]
    sequence_parallel: bool,
    #[serde(default)]
    overlap_grad_reduce: bool,
}

/// A 3D plan file read back.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutFile {
    pub layout: Layout,
    pub sequence_parallel: bool,
    /// Per stage, the file's `microBatchTimeMs`.
    pub planned_micro_batch_ms: Vec<f64>,
}

/// Why a 3D plan file cannot be read; each names its field.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LayoutFileError {
    #[error("{0}")]
    Json(String),
    #[error("{field}: {why}")]
    Field { field: String, why: String },
}

fn field(field: impl Into<String>, why: impl Into<String>) -> LayoutFileError {
    LayoutFileError::Field {
        field: field.into(),
        why: why.into(),
    }
}

/// Reads the plan in `text`; `units` are the chain's unit names in order (module doc).
pub fn parse_layout_json(text: &str, units: &[String]) -> Result<LayoutFile, LayoutFileError> {
    let raw: RawPlan = parse_json(text).map_err(|e| LayoutFileError::Json(e.to_string()))?;
    if raw.parallel != "3d" {
        return Err(field(
            "parallel",
            format!("\"{}\": a 3D plan file says \"3d\"", raw.parallel),
        ));
    }
    if raw.stages.is_empty() {
        return Err(field("stages", "no stage: the file holds no plan"));
    }
    let zero = Zero::from_stage(raw.zero)
        .ok_or_else(|| field("zero", format!("{}: a ZeRO stage is 0 to 3", raw.zero)))?;
    let schedule: Schedule = raw.schedule.parse().map_err(|_| {
        field(
            "schedule",
            format!(
                "\"{}\": 3D plans run gpipe, 1f1b or interleaved:v",
                raw.schedule
            ),
        )
    })?;
    if raw.micro_batch == 0 || raw.global_batch == 0 {
        return Err(field(
            if raw.micro_batch == 0 {
                "microBatch"
            } else {
                "globalBatch"
            },
            "must be at least 1",
        ));
    }
    let index: HashMap<&str, usize> = units
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let (p, v) = (raw.stages.len(), schedule.chunks());
    let mut stages = Vec::with_capacity(p * v);
    let mut next = 0;
    // Chunk `c` (chain order) is chunk `c / p` of stage `c mod p`; one chunk, the stage's
    // `layers`, unless interleaved.
    for c in 0..p * v {
        let (s, st) = (c % p, &raw.stages[c % p]);
        let at = |what: &str| format!("stages[{s}].{what}");
        let (names, what) = if v == 1 {
            (&st.layers, "layers".to_string())
        } else {
            let chunks = st.chunks.as_ref().filter(|x| x.len() == v).ok_or_else(|| {
                field(
                    at("chunks"),
                    format!("{schedule}: each stage lists its {v} chunks"),
                )
            })?;
            (&chunks[c / p], format!("chunks[{}]", c / p))
        };
        let (start, end) = span_of(names, units, &index, next, &at(&what))?;
        let (t, d) = (st.tensor_parallel, st.data_parallel);
        if t == 0 || d == 0 {
            return Err(field(
                at(if t == 0 {
                    "tensorParallel"
                } else {
                    "dataParallel"
                }),
                "must be at least 1",
            ));
        }
        let first = st.devices.first().copied().unwrap_or(0);
        if st.devices.len() != t * d || st.devices.iter().enumerate().any(|(k, &x)| x != first + k)
        {
            return Err(field(
                at("devices"),
                format!("a stage holds t·d = {} consecutive devices", t * d),
            ));
        }
        if !st.micro_batch_time_ms.is_finite() {
            return Err(field(at("microBatchTimeMs"), "not a finite number"));
        }
        stages.push(StageLayout {
            units: start..end,
            tensor_parallel: t,
            data_parallel: d,
            first_device: first,
        });
        next = end;
    }
    if next != units.len() {
        return Err(field(
            format!("stages[{}].layers", raw.stages.len() - 1),
            format!(
                "the stages end at layer {next} of {}: every layer is in a stage",
                units.len()
            ),
        ));
    }
    Ok(LayoutFile {
        layout: Layout {
            stages,
            micro_batch: raw.micro_batch,
            global_batch: raw.global_batch,
            zero,
            schedule,
            recompute: raw.recompute,
            overlap_grad_reduce: raw.overlap_grad_reduce,
        },
        sequence_parallel: raw.sequence_parallel,
        planned_micro_batch_ms: raw.stages.iter().map(|s| s.micro_batch_time_ms).collect(),
    })
}

/// The units `start..end` that `names` (the field `at`) lists: contiguous from `next`, in
/// chain order, at least one.
fn span_of(
    names: &[String],
    units: &[String],
    index: &HashMap<&str, usize>,
    next: usize,
    at: &str,
) -> Result<(usize, usize), LayoutFileError> {
    let mut span = None::<(usize, usize)>;
    for (k, name) in names.iter().enumerate() {
        let u = *index.get(name.as_str()).ok_or_else(|| {
            field(
                format!("{at}[{k}]"),
                format!("\"{name}\" is not a layer of the model"),
            )
        })?;
        if u != next + k {
            return Err(field(
                format!("{at}[{k}]"),
                format!(
                    "\"{name}\" is layer {u}; the stages hold the layers in order, this one must be {}",
                    units.get(next + k).map_or("past the last layer", String::as_str)
                ),
            ));
        }
        span = Some((span.map_or(u, |x| x.0), u + 1));
    }
    span.ok_or_else(|| field(at, "no layer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["embed", "block0", "block1", "head"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    const GOOD: &str = r#"{"parallel":"3d","microBatch":1,"globalBatch":8,"zero":1,
        "schedule":"1f1b","recompute":false,"stages":[
        {"layers":["embed","block0"],"tensorParallel":2,"dataParallel":1,"devices":[0,1],"microBatchTimeMs":1.5},
        {"layers":["block1","head"],"tensorParallel":1,"dataParallel":2,"devices":[2,3],"microBatchTimeMs":2.5}]}"#;

    #[test]
    fn reads_a_free_layout() {
        let f = parse_layout_json(GOOD, &names()).unwrap();
        assert_eq!(f.layout.stages.len(), 2);
        assert_eq!(f.layout.stages[0].units, 0..2);
        assert_eq!(f.layout.stages[1].units, 2..4);
        assert_eq!(f.layout.stages[1].first_device, 2);
        assert_eq!(f.layout.stages[1].data_parallel, 2);
        assert_eq!(f.layout.zero, Zero::Optimizer);
        assert_eq!(f.planned_micro_batch_ms, vec![1.5, 2.5]);
        assert!(!f.sequence_parallel);
    }

    #[test]
    fn reads_an_interleaved_layout_chunk_by_chunk() {
        let text = r#"{"parallel":"3d","microBatch":1,"globalBatch":8,"zero":0,
        "schedule":"interleaved:2","recompute":false,"stages":[
        {"layers":["embed","block1"],"chunks":[["embed"],["block1"]],"tensorParallel":1,"dataParallel":1,"devices":[0],"microBatchTimeMs":1.5},
        {"layers":["block0","head"],"chunks":[["block0"],["head"]],"tensorParallel":1,"dataParallel":1,"devices":[1],"microBatchTimeMs":2.5}]}"#;
        let f = parse_layout_json(text, &names()).unwrap();
        let l = &f.layout;
        assert_eq!(l.schedule, Schedule::Interleaved { chunks: 2 });
        let units: Vec<_> = l.stages.iter().map(|s| s.units.clone()).collect();
        assert_eq!(units, vec![0..1, 1..2, 2..3, 3..4]);
        let firsts: Vec<usize> = l.stages.iter().map(|s| s.first_device).collect();
        assert_eq!(firsts, vec![0, 1, 0, 1]);
        // Chunks out of the chain's order are named.
        let swapped = text.replace(r#"[["block0"],["head"]]"#, r#"[["head"],["block0"]]"#);
        let e = parse_layout_json(&swapped, &names())
            .unwrap_err()
            .to_string();
        assert!(e.contains("stages[1].chunks[0][0]"), "{e}");
    }

    #[test]
    fn names_the_bad_field() {
        let cases = [
            (GOOD.replace("\"zero\":1", "\"zero\":7"), "zero"),
            (GOOD.replace("\"1f1b\"", "\"zigzag\""), "schedule"),
            (
                GOOD.replace("\"1f1b\"", "\"interleaved\""),
                "stages[0].chunks",
            ),
            (
                GOOD.replace("\"block1\",", "\"block9\","),
                "stages[1].layers[0]",
            ),
            (GOOD.replace("\"block1\",", ""), "stages[1].layers[0]"),
            (GOOD.replace("[2,3]", "[2,4]"), "stages[1].devices"),
            (GOOD.replace(",\"head\"", ""), "stages[1].layers"),
            (GOOD.replace("\"3d\"", "\"2d\""), "parallel"),
            (GOOD.replace("\"microBatch\":1,", ""), "microBatch"),
        ];
        for (text, want) in cases {
            let e = parse_layout_json(&text, &names()).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}
