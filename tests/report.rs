//! The HTML report's structure, parsed with a real XML parser (roxmltree) on its SVG
//! parts: one load bar and one memory bar per device, the bottleneck marked once on the
//! right device, one Gantt row per device with every task, units on the axes, the graph's
//! nodes with their names on hover; the page fetches nothing; big graphs are collapsed.

mod pipeline_gen;

use dnnplace::model::schedule::Schedule;
use dnnplace::model::{Device, DeviceSet, Node, Placement, Workload};
use dnnplace::report::html::{gantt_svg, report_html, ReportInput, GRAPH_CAP};
use dnnplace::score::evaluate;
use dnnplace::simulate::{simulate, Settings};
use dnnplace::solve::{dp::Dp, plan, Problem};

/// Every `<svg …>…</svg>` block of the page (they are not nested).
fn svg_blocks(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("closed") + start + "</svg>".len();
        out.push(rest[start..end].to_string());
        rest = &rest[end..];
    }
    out
}

fn has_class(node: &roxmltree::Node, class: &str) -> bool {
    node.attribute("class")
        .is_some_and(|c| c.split_whitespace().any(|x| x == class))
}

fn with_class<'a>(doc: &'a roxmltree::Document, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants().filter(|n| has_class(n, class)).collect()
}

/// The text of every `<text>` element, trimmed (SVG collapses the surrounding white space).
fn texts(doc: &roxmltree::Document) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

struct Page {
    html: String,
    svgs: Vec<(String, String)>,
}

impl Page {
    fn new(html: String) -> Page {
        let svgs = svg_blocks(&html)
            .into_iter()
            .map(|s| {
                let doc = roxmltree::Document::parse(&s)
                    .unwrap_or_else(|e| panic!("an SVG block does not parse: {e}"));
                let id = doc.root_element().attribute("id").unwrap_or("").to_string();
                (id, s)
            })
            .collect();
        Page { html, svgs }
    }
    fn svg(&self, id: &str) -> &str {
        &self
            .svgs
            .iter()
            .find(|(i, _)| i == id)
            .unwrap_or_else(|| panic!("no <svg id=\"{id}\">"))
            .1
    }
}

/// A training chain with a DP plan, simulated with 1F1B.
fn training_case() -> (Workload, Placement, dnnplace::solve::Plan) {
    let (mut w, _) = pipeline_gen::uniform_chain(4, 3, 4, 1.0, 2.0, true, 0.25);
    w = w
        .with_devices(DeviceSet {
            accelerators: 4,
            memory_per_accelerator_bytes: 20.0,
            cpus: 1,
        })
        .unwrap();
    let planned = plan(&Dp, &Problem::throughput(&w)).unwrap();
    let placement = planned.outcome.placement.clone().unwrap();
    (w, placement, planned)
}

