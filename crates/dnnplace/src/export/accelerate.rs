//! Hugging Face accelerate: a `device_map` (module path → GPU index or `"cpu"`) and the
//! matching `max_memory`.
//!
//! accelerate's rules (`src/accelerate/utils/modeling.py` and `big_modeling.py`):
//! - `check_device_map`: keys are module names (`""` is the whole model) and together must
//!   cover every parameter — a parameter is covered by a key equal to its module or a dotted
//!   prefix of it; the most specific key wins (`_get_param_device` walks up the path);
//! - values are a GPU index, `"cpu"`, `"disk"` or a `torch.device`; `dispatch_model` runs a
//!   `"cpu"` (or `"disk"`) module on the main device with its weights kept in host memory
//!   (offload), so a module dnnplace puts on a CPU core is *stored* on the CPU by
//!   accelerate and computed on the main GPU — the export says so in its text;
//! - `max_memory` (`get_max_memory`): keys are GPU indices (integers), `"mps"`, `"cpu"` or
//!   `"disk"`; values bytes as an integer or a string with a unit (`convert_file_size_to_int`:
//!   `GiB`/`MiB`/`KiB` powers of 1024, `GB`/`MB`/`KB` powers of 1000, a lower-case `b` meaning
//!   bits). accelerate has one `"cpu"`, so a plan on two CPU cores is refused.
//!
//! A device_map may hold any split (no contiguity needed), but the export writes one key
//! per module of each layer, so a layer must sit on one device. `max_memory` gives every
//! device the bytes this plan puts on it, rounded up to a MiB: the budget under which
//! the plan fits (with an explicit `device_map`, `from_pretrained` does not read it).
//!
//! Reading resolves each node's module path by the most specific key; a node no key covers
//! is an error unless it owns nothing (no module, no work as a graph input, or computed in
//! a container's own forward, its module an ancestor of keys), when it follows the other
//! nodes of its layer; `"disk"`, `"mps"`
//! and other devices have no counterpart in dnnplace's model and are refused.
//!
//! **Recomputation.** A `device_map` has no activation-checkpointing setting (accelerate
//! checkpoints only inside its FSDP plugin, for all wrapped layers alike); a plan that
//! recomputes gets a `WARNING` comment naming the GPUs whose modules to checkpoint.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Exporter, LayerPlan};
use crate::model::layers::{node_module, Layers};
use crate::model::{Device, Placement, Workload};

/// `--format accelerate`.
pub struct Accelerate;

const MIB: f64 = 1024.0 * 1024.0;

