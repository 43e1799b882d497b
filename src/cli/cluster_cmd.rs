//! `plan` and `score` on a cluster (a workload with a cluster section, or `--cluster`).
//!
//! Planning on a cluster solves the contiguous TPS problem ([`crate::solve::cluster`]):
//! `--method dp` (the default) or `brute-force`, or with `--method ip` the cluster IP
//! ([`crate::solve::cluster::ip`]), contiguous or `--non-contiguous`, or the search
//! placers `rl` and `genetic` ([`crate::solve::learned`], TPS or sync, either space); other methods,
//! objectives, `--split` and `--report` are refused with the reason. The plan comes from
//! [`crate::solve::plan`], the one entry point of every method, which sends a workload with
//! a cluster to the cluster planner and re-scores the plan with the cluster evaluator
//! before it is printed ([`crate::solve::cluster::plan`]).

use std::io::Write;

use super::settings::PlanSettings;
use super::{CliError, PlanArgs, ScoreArgs};
use crate::io::write_atomically;
use crate::model::{ClusterCosts, Placement, Workload};
use crate::report::cluster::{
    choice_line, cluster_device_table, cluster_evaluation_text, cluster_lines, cluster_plan_text,
    frontier_svg, frontier_table, sweep_svg, sweep_table,
};
use crate::report::plan_json::{ClaimJson, EvaluationJson, PlanJson};
use crate::score::{evaluate_on_cluster, ClusterEvaluation};
use crate::solve::cluster::plan::{CheckedPlan, ClusterMethod, ClusterPlan};
use crate::solve::cluster::sweep::{
    best_within_budget, cheapest_for_target, economics, frontier, price, sweep, Economics,
};
use crate::solve::{self, Objective, Problem};

/// What `plan` on a cluster does not do yet, as an error naming the flag.
fn check_plan_flags(args: &PlanArgs, settings: &PlanSettings) -> Result<ClusterMethod, CliError> {
    let refuse = |what: &str| Err(CliError::Input(format!("on a cluster, {what}")));
    let method = ClusterMethod::choose(settings.method, settings.objective, settings.contiguous)
        .map_err(|e| CliError::Input(format!("on a cluster, {e}")))?;
    if args.report.is_some() {
        return refuse("--report is not available yet");
    }
    if args.granularity.is_some() || args.export.is_some() || args.export_out.is_some() {
        return refuse("--granularity/--split-at and --export are not available yet");
    }
    Ok(method)
}

/// `plan --json` on a cluster: the one plan record ([`crate::report::plan_json`]) of the
/// checked plan, `method` the method asked for, `usage` the accelerators per type, and this
/// process's peak resident memory.
fn plan_json(
    w: &Workload,
    settings: &PlanSettings,
    outcome: &crate::solve::Outcome,
    plan: &ClusterPlan,
    best: &CheckedPlan,
) -> PlanJson {
    let evaluation = EvaluationJson::on_cluster(
        w,
        &plan.costs,
        &best.placement,
        settings.objective,
        &best.evaluation,
    );
    let names = super::export_cmds::layers_for_names(w);
    let holdings = crate::report::layers::holdings_json(w, &names, &best.placement);
    PlanJson {
        usage: Some(best.usage.clone()),
        peak_memory_bytes: super::peak_memory_bytes(),
        ..PlanJson::new(
            evaluation,
            ClaimJson::of(outcome, settings.method.name()),
            holdings,
        )
    }
}

/// The placement file (MODEL.md's shape, devices numbered as the cluster numbers them).
fn placement_file(w: &Workload, p: &Placement, e: &ClusterEvaluation) -> String {
    let raw = crate::report::table::placement_file(w, p, &e.devices, e.max_load, false);
    super::json_text(&raw)
}