#[test]
fn report_structure() {
    let (w, placement, planned) = training_case();
    let e = planned.evaluation.as_ref().unwrap();
    let m = 5;
    let sim = simulate(
        &w,
        &placement,
        &Settings {
            schedule: Schedule::OneFOneB,
            micro_batches: m,
        },
    )
    .unwrap();
    let html = report_html(&ReportInput {
        title: "chain <4 stages> & \"quotes\"",
        workload: &w,
        placement: &placement,
        evaluation: e,
        outcome: Some(&planned.outcome),
        simulation: Some(&sim),
    });
    let page = Page::new(html);
    let devices: Vec<String> = e.devices.iter().map(|d| d.device.to_string()).collect();
    assert!(
        devices.len() >= 2,
        "the DP uses several devices: {devices:?}"
    );
    let bottleneck = e.bottleneck.unwrap().to_string();

    // Load bars: one per device, in order; the bottleneck marked once, on its device.
    let loads = roxmltree::Document::parse(page.svg("loads")).unwrap();
    let bars: Vec<String> = with_class(&loads, "load-bar")
        .iter()
        .map(|n| n.attribute("data-device").unwrap().to_string())
        .collect();
    assert_eq!(bars, devices);
    let marks = with_class(&loads, "bottleneck");
    assert_eq!(marks.len(), 1, "one bottleneck mark");
    assert_eq!(marks[0].attribute("data-device"), Some(bottleneck.as_str()));
    assert!(marks[0].text().unwrap().trim().ends_with("bottleneck"));
    let outlined = with_class(&loads, "is-bottleneck");
    assert_eq!(outlined.len(), 1);
    assert_eq!(
        outlined[0].attribute("data-device"),
        Some(bottleneck.as_str())
    );
    assert_eq!(with_class(&loads, "compute").len(), devices.len());
    assert_eq!(with_class(&loads, "communication").len(), devices.len());
    assert_eq!(with_class(&loads, "tps-line").len(), 1);
    assert!(texts(&loads).iter().any(|t| t == "load per sample (ms)"));
    for bar in with_class(&loads, "load-bar") {
        let title = bar
            .children()
            .find(|c| c.has_tag_name("title"))
            .unwrap()
            .text()
            .unwrap();
        assert!(
            title.contains("compute") && title.contains(" ms"),
            "{title}"
        );
    }

    // Memory bars against the limit.
    let memory = roxmltree::Document::parse(page.svg("memory")).unwrap();
    let bars: Vec<String> = with_class(&memory, "memory-bar")
        .iter()
        .map(|n| n.attribute("data-device").unwrap().to_string())
        .collect();
    assert_eq!(bars, devices);
    let accelerators = e
        .devices
        .iter()
        .filter(|d| d.device.is_accelerator())
        .count();
    assert_eq!(
        with_class(&memory, "limit-line").len(),
        accelerators + 1,
        "one limit mark per accelerator, one in the legend"
    );
    assert!(
        texts(&memory).iter().any(|t| t == "memory (B)"),
        "{:?}",
        texts(&memory)
    );

    // Gantt: one row per device, every task once, time in ms.
    let gantt = roxmltree::Document::parse(page.svg("gantt")).unwrap();
    let rows = with_class(&gantt, "gantt-row");
    let row_devices: Vec<String> = rows
        .iter()
        .map(|n| n.attribute("data-device").unwrap().to_string())
        .collect();
    let simulated: Vec<String> = sim.devices.iter().map(|d| d.device.to_string()).collect();
    assert_eq!(row_devices, simulated);
    for (row, d) in rows.iter().zip(&sim.devices) {
        let tasks = row.descendants().filter(|n| has_class(n, "task")).count();
        assert_eq!(tasks, d.pieces * m, "{}: one box per task", d.device);
    }
    assert_eq!(with_class(&gantt, "task").len(), sim.tasks.len());
    assert_eq!(
        with_class(&gantt, "forward").len() + with_class(&gantt, "backward").len(),
        sim.tasks.len()
    );
    assert!(texts(&gantt).iter().any(|t| t == "time (ms)"));

    // Memory over time: one line per device.
    let over_time = roxmltree::Document::parse(page.svg("memory-time")).unwrap();
    assert_eq!(
        with_class(&over_time, "memory-line").len(),
        sim.devices.len()
    );
    assert!(texts(&over_time).iter().any(|t| t == "time (ms)"));
    assert!(texts(&over_time).iter().any(|t| t.starts_with("memory (")));

    // Graph: every node drawn with its name on hover and its device's colour.
    let graph = roxmltree::Document::parse(page.svg("graph")).unwrap();
    let nodes = with_class(&graph, "graph-node");
    assert_eq!(nodes.len(), w.len());
    for v in 0..w.len() {
        let name = w.node(v).name.clone().unwrap();
        let found = nodes.iter().find(|n| {
            let title = n
                .children()
                .find(|c| c.has_tag_name("title"))
                .and_then(|t| t.text())
                .unwrap_or("");
            title.starts_with(&format!("{name} (id {})", w.node(v).id))
        });
        let found = found.unwrap_or_else(|| panic!("node {name} is drawn with its name"));
        assert_eq!(
            found.attribute("data-device"),
            Some(placement.assignment[v].to_string().as_str())
        );
    }

    // Self-contained, and text escaped.
    let html = &page.html;
    assert!(!html.contains("<script"), "no scripts");
    let without_ns = html.replace("http://www.w3.org/2000/svg", "");
    assert!(
        !without_ns.contains("http:") && !without_ns.contains("https:"),
        "no network"
    );
    assert!(
        !html.contains(" src=") && !html.contains("url("),
        "nothing to fetch"
    );
    assert!(html.contains("chain &lt;4 stages&gt; &amp; &quot;quotes&quot;"));
    assert!(html.contains("lower bound") && html.contains("proven optimal"));
    assert!(with_class(&loads, "recompute").is_empty() && !html.contains("recomputes"));

    // The same plan with its first accelerator recomputing: that bar gets a labelled
    // recompute segment as long as the device's forward pass (summed here from the nodes),
    // between compute and communication, and the page says "recomputes" for it alone.
    let first = placement.assignment[0];
    assert!(first.is_accelerator());
    let recomputing = placement.clone().with_recompute(vec![first]);
    let e = evaluate(&w, &recomputing, false);
    let forward: f64 = (0..w.len())
        .filter(|&v| placement.assignment[v] == first && !w.node(v).is_backward)
        .map(|v| w.node(v).fpga_latency)
        .sum();
    assert!(forward > 0.0);
    let page = Page::new(report_html(&ReportInput {
        title: "recomputing",
        workload: &w,
        placement: &recomputing,
        evaluation: &e,
        outcome: None,
        simulation: None,
    }));
    let loads = roxmltree::Document::parse(page.svg("loads")).unwrap();
    let segments = with_class(&loads, "recompute");
    assert_eq!(segments.len(), 1);
    let label = first.to_string();
    assert_eq!(segments[0].attribute("data-device"), Some(label.as_str()));
    let title = segments[0]
        .children()
        .find(|c| c.has_tag_name("title"))
        .unwrap()
        .text()
        .unwrap();
    assert!(
        title.contains("recomputes") && title.contains(&format!("{forward:.3} ms")),
        "{title}"
    );
    let x = |n: &roxmltree::Node, a: &str| n.attribute(a).unwrap().parse::<f64>().unwrap();
    let row = segments[0].parent().unwrap();
    let compute = row.children().find(|c| has_class(c, "compute")).unwrap();
    let communication = row
        .children()
        .find(|c| has_class(c, "communication"))
        .unwrap();
    let compute_ms = e
        .devices
        .iter()
        .find(|d| d.device == first)
        .unwrap()
        .compute;
    assert!(x(&segments[0], "x") >= x(&compute, "x") + x(&compute, "width") - 0.011);
    assert!(x(&communication, "x") >= x(&segments[0], "x") + x(&segments[0], "width") - 0.011);
    let ratio = x(&segments[0], "width") / x(&compute, "width");
    assert!(
        (ratio - forward / compute_ms).abs() < 0.05 * ratio + 0.01,
        "{ratio} vs {}",
        forward / compute_ms
    );
    assert_eq!(with_class(&loads, "recompute-legend").len(), 1);
    let values: Vec<String> = texts(&loads)
        .into_iter()
        .filter(|t| t.contains("recomputes"))
        .collect();
    assert_eq!(values.len(), 1, "{values:?}");
    assert_eq!(
        page.html.matches("(recomputes: +").count(),
        1,
        "the device table says it once"
    );
    assert!(page
        .html
        .contains(&format!("(recomputes: +{forward:.3} ms)")));
}