impl Exporter for Accelerate {
    fn name(&self) -> &'static str {
        "accelerate"
    }

    fn target(&self) -> &'static str {
        "Hugging Face accelerate: device_map and max_memory for from_pretrained / dispatch_model"
    }

    fn render(&self, plan: &LayerPlan) -> Result<String, String> {
        let cpus = plan.cpus_used();
        if cpus.len() > 1 {
            let names: Vec<String> = cpus.iter().map(Device::to_string).collect();
            return Err(format!(
                "accelerate has one \"cpu\" device, but the plan uses {} CPU cores ({})",
                cpus.len(),
                names.join(", ")
            ));
        }
        let mut entries: Vec<(String, Device)> = Vec::new();
        for (l, layer) in plan.layers.layers.iter().enumerate() {
            if layer.modules.is_empty() {
                return Err(format!(
                    "layer {} has no module name; device_map keys are module paths",
                    plan.layers.name(plan.workload, l)
                ));
            }
            for m in &layer.modules {
                let d = plan.layer_device[l];
                match entries.iter().find(|(k, _)| k == m) {
                    Some((_, e)) if *e != d => {
                        return Err(format!(
                            "module {m} is in two layers that the plan puts on {e} and {d}"
                        ))
                    }
                    Some(_) => {}
                    None => entries.push((m.clone(), d)),
                }
            }
        }
        let value = |d: &Device| match d {
            Device::Accelerator(i) => i.to_string(),
            Device::Cpu(_) => "\"cpu\"".into(),
        };
        let mut memory: BTreeMap<Device, f64> = BTreeMap::new();
        for (l, &d) in plan.layer_device.iter().enumerate() {
            *memory.entry(d).or_insert(0.0) += plan.layers.layers[l]
                .nodes
                .iter()
                .map(|&v| plan.workload.node(v).size_bytes)
                .sum::<f64>();
        }
        let budget: Vec<String> = memory
            .iter()
            .map(|(d, &bytes)| {
                let mib = ((bytes / MIB).ceil() as u64).max(1);
                match d {
                    Device::Accelerator(i) => format!("{i}: \"{mib}MiB\""),
                    Device::Cpu(_) => format!("\"cpu\": \"{mib}MiB\""),
                }
            })
            .collect();
        let gpus = memory.keys().filter(|d| d.is_accelerator()).count();
        let mut text = format!(
            "# dnnplace export: accelerate device_map and max_memory, {gpus} GPUs{}.\n\
             # Keys are module paths, values a GPU index or \"cpu\" (accelerate/utils/modeling.py:\n\
             # check_device_map; accelerate/big_modeling.py: dispatch_model).\n",
            if cpus.is_empty() { "" } else { " and the CPU" }
        );
        if !cpus.is_empty() {
            text.push_str(
                "# accelerate keeps a \"cpu\" module's weights in host memory and runs it on the main GPU\n\
                 # (offload); dnnplace scored those nodes as computed on a CPU core.\n",
            );
        }
        text.push_str(&plan.device_comments("# "));
        text.push_str(&plan.recompute_not_carried(
            "# ",
            "accelerate's device_map",
            "checkpoint those devices' modules yourself, e.g. with torch.utils.checkpoint",
        ));
        text.push_str("device_map = {\n");
        let lines: Vec<String> = entries
            .iter()
            .map(|(k, d)| {
                format!(
                    "    {}: {}",
                    serde_json::to_string(k).expect("string"),
                    value(d)
                )
            })
            .collect();
        text.push_str(&lines.join(",\n"));
        text.push_str("\n}\n");
        text.push_str(
            "# Each device's budget is what this plan puts on it (rounded up to a MiB).\n",
        );
        text.push_str(&format!("max_memory = {{{}}}\n", budget.join(", ")));
        text.push_str(
            "# model = AutoModelForCausalLM.from_pretrained(MODEL, device_map=device_map, max_memory=max_memory)\n",
        );
        Ok(text)
    }

    fn read(&self, text: &str, w: &Workload, layers: &Layers) -> Result<Placement, String> {
        let (map, memory) = parse(text)?;
        let mut keys: Vec<(String, Device)> = Vec::new();
        for (key, value) in &map {
            keys.push((key.clone(), device_of(key, value)?));
        }
        if let Some(memory) = &memory {
            check_max_memory(memory, &keys)?;
        }
        // The most specific key: the path itself, then its ancestors, then "" (O(depth)).
        let by_key: std::collections::HashMap<&str, Device> =
            keys.iter().map(|(k, d)| (k.as_str(), *d)).collect();
        let resolve = |path: &str| -> Option<Device> {
            let mut p = path;
            loop {
                if let Some(d) = by_key.get(p) {
                    return Some(*d);
                }
                match p.rfind('.') {
                    Some(i) => p = &p[..i],
                    None => return by_key.get("").copied(),
                }
            }
        };
        // Paths with a key below them: modules that contain keyed modules.
        let mut containers: std::collections::HashSet<&str> = Default::default();
        for (k, _) in &keys {
            for (i, _) in k.match_indices('.') {
                containers.insert(&k[..i]);
            }
        }
        let mut assignment: Vec<Option<Device>> =
            (0..w.len()).map(|v| resolve(&node_module(w, v)?)).collect();
        // A node without a module or without work (a graph input), or one computed in a
        // container's own forward (its module is an ancestor of keys: GPT-2's embedding
        // sum in `transformer`), owns no parameters a key must cover: it follows the
        // other nodes of its layer when they agree on a device.
        let owns_nothing = |v: usize| {
            let node = w.node(v);
            match node_module(w, v) {
                None => true,
                Some(path) => {
                    (node.fpga_latency == 0.0 && node.cpu_latency == 0.0)
                        || containers.contains(path.as_str())
                }
            }
        };
        for layer in &layers.layers {
            let mut devices: Vec<Device> =
                layer.nodes.iter().filter_map(|&v| assignment[v]).collect();
            devices.sort();
            devices.dedup();
            if let [d] = devices.as_slice() {
                for &v in layer.nodes.iter().filter(|&&v| owns_nothing(v)) {
                    assignment[v].get_or_insert(*d);
                }
            }
        }
        let mut placement = Vec::with_capacity(w.len());
        for (v, d) in assignment.into_iter().enumerate() {
            let node = w.node(v);
            match d {
                Some(d) => placement.push(d),
                None => {
                    return Err(format!(
                        "the device_map gives no device for node {} ({}); check_device_map rejects a map that leaves a parameter without a device",
                        node.id,
                        node_module(w, v).unwrap_or_else(|| "no module".to_string())
                    ))
                }
            }
        }
        Ok(Placement::new(placement))
    }
}

