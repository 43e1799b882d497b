//! Bad input is rejected with a message naming the culprit.

use dnnplace::io::parse_workload;

fn workload(nodes: &str, edges: &str, devices: &str) -> String {
    format!(r#"{{{devices}, "nodes": [{nodes}], "edges": [{edges}]}}"#)
}

const DEV: &str = r#""maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1"#;

fn node(id: i64) -> String {
    format!(
        r#"{{"id": {id}, "fpgaLatency": 1, "cpuLatency": 2, "size": 1, "supportedOnFpga": 1, "isBackwardNode": 0}}"#
    )
}

fn edge(a: i64, b: i64, cost: f64) -> String {
    format!(r#"{{"sourceId": {a}, "destId": {b}, "cost": {cost}}}"#)
}

fn error_of(text: &str) -> String {
    match parse_workload(text) {
        Ok(_) => panic!("accepted an invalid workload: {text}"),
        Err(e) => e.to_string(),
    }
}

fn nodes(ids: &[i64]) -> String {
    ids.iter().map(|&i| node(i)).collect::<Vec<_>>().join(",")
}

#[test]
fn accepts_a_valid_workload_with_int_and_bool_flags() {
    let text = workload(
        &format!(
            r#"{}, {{"id": 2, "fpgaLatency": 1, "cpuLatency": 2, "supportedOnFpga": true, "isBackwardNode": false}}"#,
            node(1)
        ),
        &edge(1, 2, 0.5),
        DEV,
    );
    let w = parse_workload(&text).unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(w.node(1).size_bytes, 0.0, "size defaults to 0");
    assert_eq!(w.out_cost(0), 0.5);
}

#[test]
fn cycle_names_a_node_on_it() {
    let e = error_of(&workload(
        &nodes(&[1, 2, 3]),
        &[edge(1, 2, 0.0), edge(2, 3, 0.0), edge(3, 2, 0.0)].join(","),
        DEV,
    ));
    assert!(e.contains("cycle"), "{e}");
    assert!(
        e.contains("2 -> 3 -> 2") || e.contains("3 -> 2 -> 3"),
        "{e}"
    );
}

#[test]
fn duplicate_id() {
    let e = error_of(&workload(&nodes(&[1, 7, 7]), "", DEV));
    assert!(e.contains("duplicate node id 7"), "{e}");
}

#[test]
fn unknown_endpoint() {
    let e = error_of(&workload(&nodes(&[1, 2]), &edge(1, 9, 0.0), DEV));
    assert!(e.contains("unknown node id 9"), "{e}");
}

#[test]
fn self_loop() {
    let e = error_of(&workload(&nodes(&[1, 2]), &edge(2, 2, 0.0), DEV));
    assert!(e.contains("self-loop on node 2"), "{e}");
}

#[test]
fn differing_out_costs() {
    let e = error_of(&workload(
        &nodes(&[1, 2, 3]),
        &[edge(1, 2, 0.5), edge(1, 3, 0.25)].join(","),
        DEV,
    ));
    assert!(
        e.contains("node 1 has out-edges with different costs"),
        "{e}"
    );
}

#[test]
fn negative_numbers() {
    let e = error_of(&workload(&nodes(&[1, 2]), &edge(1, 2, -1.0), DEV));
    assert!(e.contains("cost of edge #0 (1 -> 2) is -1"), "{e}");
    let bad = r#"{"id": 5, "fpgaLatency": -3, "cpuLatency": 2}"#;
    let e = error_of(&workload(bad, "", DEV));
    assert!(e.contains("fpgaLatency of node 5 is -3"), "{e}");
}

#[test]
fn non_finite_numbers_are_rejected() {
    let bad = r#"{"id": 5, "fpgaLatency": 1e999, "cpuLatency": 2}"#;
    let e = error_of(&workload(bad, "", DEV));
    assert!(
        e.contains("nodes[0].fpgaLatency") || e.contains("fpgaLatency of node 5"),
        "{e}"
    );
}

#[test]
fn backward_to_forward_edge() {
    let bw = r#"{"id": 2, "fpgaLatency": 1, "cpuLatency": 2, "isBackwardNode": 1}"#;
    let e = error_of(&workload(
        &format!("{}, {bw}", node(1)),
        &edge(2, 1, 0.0),
        DEV,
    ));
    assert!(e.contains("from backward node 2 to forward node 1"), "{e}");
}

#[test]
fn missing_and_mistyped_fields_name_the_json_path() {
    let e = error_of(&workload(r#"{"id": 1, "cpuLatency": 2}"#, "", DEV));
    assert!(e.contains("nodes[0]") && e.contains("fpgaLatency"), "{e}");
    let e = error_of(&workload(
        r#"{"id": 1, "fpgaLatency": "fast", "cpuLatency": 2}"#,
        "",
        DEV,
    ));
    assert!(e.contains("nodes[0].fpgaLatency"), "{e}");
    let e = error_of(&workload(&nodes(&[1]), r#"{"sourceId": 1}"#, DEV));
    assert!(e.contains("edges[0]") && e.contains("destId"), "{e}");
    let e = error_of(&workload(
        r#"{"id": 1, "fpgaLatency": 1, "cpuLatency": 2, "supportedOnFpga": 3}"#,
        "",
        DEV,
    ));
    assert!(e.contains("nodes[0].supportedOnFpga"), "{e}");
    let e = error_of(r#"{"maxFPGAs": 1, "maxCPUs": 1, "nodes": [], "edges": []}"#);
    assert!(e.contains("maxSizePerFPGA"), "{e}");
}

#[test]
fn no_feasible_placement_says_why() {
    let no_cpu = r#""maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0"#;
    let big = r#"{"id": 4, "fpgaLatency": 1, "cpuLatency": 2, "size": 500}"#;
    let e = error_of(&workload(big, "", no_cpu));
    assert!(
        e.contains("node 4 needs 500 bytes") && e.contains("maxCPUs is 0"),
        "{e}"
    );
    let cpu_only = r#"{"id": 6, "fpgaLatency": 1, "cpuLatency": 2, "supportedOnFpga": 0}"#;
    let e = error_of(&workload(cpu_only, "", no_cpu));
    assert!(
        e.contains("node 6 is not supported on an accelerator and maxCPUs is 0"),
        "{e}"
    );
    let e = error_of(&workload(
        &nodes(&[1]),
        "",
        r#""maxSizePerFPGA": 100, "maxFPGAs": 0, "maxCPUs": 0"#,
    ));
    assert!(e.contains("no accelerator and no CPU"), "{e}");
}

#[test]
fn placements_name_their_problems() {
    use dnnplace::io::parse_placement;
    let cc = |id: i64, c: i64| {
        format!(r#"{{"id": {id}, "fpgaLatency": 1, "cpuLatency": 2, "colorClass": {c}}}"#)
    };
    let w = parse_workload(&workload(
        &[cc(1, 1), cc(2, 1), cc(3, 2)].join(","),
        &edge(1, 3, 0.5),
        DEV,
    ))
    .unwrap();
    let e = parse_placement(r#"{"fpgas": [{"nodes": [1, 9]}]}"#, &w)
        .unwrap_err()
        .to_string();
    assert!(e.contains("fpgas[0] lists node 9"), "{e}");
    let e = parse_placement(r#"{"fpgas": [{"nodes": [1, 3]}, {"nodes": [3]}]}"#, &w)
        .unwrap_err()
        .to_string();
    assert!(e.contains("node 3 is listed twice"), "{e}");
    let e = parse_placement(r#"{"fpgas": [{"nodes": [1]}]}"#, &w)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("node 3 is not listed and no node of its colour class 2 is listed"),
        "{e}"
    );
    // Node 2 follows its colour class.
    let p = parse_placement(r#"{"fpgas": [{"nodes": [3]}, {"nodes": [1]}]}"#, &w).unwrap();
    assert_eq!(p.assignment[1], dnnplace::model::Device::Accelerator(1));
}