#[test]
fn node_names_are_escaped_in_titles() {
    let nodes = vec![
        Node {
            id: 1,
            name: Some("a<b>&\"c\"".into()),
            fpga_latency: 1.0,
            cpu_latency: 2.0,
            size_bytes: 1.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        },
        Node {
            id: 2,
            name: Some("</title></svg><script>".into()),
            fpga_latency: 1.0,
            cpu_latency: 2.0,
            size_bytes: 1.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        },
    ];
    let w = Workload::new(
        nodes,
        vec![(1, 2, 0.5, 0.0)],
        DeviceSet {
            accelerators: 2,
            memory_per_accelerator_bytes: 10.0,
            cpus: 0,
        },
    )
    .unwrap();
    let p = Placement::new(vec![Device::Accelerator(0), Device::Accelerator(1)]);
    let e = evaluate(&w, &p, false);
    let sim = simulate(
        &w,
        &p,
        &Settings {
            schedule: Schedule::GPipe,
            micro_batches: 3,
        },
    )
    .unwrap();
    let html = report_html(&ReportInput {
        title: "t",
        workload: &w,
        placement: &p,
        evaluation: &e,
        outcome: None,
        simulation: Some(&sim),
    });
    assert!(!html.contains("<script"));
    let page = Page::new(html);
    let graph = roxmltree::Document::parse(page.svg("graph")).unwrap();
    let titles: Vec<&str> = graph
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    assert!(
        titles.iter().any(|t| t.starts_with("a<b>&\"c\" (id 1)")),
        "{titles:?}"
    );
    assert!(
        titles
            .iter()
            .any(|t| t.starts_with("</title></svg><script> (id 2)")),
        "{titles:?}"
    );
}