/// A device_map value as a device.
fn device_of(key: &str, value: &Value) -> Result<Device, String> {
    let bad = |why: &str| Err(format!("device_map[{key:?}] = {value}: {why}"));
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(i) => Ok(Device::Accelerator(i as usize)),
            None => bad("a GPU index is a non-negative integer"),
        },
        Value::String(s) => match s.as_str() {
            "cpu" => Ok(Device::Cpu(0)),
            "disk" | "mps" | "meta" => bad(
                "this device has no counterpart in dnnplace's model (accelerators and CPU cores)",
            ),
            other => {
                let (kind, index) = other.split_once(':').unwrap_or((other, "0"));
                match (kind, index.parse::<usize>()) {
                    ("cuda" | "xpu" | "npu" | "mlu" | "musa" | "hpu" | "sdaa", Ok(i)) => {
                        Ok(Device::Accelerator(i))
                    }
                    _ => bad("expected a GPU index, \"cpu\" or a device such as \"cuda:1\""),
                }
            }
        },
        _ => bad("expected a GPU index or a device name"),
    }
}

/// `convert_file_size_to_int`: bytes from an integer or a string with a unit.
pub fn size_to_bytes(value: &Value) -> Result<u64, String> {
    let bad = || {
        format!("`size` {value} is not in a valid format. Use an integer for bytes, or a string with an unit (like '5.0GB').")
    };
    match value {
        Value::Number(n) => n.as_u64().ok_or_else(bad),
        Value::String(s) => {
            let upper = s.to_uppercase();
            let number = |cut: usize| s[..s.len() - cut].trim().parse::<f64>().map_err(|_| bad());
            let bytes = if upper.ends_with("GIB") {
                number(3)? * 1024f64.powi(3)
            } else if upper.ends_with("MIB") {
                number(3)? * 1024f64.powi(2)
            } else if upper.ends_with("KIB") {
                number(3)? * 1024.0
            } else {
                let scale = if upper.ends_with("GB") {
                    1e9
                } else if upper.ends_with("MB") {
                    1e6
                } else if upper.ends_with("KB") {
                    1e3
                } else {
                    return Err(bad());
                };
                let bits = if s.ends_with('b') { 8.0 } else { 1.0 };
                (number(2)? * scale).trunc() / bits
            };
            if bytes < 0.0 || !bytes.is_finite() {
                return Err(bad());
            }
            Ok(bytes as u64)
        }
        _ => Err(bad()),
    }
}

/// `get_max_memory`'s key rule, sizes that parse, and a budget for every device in the map.
fn check_max_memory(
    memory: &BTreeMap<String, Value>,
    keys: &[(String, Device)],
) -> Result<(), String> {
    for (k, v) in memory {
        if !(k.parse::<usize>().is_ok() || ["mps", "cpu", "disk"].contains(&k.as_str())) {
            return Err(format!(
                "max_memory: Device {k} is not recognized, available devices are integers(for GPU/XPU), 'mps', 'cpu' and 'disk'"
            ));
        }
        size_to_bytes(v).map_err(|e| format!("max_memory[{k}]: {e}"))?;
    }
    for (key, d) in keys {
        let name = match d {
            Device::Accelerator(i) => i.to_string(),
            Device::Cpu(_) => "cpu".to_string(),
        };
        if !memory.contains_key(&name) {
            return Err(format!(
                "max_memory has no entry for device {name}, which device_map[{key:?}] uses"
            ));
        }
    }
    Ok(())
}

/// The device_map (and max_memory, when given) from JSON or from the snippet's
/// `device_map = {…}` and `max_memory = {…}` literals.
type Maps = (BTreeMap<String, Value>, Option<BTreeMap<String, Value>>);

