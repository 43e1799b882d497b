//! Calibration: a device profile's three modelling assumptions fitted to a measured
//! profile.
//!
//! The roofline ([`crate::costmodel::operators`]) prices an operator `o` with `F_o` FLOPs
//! moving `B_o` bytes at
//!
//! ```text
//! t_o(c, μ, L) = 1e3 · max( F_o / (peak_o · c), B_o / (bw · μ) ) + L      (ms; 0 if F_o = B_o = 0)
//! ```
//!
//! where `c` = `compute_efficiency`, `μ` = `memory_efficiency` and `L` =
//! `launch_overhead_ms` are assumptions, not datasheet numbers. Calibration chooses them
//! from a measurement:
//!
//! - **Units.** A measured workload (`dnnplace.torch.profile`'s, `dnnplace.onnx.profile`'s)
//!   has nodes carrying `module` paths. Its *units* are the distinct `(module, pass)` pairs,
//!   pass = forward or backward (a node without a module is its own unit, by name: an ONNX
//!   node); a unit's measured time `M_u` is the sum of its nodes' `fpgaLatency`.
//! - **Operators → units.** Each operator of the analytic graph (with work) belongs to the
//!   unit whose module is the longest prefix of the operator's module on `.` boundaries
//!   (`transformer.h.3` holds `transformer.h.3.attn.c_attn`; an operator without a module
//!   is matched by its name); a forward unit is priced on
//!   the operators' forward costs, a backward unit on their backward costs
//!   ([`crate::costmodel::training::backward_cost`]). Operators no unit holds (work a
//!   container does itself, which the profiler does not time) are counted and left out.
//!   A unit's predicted time is `T_u = Σ_{o∈u} t_o`, so `T_u = A_u(c, μ) + k_u·L` with
//!   `k_u` the unit's operators with work.
//!   At least half of the measured time (nodes with a module) must fall in units that
//!   hold operators, else the profile and the model do not match (an error).
//! - **Fit.** Minimise the squared relative error `E = Σ_u ((T_u − M_u) / M_u)²` over
//!   `c, μ ∈ [10⁻⁴, 1]`, `L ≥ 0` (units with `M_u > 0` and `k_u > 0`). For fixed `(c, μ)`
//!   the best `L` is closed-form: `L* = max(0, Σ w_u k_u (M_u − A_u) / Σ w_u k_u²)`,
//!   `w_u = 1/M_u²`. `(c, μ)` are searched on a 49 × 49 grid in `log` space, the base
//!   profile's own values added, then refined by a pattern search (the 8 neighbours at a
//!   log step halved whenever none improves, down to 10⁻⁹). The base point is a candidate,
//!   so the fitted error never exceeds the base profile's.
//! - **Identifiability.** `c` only matters for operators on the compute side of the
//!   roofline at the fit, `μ` for those on the memory side. Where no operator is on one
//!   side, that efficiency keeps the base profile's value when doing so leaves `E`
//!   unchanged; [`Calibration::compute_bound_ops`] and [`Calibration::memory_bound_ops`]
//!   say which case holds.
//!
//! The fitted profile is the base profile with the three values replaced and named
//! `<base>-calibrated`: a device file ([`DeviceProfile::to_toml`]) that `--device-file`
//! reads, pricing the same graph exactly as the fit did.

use std::collections::BTreeMap;

use serde::Serialize;

use super::graph::OpGraph;
use super::operators::{DType, OpCost};
use super::profiles::DeviceProfile;
use super::training::backward_cost;
use crate::model::Workload;

/// Smallest efficiency the search tries.
const MIN_EFFICIENCY: f64 = 1e-4;

/// Which pass a unit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pass {
    Forward,
    Backward,
}

impl Pass {
    /// `forward` or `backward`.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Forward => "forward",
            Pass::Backward => "backward",
        }
    }
}

/// One measured unit against its analytic prediction.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitFit {
    pub module: String,
    pub pass: Pass,
    /// Operators of the analytic graph (with work) the unit holds.
    pub ops: usize,
    pub measured_ms: f64,
    /// `T_u` on the base profile.
    pub base_ms: f64,
    /// `T_u` on the fitted profile.
    pub fitted_ms: f64,
}

/// Relative errors `(T_u − M_u) / M_u` over the fitted units.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorSummary {
    /// `sqrt(E / n)`.
    pub rms_relative: f64,
    pub median_abs_relative: f64,
    pub max_abs_relative: f64,
    /// `(Σ T_u − Σ M_u) / Σ M_u`: the error of the whole measured time.
    pub total_relative: f64,
}