/// The Gantt chart alone is a standalone SVG file with one row per device.
#[test]
fn gantt_alone_is_a_standalone_svg() {
    let (w, placement) = pipeline_gen::uniform_chain(3, 2, 3, 1.0, 2.0, true, 0.0);
    let sim = simulate(
        &w,
        &placement,
        &Settings {
            schedule: Schedule::GPipe,
            micro_batches: 4,
        },
    )
    .unwrap();
    let text = gantt_svg(&sim);
    let doc = roxmltree::Document::parse(&text).unwrap();
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    assert_eq!(with_class(&doc, "gantt-row").len(), 3);
    assert_eq!(with_class(&doc, "task").len(), 3 * 2 * 4);
    assert!(doc.descendants().any(|n| n.has_tag_name("style")));
}

/// A generated graph of 12,000 operators with branches and skip edges: the page is built,
/// the graph is collapsed to at most GRAPH_CAP blocks and says so.
#[test]
fn big_graphs_are_collapsed() {
    for with_layers in [false, true] {
        let n = 12_000;
        let mut nodes = Vec::with_capacity(n);
        let mut edges = Vec::new();
        for i in 0..n {
            nodes.push(Node {
                id: i as i64,
                name: Some(format!("op{i}")),
                fpga_latency: 0.01 + (i % 7) as f64 * 0.003,
                cpu_latency: 0.5,
                size_bytes: 1e6,
                supported_on_accelerator: true,
                is_backward: false,
                color_class: None,
                layer_id: with_layers.then_some(i as i64 / 40),
                module: None,
                memory: None,
            });
            if i > 0 {
                edges.push(((i - 1) as i64, i as i64, 0.001, 0.0));
            }
            if i >= 5 && i % 5 == 0 {
                edges.push(((i - 5) as i64, i as i64, 0.001, 0.0));
            }
            if i % 3 == 1 && i + 2 < n {
                edges.push((i as i64, (i + 2) as i64, 0.001, 0.0));
            }
        }
        let k = 8;
        let w = Workload::new(
            nodes,
            edges,
            DeviceSet {
                accelerators: k,
                memory_per_accelerator_bytes: 1e12,
                cpus: 0,
            },
        )
        .unwrap();
        let p = Placement::new((0..n).map(|i| Device::Accelerator(i * k / n)).collect());
        let started = std::time::Instant::now();
        let e = evaluate(&w, &p, false);
        let sim = simulate(
            &w,
            &p,
            &Settings {
                schedule: Schedule::OneFOneB,
                micro_batches: 16,
            },
        )
        .unwrap();
        let html = report_html(&ReportInput {
            title: "big",
            workload: &w,
            placement: &p,
            evaluation: &e,
            outcome: None,
            simulation: Some(&sim),
        });
        println!(
            "{n} nodes (layer ids: {with_layers}): page of {} KiB in {:.2} s",
            html.len() / 1024,
            started.elapsed().as_secs_f64()
        );
        let page = Page::new(html);
        let graph = roxmltree::Document::parse(page.svg("graph")).unwrap();
        let drawn = with_class(&graph, "graph-node").len();
        assert!(drawn <= GRAPH_CAP && drawn >= k, "{drawn} blocks");
        assert!(page
            .html
            .contains(&format!("{n} nodes drawn as {drawn} blocks")));
        assert_eq!(
            with_class(&graph, "block").len(),
            drawn,
            "every vertex is a block"
        );
        if with_layers {
            assert!(page.html.contains("one per layerId"));
        }
    }
}

/// Beyond MAX_BOXES tasks the Gantt chart merges boxes below its resolution and says so;
/// every row is still there.
#[test]
fn long_schedules_are_merged_in_the_gantt_chart() {
    let (w, placement) = pipeline_gen::uniform_chain(4, 1, 4, 1.0, 2.0, true, 0.0);
    let m = 2000;
    let sim = simulate(
        &w,
        &placement,
        &Settings {
            schedule: Schedule::OneFOneB,
            micro_batches: m,
        },
    )
    .unwrap();
    assert!(sim.tasks.len() > dnnplace::report::charts::gantt::MAX_BOXES);
    let (chart, note) = dnnplace::report::charts::gantt::gantt(&sim);
    let text = chart.to_string();
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(with_class(&doc, "gantt-row").len(), 4);
    let boxes = with_class(&doc, "task").len();
    assert!(
        boxes < sim.tasks.len() / 4,
        "{boxes} boxes for {} tasks",
        sim.tasks.len()
    );
    assert!(note
        .unwrap()
        .contains(&format!("{} tasks", sim.tasks.len())));
    let merged = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .filter(|t| t.contains("merged"))
        .count();
    assert!(merged > 0);
}
