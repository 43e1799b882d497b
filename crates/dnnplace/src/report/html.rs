//! The visual plan report: one self-contained HTML page (inline SVG and CSS; no script,
//! no font or image to fetch) with the plan's figures, per-device load and memory bars
//! with the bottleneck and the bound, the simulated schedule as a Gantt chart with memory
//! over time, and the operator graph coloured by device. [`gantt_svg`] is the Gantt chart
//! alone, as a standalone SVG file.
//!
//! The charts are built in [`super::charts`]; this module only assembles them and escapes
//! the text it writes itself.

use std::fmt::Write;

use super::charts::bars::{self, DeviceBar};
use super::charts::{gantt, graph, ms};
use super::table::{gap, human_bytes, status_text};
use crate::model::{Placement, Workload};
use crate::score::Evaluation;
use crate::simulate::Simulation;
use crate::solve::{Outcome, Status};

/// Most vertices the graph chart draws before it collapses nodes into blocks.
pub const GRAPH_CAP: usize = 400;

/// Everything the page shows.
pub struct ReportInput<'a> {
    /// What the page is about (the workload's file name).
    pub title: &'a str,
    pub workload: &'a Workload,
    pub placement: &'a Placement,
    pub evaluation: &'a Evaluation,
    /// The method's outcome (status, bound), when the plan was solved here.
    pub outcome: Option<&'a Outcome>,
    pub simulation: Option<&'a Simulation>,
}