pub fn run_plan(args: &PlanArgs, settings: &PlanSettings, w: &Workload) -> Result<(), CliError> {
    let method = check_plan_flags(args, settings)?;
    super::print_notes(&settings.notes);
    if args.sweep || args.target_tps.is_some() || args.budget.is_some() {
        return run_economics(args, settings, w, method);
    }
    if args.plot.is_some() {
        return Err(CliError::Input(
            "--plot draws the result of --sweep, --target-tps or --budget".into(),
        ));
    }
    let problem = Problem {
        workload: w,
        devices: crate::solve::Devices::of(w),
        objective: settings.objective,
        contiguous: settings.contiguous,
        limits: settings.limits.clone(),
        pipeline: None,
    };
    let checked = solve::plan(solve::method(settings.method).as_ref(), &problem)?;
    let plan = checked.cluster.as_ref().ok_or_else(|| {
        CliError::Internal("the planner returned no cluster plan for a cluster".into())
    })?;
    if let (Some(reason), None) = (&plan.stopped, &plan.best) {
        return Err(CliError::Input(format!(
            "no plan: the cluster {} stopped after {:.1} s: {reason}",
            match method {
                ClusterMethod::Ip { .. } => "IP",
                ClusterMethod::Learned { .. } => "search",
                _ => "DP",
            },
            plan.time_s
        )));
    }
    let Some(best) = &plan.best else {
        return Err(CliError::Input(if method.contiguous() {
            "no feasible placement: no contiguous plan fits the cluster (memory per type, CPU-only nodes, stages filling machines in order)".into()
        } else {
            "no feasible placement: no plan fits the cluster (memory per type, CPU-only nodes)"
                .into()
        }));
    };
    if let Some(out) = &args.out {
        write_atomically(out, &placement_file(w, &best.placement, &best.evaluation))?;
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let v = plan_json(w, settings, &checked.outcome, plan, best);
        write!(stdout, "{}", super::json_text(&v))?;
    } else {
        write!(stdout, "{}", cluster_plan_text(w, plan, best))?;
        if let Some(out) = &args.out {
            writeln!(stdout, "placement written to {}", out.display())?;
        }
    }
    stdout.flush()?;
    Ok(())
}

pub fn run_score_on_cluster(
    args: &ScoreArgs,
    w: &Workload,
    placement: &Placement,
) -> Result<(), CliError> {
    if args.objective != super::ObjectiveArg::Throughput {
        return Err(CliError::Input("on a cluster, score reports throughput (TPS) and sync; --objective latency is not supported".into()));
    }
    let costs = ClusterCosts::of(w);
    let e = evaluate_on_cluster(w, &costs, placement);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let v = EvaluationJson::on_cluster(w, &costs, placement, Objective::Throughput, &e);
        write!(stdout, "{}", super::json_text(&v))?;
    } else {
        write!(stdout, "{}", cluster_evaluation_text(w, &costs, &e))?;
    }
    stdout.flush()?;
    Ok(())
}