fn parse(text: &str) -> Result<Maps, String> {
    if let Ok(Value::Object(v)) = serde_json::from_str::<Value>(text) {
        if let Some(Value::Object(map)) = v.get("device_map") {
            let memory = v
                .get("max_memory")
                .and_then(Value::as_object)
                .map(|m| m.clone().into_iter().collect());
            return Ok((map.clone().into_iter().collect(), memory));
        }
        return Ok((v.into_iter().collect(), None));
    }
    let map =
        literal(text, "device_map")?.ok_or("no `device_map = {...}` and no JSON device_map")?;
    let map: BTreeMap<String, Value> = serde_json::from_str(&map)
        .map_err(|e| format!("device_map = {{...}}: not a dict of \"module\": device ({e})"))?;
    let memory = match literal(text, "max_memory")? {
        Some(m) => Some(python_scalar_dict(&m).map_err(|e| format!("max_memory = {{...}}: {e}"))?),
        None => None,
    };
    Ok((map, memory))
}

/// The `{…}` after `name =` at the start of a line, comments and a trailing comma removed.
fn literal(text: &str, name: &str) -> Result<Option<String>, String> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let found = line
            .trim_start()
            .strip_prefix(name)
            .is_some_and(|r| r.trim_start().starts_with('='));
        if found {
            let open = offset
                + text[offset..]
                    .find('{')
                    .ok_or(format!("{name} = has no `{{`"))?;
            let close = open
                + text[open..]
                    .find('}')
                    .ok_or(format!("{name} = {{ has no closing `}}`"))?;
            let body: String = text[open..=close]
                .lines()
                .map(|l| l.split_once('#').map_or(l, |(code, _)| code))
                .collect::<Vec<_>>()
                .join("\n");
            return Ok(Some(
                body.trim_end_matches('}')
                    .trim_end()
                    .trim_end_matches(',')
                    .to_string()
                    + "}",
            ));
        }
        offset += line.len();
    }
    Ok(None)
}

/// A Python dict of scalars whose keys may be bare integers (`{0: "1GiB", "cpu": 5}`), by
/// quoting the integer keys and parsing the result as JSON.
fn python_scalar_dict(body: &str) -> Result<BTreeMap<String, Value>, String> {
    let inner = body.trim().trim_start_matches('{').trim_end_matches('}');
    let mut quoted: Vec<String> = Vec::new();
    for entry in inner.split(',').filter(|e| !e.trim().is_empty()) {
        let (k, v) = entry
            .split_once(':')
            .ok_or(format!("{entry:?} is not `key: value`"))?;
        let k = k.trim();
        let key = if k.chars().all(|c| c.is_ascii_digit()) && !k.is_empty() {
            format!("\"{k}\"")
        } else {
            k.to_string()
        };
        quoted.push(format!("{key}: {}", v.trim()));
    }
    serde_json::from_str(&format!("{{{}}}", quoted.join(", "))).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_follow_convert_file_size_to_int() {
        // Its docstring: convert_file_size_to_int("1MiB") == 1048576.
        assert_eq!(size_to_bytes(&json!("1MiB")).unwrap(), 1_048_576);
        assert_eq!(size_to_bytes(&json!("5.0GB")).unwrap(), 5_000_000_000);
        assert_eq!(size_to_bytes(&json!("8Mb")).unwrap(), 1_000_000);
        assert_eq!(
            size_to_bytes(&json!("2gib")).unwrap(),
            2 * 1024 * 1024 * 1024
        );
        assert_eq!(size_to_bytes(&json!(1234)).unwrap(), 1234);
        assert!(size_to_bytes(&json!("12 parsecs")).is_err());
        assert!(size_to_bytes(&json!("10")).is_err());
    }

    #[test]
    fn python_dicts_with_integer_keys() {
        let m = python_scalar_dict("{0: \"10GiB\", 1: \"5GiB\", \"cpu\": \"30GiB\"}").unwrap();
        assert_eq!(m["0"], json!("10GiB"));
        assert_eq!(m["cpu"], json!("30GiB"));
    }

    #[test]
    fn device_values() {
        assert_eq!(device_of("a", &json!(2)).unwrap(), Device::Accelerator(2));
        assert_eq!(
            device_of("a", &json!("cuda:3")).unwrap(),
            Device::Accelerator(3)
        );
        assert_eq!(device_of("a", &json!("cpu")).unwrap(), Device::Cpu(0));
        assert!(device_of("a", &json!("disk"))
            .unwrap_err()
            .contains("no counterpart"));
        assert!(device_of("a", &json!(-1)).is_err());
    }
}