pub(crate) const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 20px 24px; color: #222; background: #fff; }
h1 { font-size: 21px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 26px 0 6px 0; }
p.sub, p.note, li.note { color: #555; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; }
table.facts td:first-child { color: #555; }
tr.bottleneck td { font-weight: bold; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 5px; border-radius: 2px; }
.scroll { overflow-x: auto; border: 1px solid #eee; }
.figures { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0 6px 0; }
.figure { border: 1px solid #e0e0e0; border-radius: 6px; padding: 6px 12px; min-width: 150px; }
.figure .name { font-size: 12px; color: #666; }
.figure .value { font-size: 19px; font-weight: 600; }
.figure .detail { font-size: 11px; color: #777; max-width: 260px; }
.pair { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.pair section { border: 1px solid #eee; padding: 0 8px; }
.pair h2 { margin-top: 8px; }
.pair p.note { max-width: 620px; }
.chart text { font-size: 11px; fill: #222; }
.chart .legend { font-size: 11px; fill: #444; }
.chart .row-label { font-size: 12px; }
.chart .axis-line { stroke: #444; stroke-width: 1; }
.chart .grid { stroke: #e2e2e2; stroke-width: 0.7; }
.chart .axis-title { font-size: 12px; fill: #444; }
.chart .tps-line { stroke: #000; stroke-width: 1.3; stroke-dasharray: 5 3; }
.chart .bound-line { stroke: #1a8f4a; stroke-width: 1.3; stroke-dasharray: 2 3; }
.chart .bound-line-label { fill: #1a8f4a; }
.chart .limit-line { stroke: #c62828; stroke-width: 1.6; stroke-dasharray: 6 3; }
.chart .bottleneck { font-weight: bold; fill: #000; }
.chart .over-limit { font-weight: bold; fill: #c62828; }
.chart .inside { fill: #fff; font-weight: 600; }
.chart .lane { fill: #f5f5f5; }
.chart .comm { fill: #222; fill-opacity: 0.45; }
.chart .mb { font-size: 9px; fill: #fff; }
.chart .edge { fill: none; stroke: #8a8a8a; stroke-opacity: 0.5; stroke-width: 0.8; }
.chart .graph-node { stroke: #333; stroke-width: 0.6; }
.chart .graph-node.backward { stroke-dasharray: 2 1.5; }
"#;

/// `&`, `<`, `>`, `"` and `'` as entities, for text this module writes into HTML.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A fraction as a percentage with two decimals.
fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// The bars of every device that holds nodes.
pub fn device_bars(
    w: &Workload,
    e: &Evaluation,
    simulation: Option<&Simulation>,
) -> Vec<DeviceBar> {
    e.devices
        .iter()
        .map(|d| DeviceBar {
            device: d.device,
            nodes: d.nodes,
            compute_ms: d.compute,
            // Its own segment (crate::model::recompute).
            recompute_ms: d.recompute,
            recomputes: d.recomputes,
            communication_ms: d.communication,
            memory_bytes: d.memory_bytes,
            peak_memory_bytes: simulation
                .and_then(|s| s.devices.iter().find(|x| x.device == d.device))
                .map(|x| x.peak_memory_bytes),
            memory_limit_bytes: d
                .device
                .is_accelerator()
                .then_some(w.devices().memory_per_accelerator_bytes),
        })
        .collect()
}

/// The page (module doc): key figures, the load and memory bars, the schedule, the graph,
/// then the details as tables.
pub fn report_html(input: &ReportInput) -> String {
    let mut page = String::new();
    heading(&mut page, input);
    key_figures(&mut page, input);
    bar_charts(&mut page, input);
    if let Some(s) = input.simulation {
        schedule_section(&mut page, s);
    }
    graph_section(&mut page, input);
    let _ = writeln!(
        page,
        "<h2 id=\"details\">Details</h2>\n<div class=\"pair\"><table class=\"facts\">"
    );
    facts_table(&mut page, input);
    device_table(&mut page, input);
    violations(&mut page, input.evaluation);
    let _ = writeln!(
        page,
        "<p class=\"sub\">Generated by dnnplace {}. Self-contained: no scripts, nothing fetched from the network.</p>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION")
    );
    page
}

/// The document's head (title, styles) and the page's heading: the workload's size and
/// the device set.
fn heading(page: &mut String, input: &ReportInput) {
    let w = input.workload;
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{} – dnnplace plan report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(input.title)
    );
    let d = w.devices();
    let _ = writeln!(page, "<h1>Plan report: {}</h1>", escape(input.title));
    let _ = writeln!(
        page,
        "<p class=\"sub\">{} nodes, {} edges, {} graph · device set: {} accelerators × {}, {} CPU cores · times in ms, memory in binary units (MiB, GiB)</p>",
        w.len(),
        w.edges().len(),
        if w.is_training() { "training" } else { "inference" },
        d.accelerators,
        human_bytes(d.memory_per_accelerator_bytes),
        d.cpus
    );
}

/// One key figure: its name, its value, and a line of detail.
struct Figure {
    name: String,
    value: String,
    detail: String,
}

impl Figure {
    fn new(name: &str, value: String, detail: String) -> Figure {
        Figure {
            name: name.into(),
            value,
            detail,
        }
    }
}

/// The key figures as boxes: TPS and its bottleneck, the bound and gap, the simulated
/// iteration time, time per sample and bubble, and the largest memory.
fn key_figures(page: &mut String, input: &ReportInput) {
    let e = input.evaluation;
    let sim = input.simulation;
    let mut figures: Vec<Figure> = Vec::new();
    let bottleneck = e.bottleneck.map_or("-".to_string(), |b| b.to_string());
    figures.push(Figure::new(
        "Time-Per-Sample",
        ms(e.max_load),
        format!("max load, bottleneck {bottleneck}"),
    ));
    figures.push(bound_figure(input.outcome, e.max_load));
    if let Some(s) = sim {
        figures.extend(simulation_figures(s));
    }
    let peak = e
        .devices
        .iter()
        .map(|dl| {
            sim.and_then(|s| s.devices.iter().find(|x| x.device == dl.device))
                .map_or(dl.memory_bytes, |r| r.peak_memory_bytes)
        })
        .fold(0.0, f64::max);
    figures.push(Figure::new(
        "largest memory",
        human_bytes(peak),
        format!(
            "limit {} per accelerator",
            human_bytes(input.workload.devices().memory_per_accelerator_bytes)
        ),
    ));
    let _ = writeln!(page, "<div class=\"figures\" id=\"figures\">");
    for f in &figures {
        let _ = writeln!(
            page,
            "<div class=\"figure\"><div class=\"name\">{}</div><div class=\"value\">{}</div><div class=\"detail\">{}</div></div>",
            escape(&f.name),
            escape(&f.value),
            escape(&f.detail)
        );
    }
    let _ = writeln!(page, "</div>");
}

/// The lower bound and gap of the method's outcome (0% when proven optimal; none without
/// a bound or for a given plan).
fn bound_figure(outcome: Option<&Outcome>, max_load: f64) -> Figure {
    let name = "lower bound · gap";
    match outcome {
        Some(o) if o.status == Status::Optimal => Figure::new(
            name,
            format!("{} · 0%", ms(max_load)),
            format!("{}: proven optimal", o.method),
        ),
        Some(o) if o.bound > 0.0 => Figure::new(
            name,
            format!("{} · {}", ms(o.bound), pct(gap(o.objective, o.bound))),
            format!("{}: {}", o.method, status_text(o)),
        ),
        Some(o) => Figure::new(
            name,
            "none".into(),
            format!("{}: {}", o.method, status_text(o)),
        ),
        None => Figure::new(name, "none".into(), "a given plan, not solved here".into()),
    }
}

/// The simulation's figures: iteration time with its proven bound, time per sample (and
/// its steady state), and the bubble.
fn simulation_figures(s: &Simulation) -> [Figure; 3] {
    let schedule = if s.training {
        s.schedule.to_string()
    } else {
        "plain pipeline".into()
    };
    [
        Figure::new(
            "iteration time T",
            ms(s.iteration_ms),
            format!(
                "{schedule}, m = {}; proven T ≥ {} (gap {})",
                s.micro_batches,
                ms(s.lower_bound_ms),
                pct(gap(s.iteration_ms, s.lower_bound_ms))
            ),
        ),
        Figure::new(
            "time per sample",
            ms(s.time_per_sample_ms),
            match s.steady_time_per_sample_ms {
                Some(steady) => format!("T/m; steady state {}", ms(steady)),
                None => "T/m".into(),
            },
        ),
        Figure::new(
            "bubble",
            pct(s.bubble_fraction),
            "idle share of the devices' time".into(),
        ),
    ]
}

/// The load and memory bar charts side by side, each with its note.
fn bar_charts(page: &mut String, input: &ReportInput) {
    let e = input.evaluation;
    let sim = input.simulation;
    let device_bars = device_bars(input.workload, e, sim);
    let bound = input.outcome.map(|o| o.bound);
    let _ = writeln!(page, "<div class=\"pair\">");
    let _ = writeln!(
        page,
        "<section><h2 id=\"loads-title\">Load per sample</h2><p class=\"note\">Compute, then communication (paid by the sender and every receiving accelerator). Dashed: the plan's TPS; dotted: the proven lower bound when the method gives one.</p>{}</section>",
        bars::loads(&device_bars, e.bottleneck, e.max_load, bound)
    );
    let _ = writeln!(
        page,
        "<section><h2 id=\"memory-title\">Memory</h2><p class=\"note\">What each device's nodes hold (their <code>size</code>){}, against the accelerators' limit (red).</p>{}</section>",
        if sim.is_some() { " and, lighter, the activations more micro-batches in flight stash at the simulated peak" } else { "" },
        bars::memory(&device_bars)
    );
    let _ = writeln!(page, "</div>");
}

/// The simulated schedule: the Gantt chart with its notes, memory over time (and why it
/// is flat when it is), and the simulator's notes.
fn schedule_section(page: &mut String, s: &Simulation) {
    let (chart, note) = gantt::gantt(s);
    let _ = writeln!(page, "<h2 id=\"schedule\">Schedule</h2>");
    let _ = writeln!(
        page,
        "<p class=\"note\">{} of {} micro-batches, simulated event by event: one box per task of one device (receive, compute, send; hover for times). Gaps are the pipeline's bubble.</p>",
        if s.training { s.schedule.to_string() } else { "A plain pipeline".into() },
        s.micro_batches
    );
    if let Some(note) = note {
        let _ = writeln!(page, "<p class=\"note\">{}</p>", escape(&note));
    }
    let _ = writeln!(page, "<div class=\"scroll\">{chart}</div>");
    let _ = writeln!(page, "<h2 id=\"memory-over-time\">Memory over time</h2>");
    let constant = s
        .devices
        .iter()
        .all(|x| x.peak_memory_bytes <= x.resident_bytes);
    if constant {
        let _ = writeln!(
            page,
            "<p class=\"note\">The workload gives no activation bytes per node (<code>activationBytes</code>), so each node's <code>size</code> is held for the whole run and memory is flat; with them (the generator and the ONNX importer write them), the stashes of in-flight micro-batches show here.</p>"
        );
    }
    let _ = writeln!(
        page,
        "<div class=\"scroll\">{}</div>",
        gantt::memory_over_time(s)
    );
    if !s.notes.is_empty() {
        let _ = writeln!(page, "<ul>");
        for n in &s.notes {
            let _ = writeln!(page, "<li class=\"note\">{}</li>", escape(n));
        }
        let _ = writeln!(page, "</ul>");
    }
}

/// The graph coloured by device, with a note when it was collapsed into blocks.
fn graph_section(page: &mut String, input: &ReportInput) {
    let view = graph::graph(input.workload, input.placement, GRAPH_CAP);
    let _ = writeln!(page, "<h2 id=\"graph-title\">Graph</h2>");
    let _ = writeln!(
        page,
        "<p class=\"note\">Operators left to right in layers of the data flow, coloured by device; backward nodes have dashed outlines. Hover a node for its name, time and memory.{}</p>",
        view.note.as_ref().map_or(String::new(), |n| format!(" {} (at most {GRAPH_CAP} drawn; hover a block for its nodes).", escape(n)))
    );
    let _ = writeln!(page, "<div class=\"scroll\">{}</div>", view.document);
}

/// The facts table: the objectives to nine decimals, the method, bound and solve time,
/// validity, and the simulation's size, times and bounds.
fn facts_table(page: &mut String, input: &ReportInput) {
    let e = input.evaluation;
    let mut fact = |name: &str, value: String| {
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(name),
            escape(&value)
        );
    };
    fact(
        "Time-Per-Sample (max load)",
        format!("{:.9} ms", e.max_load),
    );
    if let Some(o) = input.outcome {
        fact(
            "method · status",
            format!("{} · {}", o.method, status_text(o)),
        );
        fact(
            "lower bound",
            if o.bound > 0.0 {
                format!("{:.9} ms", o.bound)
            } else {
                "none".into()
            },
        );
        fact("solve time", format!("{:.3} s", o.stats.time_s));
    }
    fact(
        "synchronous objective (max FW + max BW)",
        format!("{:.9} ms", e.sync_objective),
    );
    match e.latency_total() {
        None => fact(
            "latency (one sample)",
            "not computed for a pipeline simulation".into(),
        ),
        Some(total) => fact("latency (one sample)", format!("{total:.9} ms")),
    }
    fact(
        "valid · contiguous",
        format!(
            "{} · {}",
            if e.is_valid() { "yes" } else { "no" },
            if e.is_contiguous() { "yes" } else { "no" }
        ),
    );
    if let Some(s) = input.simulation {
        fact(
            "simulated",
            format!(
                "{} stages, {} pieces, {} tasks",
                s.stages.positions,
                s.stages.pieces.len(),
                s.tasks.len()
            ),
        );
        fact("iteration time T", format!("{:.6} ms", s.iteration_ms));
        fact(
            "proven bounds on T",
            format!("{:.6} ≤ T ≤ {:.6} ms", s.lower_bound_ms, s.upper_bound_ms),
        );
        fact(
            "time per sample T/m",
            format!("{:.6} ms", s.time_per_sample_ms),
        );
        if let Some(steady) = s.steady_time_per_sample_ms {
            fact("steady-state time per sample", format!("{steady:.6} ms"));
        }
    }
}

/// The device table: one row per device (colour, nodes, compute with recompute,
/// communication, load, memory, the simulated peak and idle share, the limit), the
/// bottleneck in bold.
fn device_table(page: &mut String, input: &ReportInput) {
    let e = input.evaluation;
    let sim = input.simulation;
    let d = input.workload.devices();
    let _ = writeln!(page, "</table>\n<table class=\"devices\">");
    let _ = writeln!(
        page,
        "<tr><th>device</th><th>nodes</th><th>compute (ms)</th><th>communication (ms)</th><th>load (ms)</th><th>memory</th>{}<th>limit</th></tr>",
        if sim.is_some() { "<th>simulated peak</th><th>idle</th>" } else { "" }
    );
    for dl in &e.devices {
        let colour = super::charts::device_colour(dl.device);
        let is_b = Some(dl.device) == e.bottleneck;
        let run = sim.and_then(|s| s.devices.iter().find(|x| x.device == dl.device));
        let _ = write!(
            page,
            "<tr{}><td><span class=\"swatch\" style=\"background:{colour}\"></span>{}{}{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td>",
            if is_b { " class=\"bottleneck\"" } else { "" },
            dl.device,
            if is_b { " (bottleneck)" } else { "" },
            if dl.recomputes { format!(" (recomputes: +{:.3} ms)", dl.recompute) } else { String::new() },
            dl.nodes,
            dl.compute + dl.recompute,
            dl.communication,
            dl.load,
            human_bytes(dl.memory_bytes)
        );
        if sim.is_some() {
            let _ = write!(
                page,
                "<td>{}</td><td>{}</td>",
                run.map_or("-".into(), |r| human_bytes(r.peak_memory_bytes)),
                run.map_or("-".into(), |r| pct(r.idle_fraction))
            );
        }
        let limit = if dl.device.is_accelerator() {
            human_bytes(d.memory_per_accelerator_bytes)
        } else {
            "none (CPU)".into()
        };
        let _ = writeln!(page, "<td>{limit}</td></tr>");
    }
    let _ = writeln!(page, "</table></div>");
}

/// The rules the plan breaks (validity, then contiguity), when it breaks any.
fn violations(page: &mut String, e: &Evaluation) {
    let violations: Vec<String> = e
        .violations
        .iter()
        .chain(&e.non_contiguous)
        .map(|v| v.to_string())
        .collect();
    if !violations.is_empty() {
        let _ = writeln!(page, "<h2>Rules broken</h2>\n<ul>");
        for v in violations {
            let _ = writeln!(page, "<li>{}</li>", escape(&v));
        }
        let _ = writeln!(page, "</ul>");
    }
}

/// The Gantt chart alone, as a standalone SVG file with its own styles.
pub fn gantt_svg(simulation: &Simulation) -> String {
    let (chart, _) = gantt::gantt(simulation);
    let chart = chart.add(svg::node::element::Style::new(format!(
        "text {{ font-family: system-ui, sans-serif; }} {STYLE}"
    )));
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{chart}\n")
}
