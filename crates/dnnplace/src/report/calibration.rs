//! The text of a calibration ([`crate::costmodel::calibrate`]): the base and fitted
//! profiles' three assumptions, the error summaries before and after, and one row per
//! measured unit — each laid out by the one table renderer ([`super::tabular::Table`]).

use super::tabular::{Align, Table};
use crate::costmodel::Calibration;

fn pct(x: f64) -> String {
    format!("{:+.1}%", 100.0 * x)
}

fn abs_pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// The calibration of the measured profile `measured` as text.
pub fn calibration_text(cal: &Calibration, measured: &str) -> String {
    let mut s = format!(
        "calibrated '{}' on {} measured units of {measured} ({})\n\n",
        cal.base.name,
        cal.units.len(),
        cal.dtype
    );
    let right = |n: usize| std::iter::once(Align::Left).chain(std::iter::repeat_n(Align::Right, n));
    let mut profiles = Table::new([
        "",
        "compute_efficiency",
        "memory_efficiency",
        "launch_overhead_ms",
    ])
    .aligned(right(3));
    for (label, p) in [("base", &cal.base), ("fitted", &cal.fitted)] {
        profiles.push([
            format!("{label} ({})", p.name),
            format!("{:.4}", p.compute_efficiency),
            format!("{:.4}", p.memory_efficiency),
            format!("{:.5}", p.launch_overhead_ms),
        ]);
    }
    s += &profiles.text();
    s += &format!(
        "\noperators at the fit: {} compute-bound, {} memory-bound; {} no measured unit holds\n",
        cal.compute_bound_ops, cal.memory_bound_ops, cal.unmatched_ops
    );
    if !cal.unmatched_measured.is_empty() {
        s += &format!(
            "measured nodes left out: {}\n",
            cal.unmatched_measured.join(", ")
        );
    }
    let mut errors = Table::new([
        "error (predicted/measured-1)",
        "rms",
        "median |e|",
        "max |e|",
        "whole time",
    ])
    .aligned(right(4));
    for (label, e) in [("base", &cal.base_error), ("fitted", &cal.fitted_error)] {
        errors.push([
            label.to_string(),
            abs_pct(e.rms_relative),
            abs_pct(e.median_abs_relative),
            abs_pct(e.max_abs_relative),
            pct(e.total_relative),
        ]);
    }
    s += "\n";
    s += &errors.text();
    let mut units = Table::new([
        "module",
        "pass",
        "ops",
        "measured ms",
        "base ms",
        "error",
        "fitted ms",
        "error",
    ])
    .aligned(
        [Align::Left, Align::Left]
            .into_iter()
            .chain(std::iter::repeat_n(Align::Right, 6)),
    );
    for u in &cal.units {
        units.push([
            u.module.clone(),
            u.pass.name().to_string(),
            u.ops.to_string(),
            format!("{:.4}", u.measured_ms),
            format!("{:.4}", u.base_ms),
            pct(u.base_ms / u.measured_ms - 1.0),
            format!("{:.4}", u.fitted_ms),
            pct(u.fitted_ms / u.measured_ms - 1.0),
        ]);
    }
    s += "\n";
    s += &units.text();
    s
}