/// The outcome of [`calibrate`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Calibration {
    pub base: DeviceProfile,
    pub fitted: DeviceProfile,
    pub dtype: String,
    pub units: Vec<UnitFit>,
    pub base_error: ErrorSummary,
    pub fitted_error: ErrorSummary,
    /// Operators on the compute side of the roofline at the fit (over all units, both passes).
    pub compute_bound_ops: usize,
    /// Operators on the memory side at the fit.
    pub memory_bound_ops: usize,
    /// Analytic operators (with work) that no unit holds.
    pub unmatched_ops: usize,
    /// Measured units left out (`module (pass)`): no operator falls in them, or no time.
    pub unmatched_measured: Vec<String>,
}

impl Calibration {
    /// The fitted profile as a device file (TOML, the format `--device-file` reads), headed
    /// by comments naming the measurement `source` and the errors before and after.
    pub fn to_device_file(&self, source: &str) -> String {
        format!(
            "# Calibrated by `dnnplace calibrate` from {source} ({} units, {}):\n\
             # per-unit error rms {:.1}% -> {:.1}%, whole measured time {:+.1}% -> {:+.1}%.\n{}",
            self.units.len(),
            self.dtype,
            100.0 * self.base_error.rms_relative,
            100.0 * self.fitted_error.rms_relative,
            100.0 * self.base_error.total_relative,
            100.0 * self.fitted_error.total_relative,
            self.fitted.to_toml()
        )
    }
}

/// Why a calibration could not be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CalibrationError {
    #[error(
        "{matched} of {total} measured units ({percent:.1}% of the measured time) hold an \
         operator of the model, less than half (measured modules begin: {measured}; operator \
         modules begin: {analytic}): the measured profile and the model do not match"
    )]
    Mismatch {
        matched: usize,
        total: usize,
        percent: f64,
        measured: String,
        analytic: String,
    },
    #[error("measured node {node} ('{name}'): fpgaLatency {value} is not a finite time >= 0 ms")]
    BadTime { node: i64, name: String, value: f64 },
    #[error("base profile: {0}")]
    Profile(String),
}

/// One unit's operators: forward or backward costs.
struct Unit {
    module: String,
    pass: Pass,
    measured_ms: f64,
    costs: Vec<OpCost>,
}

/// Fits `base`'s `compute_efficiency`, `memory_efficiency` and `launch_overhead_ms` to the
/// measured workload (module documentation).
pub fn calibrate(
    graph: &OpGraph,
    measured: &Workload,
    base: &DeviceProfile,
    dtype: DType,
) -> Result<Calibration, CalibrationError> {
    base.validate()
        .map_err(|e| CalibrationError::Profile(e.to_string()))?;
    let (units, unmatched_ops, unmatched_measured) = units_of(graph, measured)?;
    let fit = Fit {
        units: &units,
        base,
        dtype,
    };
    let (c, mu, launch) = fit.search();
    let mut fitted = base.clone();
    fitted.name = format!("{}-calibrated", base.name);
    fitted.compute_efficiency = c;
    fitted.memory_efficiency = mu;
    fitted.launch_overhead_ms = launch;
    fitted.description = format!(
        "{} calibrated on {} measured units ({}): compute_efficiency {c:.4}, memory_efficiency \
         {mu:.4}, launch_overhead_ms {launch:.5}",
        base.name,
        units.len(),
        dtype.name()
    );
    let (compute_bound_ops, memory_bound_ops) = fit.sides(&fitted);
    let rows: Vec<UnitFit> = units
        .iter()
        .map(|u| UnitFit {
            module: u.module.clone(),
            pass: u.pass,
            ops: u.costs.len(),
            measured_ms: u.measured_ms,
            base_ms: unit_time(u, base, dtype),
            fitted_ms: unit_time(u, &fitted, dtype),
        })
        .collect();
    Ok(Calibration {
        base_error: summary(&rows, |r| r.base_ms),
        fitted_error: summary(&rows, |r| r.fitted_ms),
        base: base.clone(),
        fitted,
        dtype: dtype.name().into(),
        units: rows,
        compute_bound_ops,
        memory_bound_ops,
        unmatched_ops,
        unmatched_measured,
    })
}

