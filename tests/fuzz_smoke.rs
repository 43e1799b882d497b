//! A short deterministic run of the mutation fuzzer of `examples/fuzz` (the long runs:
//! `cargo run --release --example fuzz -- --minutes 10`): the first cases of every reader,
//! from the repository's seeds only, under the same oracle (every method but the IP). A panic or a finding fails the
//! test; a watchdog aborts the process when one case runs for more than two minutes (a
//! hang, which no assertion could report).

// The replay and seed-loading parts serve the example only.
#[allow(dead_code)]
#[path = "../examples/fuzz/harness/mod.rs"]
mod harness;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::{make_case, run_case, Seeds, Target, Verdict};

/// Cases per target: enough to reach every mutation operator many times, few enough for
/// seconds on the 2-core CI machine.
fn cases(target: Target) -> u64 {
    match target {
        Target::Workload => 600,
        Target::Placement => 5000,
        Target::Onnx => 3000,
        Target::Profile => 3000,
        // One run of the binary each (tens of milliseconds).
        Target::Cli(_) => 25,
    }
}

#[test]
fn every_reader_survives_mutated_inputs() {
    // The command-line targets run the binary this test was built with.
    std::env::set_var("DNNPLACE_BIN", env!("CARGO_BIN_EXE_dnnplace"));
    let seeds = Seeds::builtin();
    let current: Arc<Mutex<(String, Instant)>> =
        Arc::new(Mutex::new((String::new(), Instant::now())));
    let watched = current.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let (case, since) = watched
            .lock()
            .map_or_else(|p| p.into_inner().clone(), |g| g.clone());
        if since.elapsed() > Duration::from_secs(120) {
            eprintln!(
                "hang: {case} has run for {:.0} s",
                since.elapsed().as_secs_f64()
            );
            std::process::abort();
        }
    });
    let mut findings = Vec::new();
    for target in Target::ALL {
        let (mut accepted, mut rejected) = (0, 0);
        for index in 0..cases(target) {
            let mut case = make_case(&seeds, target, 1, index);
            // Not the IP here: HiGHS per case is slow, and its numerics on values near 1e15
            // are #11 point 2, checked by the IP's own property tests; the long runs of
            // `examples/fuzz` include it.
            case.allow_ip = false;
            *current.lock().unwrap() = (
                format!("{} case {index} ({})", target.name(), case.description),
                Instant::now(),
            );
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(&case))) {
                Ok(Ok(Verdict::Accepted)) => accepted += 1,
                Ok(Ok(Verdict::Rejected(_))) => rejected += 1,
                Ok(Err(f)) => findings.push(format!(
                    "{} case {index} ({}): {}",
                    target.name(),
                    case.description,
                    f.0
                )),
                Err(_) => findings.push(format!(
                    "{} case {index} ({}): panic (message above)",
                    target.name(),
                    case.description
                )),
            }
        }
        eprintln!(
            "{}: {} cases, {accepted} accepted, {rejected} rejected",
            target.name(),
            cases(target)
        );
        // The mutations must reach both sides of every reader.
        assert!(
            accepted > 0 && rejected > 0,
            "{}: {accepted} accepted, {rejected} rejected",
            target.name()
        );
    }
    assert!(
        findings.is_empty(),
        "{} findings:\n{}",
        findings.len(),
        findings.join("\n")
    );
}
