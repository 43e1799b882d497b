//! The workload JSON's optional node fields beyond MODEL.md — `module` and the parts of
//! `size` (`weightBytes`, `gradientBytes`, `optimizerBytes`, `activationBytes`) — read,
//! validated and written back unchanged; a file without them keeps today's meaning.

use dnnplace::io::{parse_workload, workload_to_json};
use dnnplace::model::NodeMemory;

fn workload(node_fields: &str) -> String {
    format!(
        r#"{{"maxSizePerFPGA": 1000, "maxFPGAs": 2, "maxCPUs": 1,
            "nodes": [{{"id": 1, "fpgaLatency": 1, "cpuLatency": 2, "size": 100 {node_fields}}},
                      {{"id": 2, "fpgaLatency": 1, "cpuLatency": 2, "size": 10}}],
            "edges": [{{"sourceId": 1, "destId": 2, "cost": 0.5}}]}}"#
    )
}

#[test]
fn module_and_memory_parts_are_read_and_written_back() {
    let text = workload(
        r#", "name": "q", "module": "model.layers.0.self_attn.q_proj", "layerId": 0,
           "weightBytes": 40, "gradientBytes": 20, "optimizerBytes": 30, "activationBytes": 10"#,
    );
    let w = parse_workload(&text).unwrap();
    let n = w.node(0);
    assert_eq!(n.module.as_deref(), Some("model.layers.0.self_attn.q_proj"));
    let m = NodeMemory {
        weight_bytes: 40.0,
        gradient_bytes: 20.0,
        optimizer_bytes: 30.0,
        activation_bytes: 10.0,
    };
    assert_eq!(n.memory, Some(m));
    // Four micro-batches in flight: three more stashes of 10 bytes.
    assert_eq!(
        NodeMemory::bytes_in_flight(n.memory.as_ref(), n.size_bytes, 4),
        130.0
    );
    // The second node, like a published paper workload, has neither field.
    assert_eq!((w.node(1).module.as_ref(), w.node(1).memory), (None, None));
    assert_eq!(
        NodeMemory::bytes_in_flight(None, w.node(1).size_bytes, 4),
        10.0
    );
    let json = workload_to_json(&w);
    assert!(
        json.contains(r#""module": "model.layers.0.self_attn.q_proj""#),
        "{json}"
    );
    assert!(json.contains(r#""activationBytes": 10.0"#), "{json}");
    let again = parse_workload(&json).unwrap();
    assert_eq!(again.nodes(), w.nodes());
    assert_eq!(workload_to_json(&again), json);
}

#[test]
fn a_partial_breakdown_defaults_the_other_parts_to_zero() {
    let w = parse_workload(&workload(r#", "weightBytes": 60"#)).unwrap();
    let m = w.node(0).memory.unwrap();
    assert_eq!(
        (
            m.weight_bytes,
            m.gradient_bytes,
            m.optimizer_bytes,
            m.activation_bytes
        ),
        (60.0, 0.0, 0.0, 0.0)
    );
}

#[test]
fn bad_breakdowns_are_errors_naming_the_node_and_field() {
    let err = parse_workload(&workload(r#", "weightBytes": 80, "activationBytes": 30"#))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("node 1") && err.contains("exceeds its size 100"),
        "{err}"
    );
    let err = parse_workload(&workload(r#", "optimizerBytes": -1"#))
        .unwrap_err()
        .to_string();
    assert!(err.contains("optimizerBytes of node 1"), "{err}");
    let err = parse_workload(&workload(r#", "gradientBytes": "many""#))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nodes[0].gradientBytes"), "{err}");
    let err = parse_workload(&workload(r#", "module": 3"#))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nodes[0].module"), "{err}");
}
