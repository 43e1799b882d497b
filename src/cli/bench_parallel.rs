//! `dnnplace bench --parallel`: the rows of [`crate::experiments::parallel`] as two tables —
//! the scale rows (time, objective, bound, gap, layout, peak memory) and Megatron-LM's
//! Table 1 under our model next to our plan, with the first stage's memory against
//! Megatron's formula.

use crate::experiments::parallel::{megatron_rows, scale_rows};
use crate::model::human_bytes;
use crate::report::parallel::{layout_code, summary_line};
use crate::report::tabular::Table;

use super::CliError;

fn print(t: &Table, markdown: bool) {
    print!("{}", if markdown { t.markdown() } else { t.text() });
}

/// The layout code of a plan, `-` without one.
fn short(o: &crate::solve::parallel::ParallelOutcome) -> String {
    o.plan.as_ref().map_or("-".into(), layout_code)
}

pub fn run(markdown: bool) -> Result<(), CliError> {
    let rows = scale_rows(60.0).map_err(CliError::Internal)?;
    let mut t = Table::new([
        "row",
        "GPUs",
        "time s",
        "value ms",
        "bound ms",
        "gap",
        "status",
        "layout",
        "configs solved",
        "peak MiB",
    ]);
    for r in &rows {
        let o = &r.outcome;
        t.push([
            r.name.clone(),
            r.devices.to_string(),
            format!("{:.3}", r.seconds),
            format!("{:.3}", o.value),
            format!("{:.3}", o.bound),
            format!("{:.3}%", 100.0 * o.gap()),
            o.status.kind().to_string(),
            short(o),
            format!("{} of {}", o.configs_solved, o.configs),
            r.peak_bytes
                .map_or("-".into(), |b| format!("{:.0}", b as f64 / 1048576.0)),
        ]);
    }
    println!("Parallel layouts at scale (uniform; free in the rows named free; mixed3: 32 × 8 each of H100, A100-80GB, V100. Llama-3-70B-shaped, s = 4096, bf16, 8 × H100 per machine unless mixed3, 50 GB/s network per GPU)\n");
    print(&t, markdown);
    for r in &rows {
        if let Some(pl) = &r.outcome.plan {
            println!("{}: {}", r.name, summary_line(pl));
        }
    }
    let rows = megatron_rows(60.0).map_err(CliError::Internal)?;
    let mut t = Table::new([
        "model",
        "GPUs",
        "t·p·d",
        "B",
        "measured TFLOP/s",
        "theirs, our model",
        "error",
        "iteration ms",
        "our plan",
        "iteration ms",
        "TFLOP/s",
        "theirs / ours",
    ]);
    let mut m = Table::new([
        "model",
        "t·p",
        "Megatron W+G+O (18 B/param)",
        "ours (16 B/param)",
        "ours, 4-byte grads",
        "difference",
    ]);
    for r in &rows {
        let theirs_ms = r.theirs.as_ref().and_then(|x| x.1.iteration_ms);
        let ours_ms = r.ours.plan.as_ref().and_then(|p| p.score.iteration_ms);
        t.push([
            format!("{}B", r.params_b),
            r.gpus.to_string(),
            format!("{}·{}·{}", r.t, r.p, r.d),
            r.global_batch.to_string(),
            format!("{:.0}", r.measured_tflops),
            format!(
                "{:.1} (b{})",
                r.theirs_tflops,
                r.theirs.as_ref().map_or(0, |x| x.0)
            ),
            format!(
                "{:+.1}%",
                100.0 * (r.theirs_tflops / r.measured_tflops - 1.0)
            ),
            theirs_ms.map_or("does not fit".into(), |x| format!("{x:.0}")),
            short(&r.ours),
            ours_ms.map_or("-".into(), |x| format!("{x:.0}")),
            format!("{:.1}", r.ours_tflops),
            match (theirs_ms, ours_ms) {
                (Some(a), Some(b)) => format!("{:.3}", a / b),
                _ => "-".into(),
            },
        ]);
        m.push([
            format!("{}B", r.params_b),
            format!("{}·{}", r.t, r.p),
            human_bytes(r.megatron_resident_bytes),
            human_bytes(r.our_resident_bytes),
            human_bytes(r.our_resident_fp32_grad_bytes),
            format!(
                "{:+.2}%",
                100.0 * (r.our_resident_fp32_grad_bytes / r.megatron_resident_bytes - 1.0)
            ),
        ]);
    }
    println!("\nMegatron-LM Table 1 (Narayanan et al., SC'21; GPT, s = 2048, fp16, DGX A100 80 GB, 25 GB/s per GPU) under our model, and our plan on the same GPUs\n");
    print(&t, markdown);
    println!("\nFirst pipeline stage, per GPU: weights + gradients + optimizer state\n");
    print(&m, markdown);
    Ok(())
}
