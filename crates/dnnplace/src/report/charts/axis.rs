//! Axes: "nice" ticks and units for time (ms) and memory (B, KiB, MiB, GiB, TiB).
//!
//! Ticks: for a range `[0, max]` and a target of `k` ticks, the step is the smallest of
//! `{1, 2, 5}·10^e` that is at least `max / k` (Heckbert's nice numbers), so labels are
//! short and round. A memory axis first picks the binary unit `u` with `max / u ∈ [1, 1024)`
//! and ticks in that unit.

use svg::node::element::{Group, Line, Text};

use super::round;

/// A linear axis from 0 to `max` in some unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    /// The largest value shown, in the data's own unit (ms or bytes).
    pub max: f64,
    /// Data units per displayed unit (1 for ms; 1024³ for GiB).
    pub unit_size: f64,
    /// The displayed unit, e.g. "ms" or "GiB".
    pub unit: &'static str,
    /// Tick step in displayed units.
    pub step: f64,
}

/// The nice step for `[0, max]` with about `ticks` ticks.
pub fn nice_step(max: f64, ticks: usize) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let raw = max / ticks.max(1) as f64;
    let e = raw.log10().floor();
    let base = 10f64.powf(e);
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * base >= raw * (1.0 - 1e-12) {
            return m * base;
        }
    }
    10.0 * base
}

impl Scale {
    /// A time axis in ms covering `[0, max_ms]`, rounded up to a whole step.
    pub fn time(max_ms: f64) -> Scale {
        let step = nice_step(max_ms, 6);
        Scale {
            max: (max_ms / step).ceil().max(1.0) * step,
            unit_size: 1.0,
            unit: "ms",
            step,
        }
    }

    /// A memory axis covering `[0, max_bytes]` in the binary unit that fits.
    pub fn bytes(max_bytes: f64) -> Scale {
        let (unit_size, unit) = byte_unit(max_bytes);
        let shown = max_bytes / unit_size;
        let step = nice_step(shown, 5);
        Scale {
            max: (shown / step).ceil().max(1.0) * step * unit_size,
            unit_size,
            unit,
            step,
        }
    }

    /// Tick values in data units.
    pub fn ticks(&self) -> Vec<f64> {
        let count = (self.max / self.unit_size / self.step).round() as usize;
        (0..=count)
            .map(|k| k as f64 * self.step * self.unit_size)
            .collect()
    }

    /// A value in displayed units, with as many decimals as the step needs.
    pub fn label(&self, value: f64) -> String {
        let decimals = if self.step >= 1.0 {
            0
        } else {
            (-self.step.log10().floor()) as usize
        };
        format!("{:.*}", decimals, value / self.unit_size)
    }

    /// `value` mapped onto `[0, length]` pixels.
    pub fn px(&self, value: f64, length: f64) -> f64 {
        if self.max > 0.0 {
            value / self.max * length
        } else {
            0.0
        }
    }
}

/// The binary unit for a byte count: (bytes per unit, name).
pub fn byte_unit(bytes: f64) -> (f64, &'static str) {
    let units = [
        (1.0, "B"),
        (1024.0, "KiB"),
        (1024.0 * 1024.0, "MiB"),
        (1024f64.powi(3), "GiB"),
        (1024f64.powi(4), "TiB"),
    ];
    let mut chosen = units[0];
    for u in units {
        if bytes >= u.0 {
            chosen = u;
        }
    }
    chosen
}

/// A horizontal axis at height `y` from `x0` over `length` pixels: baseline, ticks with
/// labels, light grid lines up to `grid_top`, and the title `"{title} ({unit})"`.
pub fn horizontal(
    scale: &Scale,
    x0: f64,
    y: f64,
    length: f64,
    grid_top: f64,
    title: &str,
) -> Group {
    let mut g = Group::new().set("class", "axis");
    g = g.add(
        Line::new()
            .set("x1", round(x0))
            .set("y1", round(y))
            .set("x2", round(x0 + length))
            .set("y2", round(y))
            .set("class", "axis-line"),
    );
    for t in scale.ticks() {
        let x = round(x0 + scale.px(t, length));
        g = g
            .add(
                Line::new()
                    .set("x1", x)
                    .set("y1", round(grid_top))
                    .set("x2", x)
                    .set("y2", round(y))
                    .set("class", "grid"),
            )
            .add(
                Line::new()
                    .set("x1", x)
                    .set("y1", round(y))
                    .set("x2", x)
                    .set("y2", round(y + 4.0))
                    .set("class", "axis-line"),
            )
            .add(
                Text::new(scale.label(t))
                    .set("x", x)
                    .set("y", round(y + 16.0))
                    .set("text-anchor", "middle")
                    .set("class", "tick"),
            );
    }
    g.add(
        Text::new(format!("{title} ({})", scale.unit))
            .set("x", round(x0 + length / 2.0))
            .set("y", round(y + 32.0))
            .set("text-anchor", "middle")
            .set("class", "axis-title"),
    )
}

/// A vertical axis at `x` from `y0` (bottom) up over `length` pixels, labels on the left.
pub fn vertical(
    scale: &Scale,
    x: f64,
    y0: f64,
    length: f64,
    grid_right: f64,
    title: &str,
) -> Group {
    let mut g = Group::new().set("class", "axis");
    g = g.add(
        Line::new()
            .set("x1", round(x))
            .set("y1", round(y0))
            .set("x2", round(x))
            .set("y2", round(y0 - length))
            .set("class", "axis-line"),
    );
    for t in scale.ticks() {
        let y = round(y0 - scale.px(t, length));
        g = g
            .add(
                Line::new()
                    .set("x1", round(x))
                    .set("y1", y)
                    .set("x2", round(grid_right))
                    .set("y2", y)
                    .set("class", "grid"),
            )
            .add(
                Text::new(scale.label(t))
                    .set("x", round(x - 6.0))
                    .set("y", round(y + 4.0))
                    .set("text-anchor", "end")
                    .set("class", "tick"),
            );
    }
    g.add(
        Text::new(format!("{title} ({})", scale.unit))
            .set("x", round(x - 44.0))
            .set("y", round(y0 - length / 2.0))
            .set("text-anchor", "middle")
            .set(
                "transform",
                format!(
                    "rotate(-90 {} {})",
                    round(x - 44.0),
                    round(y0 - length / 2.0)
                ),
            )
            .set("class", "axis-title"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_and_units() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(123.0, 6), 50.0);
        assert_eq!(nice_step(0.7, 6), 0.2);
        let s = Scale::time(123.0);
        assert_eq!((s.max, s.step, s.unit), (150.0, 50.0, "ms"));
        assert_eq!(s.ticks(), vec![0.0, 50.0, 100.0, 150.0]);
        let b = Scale::bytes(17179869184.0);
        assert_eq!((b.unit, b.label(b.max)), ("GiB", "20".to_string()));
        assert_eq!(byte_unit(3.0 * 1024.0 * 1024.0).1, "MiB");
        assert_eq!(Scale::time(0.0).max, 1.0);
    }
}