/// The measured units with their operators, the count of operators no unit holds, and the
/// measured nodes left out.
fn units_of(
    graph: &OpGraph,
    measured: &Workload,
) -> Result<(Vec<Unit>, usize, Vec<String>), CalibrationError> {
    let mut times: BTreeMap<(String, Pass), f64> = BTreeMap::new();
    let mut left_out = Vec::new();
    for node in measured.nodes() {
        let name = node.name.clone().unwrap_or_else(|| node.id.to_string());
        if !(node.fpga_latency.is_finite() && node.fpga_latency >= 0.0) {
            return Err(CalibrationError::BadTime {
                node: node.id,
                name,
                value: node.fpga_latency,
            });
        }
        let key = node.module.clone().unwrap_or(name);
        let pass = if node.is_backward {
            Pass::Backward
        } else {
            Pass::Forward
        };
        *times.entry((key, pass)).or_default() += node.fpga_latency;
    }
    let mut costs: BTreeMap<(String, Pass), Vec<OpCost>> = BTreeMap::new();
    let mut unmatched = 0;
    for op in graph
        .ops
        .iter()
        .filter(|o| has_work(&o.cost) && !o.is_input)
    {
        let owner = owner_of(op.module.as_deref().unwrap_or(&op.name), &times);
        match owner {
            None => unmatched += 1,
            Some(module) => {
                for pass in [Pass::Forward, Pass::Backward] {
                    if times.contains_key(&(module.clone(), pass)) {
                        let cost = match pass {
                            Pass::Forward => op.cost.clone(),
                            Pass::Backward => backward_cost(&op.cost),
                        };
                        costs.entry((module.clone(), pass)).or_default().push(cost);
                    }
                }
            }
        }
    }
    let total_ms: f64 = times.values().sum();
    let total = times.len();
    let mut units = Vec::new();
    for ((module, pass), measured_ms) in times {
        match costs.remove(&(module.clone(), pass)) {
            Some(c) if measured_ms > 0.0 => units.push(Unit {
                module,
                pass,
                measured_ms,
                costs: c,
            }),
            _ => left_out.push(format!("{module} ({})", pass.name())),
        }
    }
    let matched_ms: f64 = units.iter().map(|u| u.measured_ms).sum();
    if units.is_empty() || 2.0 * matched_ms < total_ms {
        let percent = if total_ms > 0.0 {
            100.0 * matched_ms / total_ms
        } else {
            0.0
        };
        return Err(mismatch(graph, measured, units.len(), total, percent));
    }
    Ok((units, unmatched, left_out))
}

