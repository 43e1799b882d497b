//! A standalone line chart: points `(x_i, y_i)` joined in order, each a marker with a
//! `<title>`, on linear axes from 0 with nice ticks ([`super::axis`]), its own `<style>` so
//! the file renders outside the HTML report. Used for the scaling sweep (TPS per
//! accelerator count) and the price frontier (TPS per price per hour). O(points).

use svg::node::element::{Circle, Polyline, Style, Text, Title};
use svg::Document;

use super::axis::{self, nice_step, Scale};
use super::round;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 76.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 56.0;

const CSS: &str = "text { font: 12px sans-serif; fill: #222 } .grid { stroke: #e4e4e4 } .axis-line { stroke: #444 } \
                   .tick { font-size: 11px } .axis-title { font-size: 12px } .title { font-size: 14px; font-weight: bold } \
                   .curve { fill: none; stroke: #4e79a7; stroke-width: 2 } .point { fill: #4e79a7 }";

/// A linear scale from 0 covering `max`, in `unit`.
pub fn linear(max: f64, unit: &'static str) -> Scale {
    let step = nice_step(max, 6);
    Scale {
        max: (max / step).ceil().max(1.0) * step,
        unit_size: 1.0,
        unit,
        step,
    }
}

/// The chart (module doc). `labels[i]` is point i's tooltip.
pub fn curve(
    id: &str,
    title: &str,
    points: &[(f64, f64)],
    labels: &[String],
    x: (&Scale, &str),
    y: (&Scale, &str),
) -> Document {
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let mut doc = Document::new()
        .set("id", id)
        .set("class", "chart")
        .set("viewBox", (0, 0, WIDTH, HEIGHT))
        .set("width", WIDTH)
        .set("height", HEIGHT)
        .set("role", "img")
        .set("aria-label", title)
        .add(Style::new(CSS))
        .add(
            Text::new(title)
                .set("x", LEFT)
                .set("y", 22)
                .set("class", "title"),
        )
        .add(axis::horizontal(x.0, LEFT, TOP + h, w, TOP, x.1))
        .add(axis::vertical(y.0, LEFT, TOP + h, h, LEFT + w, y.1));
    let at = |(px, py): (f64, f64)| (round(LEFT + x.0.px(px, w)), round(TOP + h - y.0.px(py, h)));
    let line: Vec<String> = points
        .iter()
        .map(|&p| at(p))
        .map(|(a, b)| format!("{a},{b}"))
        .collect();
    doc = doc.add(
        Polyline::new()
            .set("points", line.join(" "))
            .set("class", "curve"),
    );
    for (i, &p) in points.iter().enumerate() {
        let (cx, cy) = at(p);
        let mut c = Circle::new()
            .set("cx", cx)
            .set("cy", cy)
            .set("r", 3.5)
            .set("class", "point");
        if let Some(l) = labels.get(i) {
            c = c.add(Title::new(l.clone()));
        }
        doc = doc.add(c);
    }
    doc
}