/// `--sweep`, `--target-tps`, `--budget`: one DP run keeping the optimum per accelerator
/// usage ([`crate::solve::cluster::sweep`]), every plan checked; tables, and the plot.
fn run_economics(
    args: &PlanArgs,
    settings: &PlanSettings,
    w: &Workload,
    method: ClusterMethod,
) -> Result<(), CliError> {
    if method != ClusterMethod::Dp {
        return Err(CliError::Input(
            "--sweep, --target-tps and --budget use the cluster DP (--method dp)".into(),
        ));
    }
    if args.out.is_some() && args.sweep {
        return Err(CliError::Input(
            "--out writes one plan: give it with --target-tps or --budget, not --sweep".into(),
        ));
    }
    let Economics { plan, bounds } = economics(w, &settings.limits)?;
    if plan.per_usage.is_empty() {
        return Err(CliError::Input(match &plan.stopped {
            None => "no feasible placement: no contiguous plan fits the cluster".into(),
            Some(reason) => format!(
                "no plan found within the limits: the cluster DP stopped after {:.1} s ({reason}), and no fallback plan fits",
                plan.time_s
            ),
        }));
    }
    let cluster = plan.costs.cluster();
    let plans = &plan.per_usage;
    let mut text = match &plan.stopped {
        None => format!(
            "method: dp (optimum per accelerator mix)   time: {:.3} s   mixes: {}\n",
            plan.time_s,
            plans.len()
        ),
        Some(reason) => format!(
            "method: dp (best plan found per accelerator count: the per-mix DP stopped, {reason}; each row planned on the cluster's first accelerators, with its gap)   time: {:.3} s   plans: {}\n",
            plan.time_s,
            plans.len()
        ),
    };
    text += &format!(
        "nodes: {}   cluster:\n{}\n",
        w.len(),
        cluster_lines(&plan.costs)
    );
    let mut chosen: Option<&CheckedPlan> = None;
    let mut svg = None;
    if args.sweep {
        let rows = sweep(plans, cluster, &bounds);
        text += &sweep_table(cluster, &rows);
        svg = Some(sweep_svg(cluster, &rows));
    }
    if args.target_tps.is_some() || args.budget.is_some() {
        let front = frontier(plans, cluster);
        text += &format!(
            "\nPareto frontier (time per sample, price per hour):\n{}",
            frontier_table(cluster, &front)
        );
        if svg.is_none() {
            svg = Some(frontier_svg(cluster, &front));
        }
    }
    if let Some(x) = args.target_tps {
        let p = cheapest_for_target(plans, cluster, x);
        text += &match p {
            Some(p) => format!(
                "\ncheapest for at most {x} ms per sample: {}\n",
                choice_line(cluster, p)
            ),
            None => format!("\nno mix of this cluster reaches {x} ms per sample\n"),
        };
        chosen = chosen.or(p);
    }
    if let Some(b) = args.budget {
        let p = best_within_budget(plans, cluster, b);
        text += &match p {
            Some(p) => format!("\nfastest within {b:.2} $/h: {}\n", choice_line(cluster, p)),
            None => format!("\nno mix of this cluster costs at most {b:.2} $/h\n"),
        };
        chosen = chosen.or(p);
    }
    if let Some(p) = chosen {
        text += &format!(
            "\nchosen plan:\n{}",
            cluster_device_table(&plan.costs, &p.evaluation)
        );
    }
    if let (Some(path), Some(page)) = (&args.plot, &svg) {
        write_atomically(path, page)?;
        text += &format!("plot written to {}\n", path.display());
    }
    if let Some(out) = &args.out {
        let p = chosen
            .ok_or_else(|| CliError::Input("--out: no plan meets the target or budget".into()))?;
        write_atomically(out, &placement_file(w, &p.placement, &p.evaluation))?;
        text += &format!("placement written to {}\n", out.display());
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let v = economics_json(args.sweep, &plan, &bounds, chosen);
        write!(stdout, "{}", super::json_text(&v))?;
    } else {
        write!(stdout, "{text}")?;
    }
    stdout.flush()?;
    Ok(())
}

/// The economics answer as JSON: every mix and the Pareto frontier (usage, TPS, price),
/// the scaling sweep with its bounds and gaps when `with_sweep`, and the chosen plan
/// with the bound of its accelerator count.
fn economics_json(
    with_sweep: bool,
    plan: &ClusterPlan,
    bounds: &[f64],
    chosen: Option<&CheckedPlan>,
) -> serde_json::Value {
    let cluster = plan.costs.cluster();
    let plans = &plan.per_usage;
    let row = |p: &CheckedPlan| serde_json::json!({"usage": p.usage, "tps": p.value, "pricePerHour": price(cluster, &p.usage)});
    let mut v = serde_json::json!({
        "optimal": plan.stopped.is_none(),
        "stopReason": plan.stopped.as_ref().map(|r| r.code()),
        "timeS": plan.time_s,
        "mixes": plans.iter().map(row).collect::<Vec<_>>(),
        "frontier": frontier(plans, cluster).into_iter().map(row).collect::<Vec<_>>(),
    });
    if with_sweep {
        v["sweep"] = sweep(plans, cluster, bounds)
            .iter()
            .map(|r| {
                let tps = r.plan.map(|p| p.value);
                serde_json::json!({
                    "accelerators": r.accelerators,
                    "tps": tps,
                    "usage": r.plan.map(|p| p.usage.clone()),
                    "bound": r.bound.is_finite().then_some(r.bound),
                    "gap": tps.map(|t| crate::report::table::gap(t, r.bound)),
                    "optimal": tps.is_some_and(|t| t <= r.bound),
                })
            })
            .collect();
    }
    if let Some(p) = chosen {
        // Its TPS against the bound of its accelerator count (the plan's own value
        // when the per-mix DP finished: then every mix is proven).
        let n = p.usage.iter().sum::<usize>();
        let bound = bounds
            .get(n.saturating_sub(1))
            .map_or(p.value, |b| b.min(p.value));
        v["chosen"] = row(p);
        v["chosen"]["bound"] = serde_json::json!(bound);
        v["chosen"]["gap"] = serde_json::json!(crate::report::table::gap(p.value, bound));
    }
    v
}