fn mismatch(
    graph: &OpGraph,
    measured: &Workload,
    matched: usize,
    total: usize,
    percent: f64,
) -> CalibrationError {
    let first = |it: &mut dyn Iterator<Item = String>| {
        let v: Vec<String> = it.take(4).collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    CalibrationError::Mismatch {
        matched,
        total,
        percent,
        measured: first(&mut measured.nodes().iter().filter_map(|n| n.module.clone())),
        analytic: first(&mut graph.ops.iter().filter_map(|o| o.module.clone())),
    }
}

fn has_work(cost: &OpCost) -> bool {
    cost.flops != 0.0 || cost.bytes_moved != 0.0
}

/// The longest measured module that is `module` or a `.`-prefix of it.
fn owner_of(module: &str, units: &BTreeMap<(String, Pass), f64>) -> Option<String> {
    let mut candidate = module;
    loop {
        if units.contains_key(&(candidate.to_string(), Pass::Forward))
            || units.contains_key(&(candidate.to_string(), Pass::Backward))
        {
            return Some(candidate.to_string());
        }
        candidate = &candidate[..candidate.rfind('.')?];
    }
}

fn unit_time(unit: &Unit, device: &DeviceProfile, dtype: DType) -> f64 {
    unit.costs.iter().map(|c| c.time_ms(device, dtype)).sum()
}

fn summary(rows: &[UnitFit], predicted: impl Fn(&UnitFit) -> f64) -> ErrorSummary {
    let rel: Vec<f64> = rows
        .iter()
        .map(|r| (predicted(r) - r.measured_ms) / r.measured_ms)
        .collect();
    let mut abs: Vec<f64> = rel.iter().map(|x| x.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let n = abs.len();
    let median = if n % 2 == 1 {
        abs[n / 2]
    } else {
        (abs[n / 2 - 1] + abs[n / 2]) / 2.0
    };
    let total_measured: f64 = rows.iter().map(|r| r.measured_ms).sum();
    let total_predicted: f64 = rows.iter().map(&predicted).sum();
    ErrorSummary {
        rms_relative: (rel.iter().map(|x| x * x).sum::<f64>() / n as f64).sqrt(),
        median_abs_relative: median,
        max_abs_relative: abs[n - 1],
        total_relative: (total_predicted - total_measured) / total_measured,
    }
}

/// The search over `(c, μ)` with `L` in closed form.
struct Fit<'a> {
    units: &'a [Unit],
    base: &'a DeviceProfile,
    dtype: DType,
}

impl Fit<'_> {
    /// `A_u(c, μ)` of every unit: the roofline times without launch overhead.
    fn work_times(&self, c: f64, mu: f64) -> Vec<f64> {
        let mut device = self.base.clone();
        device.compute_efficiency = c;
        device.memory_efficiency = mu;
        device.launch_overhead_ms = 0.0;
        self.units
            .iter()
            .map(|u| unit_time(u, &device, self.dtype))
            .collect()
    }

    /// The best `L` for `(c, μ)` and the error `E` there.
    fn error(&self, c: f64, mu: f64) -> (f64, f64) {
        let a = self.work_times(c, mu);
        let (mut num, mut den) = (0.0, 0.0);
        for (u, a_u) in self.units.iter().zip(&a) {
            let (k, m) = (u.costs.len() as f64, u.measured_ms);
            num += k * (m - a_u) / (m * m);
            den += k * k / (m * m);
        }
        let launch = (num / den).max(0.0);
        (launch, self.error_at(&a, launch))
    }

    fn error_at(&self, a: &[f64], launch: f64) -> f64 {
        self.units
            .iter()
            .zip(a)
            .map(|(u, a_u)| {
                let r = (a_u + launch * u.costs.len() as f64 - u.measured_ms) / u.measured_ms;
                r * r
            })
            .sum()
    }

    /// `(c, μ, L)` minimising `E` (module documentation).
    fn search(&self) -> (f64, f64, f64) {
        let lo = MIN_EFFICIENCY.ln();
        let steps = 48;
        let grid: Vec<f64> = (0..=steps)
            .map(|i| (lo - lo * i as f64 / steps as f64).exp().min(1.0))
            .collect();
        let base_point = (self.base.compute_efficiency, self.base.memory_efficiency);
        let mut best = (
            base_point.0,
            base_point.1,
            self.error(base_point.0, base_point.1),
        );
        for &c in &grid {
            for &mu in &grid {
                let (l, e) = self.error(c, mu);
                if e < best.2 .1 {
                    best = (c, mu, (l, e));
                }
            }
        }
        let mut step = -lo / steps as f64;
        while step > 1e-9 {
            let mut moved = false;
            for (dc, dm) in [
                (-1, -1),
                (-1, 0),
                (-1, 1),
                (0, -1),
                (0, 1),
                (1, -1),
                (1, 0),
                (1, 1),
            ] {
                let c = clamp(best.0 * (step * dc as f64).exp());
                let mu = clamp(best.1 * (step * dm as f64).exp());
                let (l, e) = self.error(c, mu);
                if e < best.2 .1 {
                    best = (c, mu, (l, e));
                    moved = true;
                }
            }
            if !moved {
                step /= 2.0;
            }
        }
        let (c, mu) = self.keep_base_where_free(best.0, best.1, best.2 .1);
        let (launch, _) = self.error(c, mu);
        (c, mu, launch)
    }

    /// An efficiency no operator depends on at the fit takes the base profile's value when
    /// that leaves `E` unchanged (module documentation).
    fn keep_base_where_free(&self, c: f64, mu: f64, e: f64) -> (f64, f64) {
        let same = |e2: f64| (e2 - e).abs() <= 1e-12 * e.max(1e-300);
        let mut point = (c, mu);
        let mut probe = self.base.clone();
        probe.compute_efficiency = c;
        probe.memory_efficiency = mu;
        let (compute, memory) = self.sides(&probe);
        if memory == 0 && same(self.error(c, self.base.memory_efficiency).1) {
            point.1 = self.base.memory_efficiency;
        }
        if compute == 0 && same(self.error(self.base.compute_efficiency, point.1).1) {
            point.0 = self.base.compute_efficiency;
        }
        point
    }

    /// Operators on the compute and on the memory side of the roofline on `device`.
    fn sides(&self, device: &DeviceProfile) -> (usize, usize) {
        let (mut compute, mut memory) = (0, 0);
        for cost in self.units.iter().flat_map(|u| &u.costs) {
            if cost.compute_ms(device, self.dtype) >= cost.memory_ms(device) {
                compute += 1;
            } else {
                memory += 1;
            }
        }
        (compute, memory)
    }
}

fn clamp(x: f64) -> f64 {
    x.clamp(MIN_EFFICIENCY, 1.0)
}
