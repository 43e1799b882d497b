//! `cargo run --release --example fuzz -- --minutes 10 --target workload`: mutation fuzzing
//! of the readers (workload JSON, placement JSON, ONNX, device-profile TOML) and of
//! `plan`/`score` behind them, and of the command line's own inputs (cluster TOML files,
//! workload `cluster` sections, `--cluster` and `--schedule` strings, every
//! `--from-export` format, `--highs-option`: `harness/cli.rs`, one run of the binary per
//! case, `DNNPLACE_BIN` or `target/release/dnnplace`), for a given time. The cases and the oracle are described in
//! `harness/mod.rs`.
//!
//! A supervisor runs the cases in a child process of its own binary (`--worker`), which
//! prints `start i` before and `done i …` after each case (behind a marker byte), catches
//! panics, and runs under an address-space limit (`--memory-gib`, default 4) so that a
//! runaway allocation fails instead of swapping. The supervisor turns what the child cannot
//! report into findings too: any other line on the child's stdout (the library must never
//! print: stdout carries `--json`), death by a signal or an abort (the case it had started)
//! and a hang (no `done` within `--case-timeout`, default 30 s: the child is killed). After
//! each such finding the child is restarted at the next case. Every finding is written to
//! `--findings` (default `target/fuzz-findings/`): the input, and a note with the replay
//! command `--target T --seed S --replay I`.
//!
//! Seeds: the repository's (`harness/seeds.rs`) plus, unless `--no-shared`, the published
//! workloads under `--shared` (default `../shared/workloads`), read at run time. Run it
//! with `nice`; the worker sets `RAYON_NUM_THREADS=1`. The build profile `fuzz` (release
//! with overflow checks and debug assertions) turns silent integer wrap-around into
//! findings: `cargo run --profile fuzz --example fuzz -- …`.
//!
//! `DNNPLACE_FUZZ_TIMES=1` with `--replay` prints each method's time and notes (which phase
//! of which method overran its limit).
//!
//! Prints one line per minute and a summary: cases run, accepted, rejected, findings by
//! kind (panic, internal, abort/signal, hang, stdout). Exit status 1 when anything was found.

mod harness;

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use harness::{make_case, run_case, Seeds, Target, Verdict};

struct Options {
    targets: Vec<Target>,
    minutes: f64,
    cases: Option<u64>,
    seed: u64,
    from: u64,
    case_timeout_s: f64,
    memory_gib: f64,
    shared: Option<PathBuf>,
    findings: PathBuf,
    worker: bool,
    replay: Option<u64>,
}

fn usage() -> ! {
    eprintln!(
        "usage: fuzz [--target workload|placement|onnx|profile|cluster-toml|cluster-arg|workload-cluster|schedule|from-export|highs-option|all] [--minutes M (per target)] [--cases N] [--seed S]\n\
         \x20           [--case-timeout SECONDS] [--memory-gib G] [--shared DIR | --no-shared] [--findings DIR] [--replay I]"
    );
    std::process::exit(2)
}

fn parse_options() -> Options {
    let mut o = Options {
        targets: Target::ALL.to_vec(),
        minutes: 1.0,
        cases: None,
        seed: 1,
        from: 0,
        case_timeout_s: 30.0,
        memory_gib: 4.0,
        shared: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/workloads")),
        findings: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-findings"),
        worker: false,
        replay: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--target" => {
                let v = value();
                o.targets = if v == "all" {
                    Target::ALL.to_vec()
                } else {
                    vec![Target::parse(&v).unwrap_or_else(|| usage())]
                };
            }
            "--minutes" => o.minutes = value().parse().unwrap_or_else(|_| usage()),
            "--cases" => o.cases = Some(value().parse().unwrap_or_else(|_| usage())),
            "--seed" => o.seed = value().parse().unwrap_or_else(|_| usage()),
            "--from" => o.from = value().parse().unwrap_or_else(|_| usage()),
            "--case-timeout" => o.case_timeout_s = value().parse().unwrap_or_else(|_| usage()),
            "--memory-gib" => o.memory_gib = value().parse().unwrap_or_else(|_| usage()),
            "--shared" => o.shared = Some(PathBuf::from(value())),
            "--no-shared" => o.shared = None,
            "--findings" => o.findings = PathBuf::from(value()),
            "--replay" => o.replay = Some(value().parse().unwrap_or_else(|_| usage())),
            "--worker" => o.worker = true,
            _ => usage(),
        }
    }
    o
}

fn load_seeds(o: &Options) -> Seeds {
    let mut seeds = Seeds::builtin();
    if let Some(dir) = &o.shared {
        if dir.is_dir() {
            seeds.add_shared(dir);
        } else if !o.worker {
            eprintln!(
                "note: {} is absent; fuzzing from the repository's seeds only",
                dir.display()
            );
        }
    }
    seeds
}

/// Starts every status line of a worker; any other line on its stdout was printed by the
/// code under test (the library must never print: stdout carries `--json`).
const MARK: &str = "\u{1}fuzz ";

/// The panic message of the last panic on this thread, recorded by the hook.
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn record_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let mut at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        // Where in this crate, when the panic is in a library (an allocation, an index).
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        let frames: Vec<&str> = trace
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("at ./src/") || l.starts_with("at ./crates/"))
            .take(2)
            .collect();
        let in_crate = info
            .location()
            .is_some_and(|l| l.file().starts_with("src/") || l.file().starts_with("crates/"));
        if !frames.is_empty() && !in_crate {
            at = format!("{at} (from {})", frames.join(", "));
        }
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(format!("{message}{at}"));
        }
    }));
}

/// Runs one case in this process; `Err` is a finding (panic or oracle failure).
fn run_guarded(
    seeds: &Seeds,
    target: Target,
    seed: u64,
    index: u64,
) -> Result<Verdict, (String, String)> {
    let case = make_case(seeds, target, seed, index);
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(&case))) {
        Ok(Ok(v)) => Ok(v),
        // A command-line case names what the binary did (`harness/cli.rs`).
        Ok(Err(f)) => {
            let kind = ["panic", "abort", "hang", "exit 3"]
                .into_iter()
                .find(|k| f.0.starts_with(&format!("{k}:")))
                .map_or("internal", |k| if k == "exit 3" { "exit3" } else { k });
            Err((kind.into(), f.0))
        }
        Err(_) => {
            let message = LAST_PANIC
                .lock()
                .ok()
                .and_then(|mut m| m.take())
                .unwrap_or_default();
            Err(("panic".into(), message))
        }
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// `--worker`: cases `from, from+1, …` of one target, one status line each on stdout.
fn worker(o: &Options) {
    let limit = (o.memory_gib * 1024.0 * 1024.0 * 1024.0) as libc::rlim_t;
    let rl = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit reads one plain struct.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) };
    record_panics();
    let seeds = load_seeds(o);
    let target = o.targets[0];
    let out = std::io::stdout();
    let end = o.cases.map_or(u64::MAX, |n| o.from.saturating_add(n));
    for index in o.from..end {
        let _ = writeln!(out.lock(), "{MARK}start {index}");
        let started = Instant::now();
        let line = match run_guarded(&seeds, target, o.seed, index) {
            Ok(Verdict::Accepted) => format!(
                "done {index} accepted {:.3}",
                started.elapsed().as_secs_f64()
            ),
            Ok(Verdict::Rejected(_)) => format!(
                "done {index} rejected {:.3}",
                started.elapsed().as_secs_f64()
            ),
            Err((kind, message)) => format!(
                "done {index} {kind} {:.3} {}",
                started.elapsed().as_secs_f64(),
                one_line(&message)
            ),
        };
        let mut lock = out.lock();
        let _ = writeln!(lock, "{MARK}{line}");
        let _ = lock.flush();
    }
}

#[derive(Default)]
struct Tally {
    cases: u64,
    accepted: u64,
    rejected: u64,
    findings: Vec<(String, u64, String)>,
    slowest: (f64, u64),
}

fn save_finding(o: &Options, seeds: &Seeds, target: Target, index: u64, kind: &str, message: &str) {
    let case = make_case(seeds, target, o.seed, index);
    let _ = std::fs::create_dir_all(&o.findings);
    let stem = format!("{}-seed{}-case{index}", target.name(), o.seed);
    let _ = std::fs::write(
        o.findings.join(format!("{stem}.{}", target.extension())),
        &case.input,
    );
    let note = format!(
        "{kind}: {message}\ncase: {}\nreplay: cargo run --release --example fuzz -- --target {} --seed {} --replay {index}\n",
        case.description,
        target.name(),
        o.seed
    );
    let _ = std::fs::write(o.findings.join(format!("{stem}.txt")), note);
}

/// Supervises workers for one target until the time or case budget is spent.
fn supervise(o: &Options, seeds: &Seeds, target: Target) -> Tally {
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs_f64(o.minutes * 60.0);
    let exe = std::env::current_exe().expect("this program");
    let mut next = o.from;
    let end = o.cases.map_or(u64::MAX, |n| o.from.saturating_add(n));
    let mut last_report = Instant::now();
    let started = Instant::now();
    'restart: while next < end && Instant::now() < deadline {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--worker",
            "--target",
            target.name(),
            "--seed",
            &o.seed.to_string(),
            "--from",
            &next.to_string(),
        ]);
        cmd.args(["--memory-gib", &o.memory_gib.to_string()]);
        if let Some(n) = o.cases {
            cmd.args(["--cases", &(o.from + n - next).to_string()]);
        }
        match &o.shared {
            Some(dir) => cmd.arg("--shared").arg(dir),
            None => cmd.arg("--no-shared"),
        };
        cmd.env("RAYON_NUM_THREADS", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start a worker");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // What a dying worker printed: its messages and the first frames in this crate.
        let stderr_tail = std::thread::spawn(move || {
            let mut kept: Vec<String> = Vec::new();
            let mut frames = 0;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let t = line.trim();
                let frame = t.starts_with("at ./src/")
                    || t.starts_with("at ./crates/")
                    || t.starts_with("at ./examples/");
                if (frame && frames < 4)
                    || (!line.starts_with(' ') && !t.is_empty() && kept.len() < 12)
                {
                    frames += usize::from(frame);
                    kept.push(t.to_string());
                }
            }
            kept.join(" | ")
        });
        let mut current: Option<u64> = None;
        loop {
            if last_report.elapsed() >= Duration::from_secs(60) {
                last_report = Instant::now();
                eprintln!(
                    "[{:>6.1} min] {}: {} cases ({} accepted, {} rejected), {} findings",
                    started.elapsed().as_secs_f64() / 60.0,
                    target.name(),
                    tally.cases,
                    tally.accepted,
                    tally.rejected,
                    tally.findings.len()
                );
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let _ = child.kill();
                let _ = child.wait();
                break 'restart;
            }
            let wait =
                Duration::from_secs_f64(o.case_timeout_s).min(left.max(Duration::from_millis(10)));
            match rx.recv_timeout(wait) {
                Ok(line) => {
                    let Some(line) = line.strip_prefix(MARK) else {
                        // Printed by the code under test; one finding per case.
                        let index = current.unwrap_or(next);
                        if tally
                            .findings
                            .last()
                            .is_none_or(|f| f.0 != "stdout" || f.1 != index)
                        {
                            let message = format!("printed to stdout: {}", line.trim());
                            eprintln!("FINDING {} case {index}: stdout: {message}", target.name());
                            save_finding(o, seeds, target, index, "stdout", &message);
                            tally.findings.push(("stdout".into(), index, message));
                        }
                        continue;
                    };
                    let mut parts = line.splitn(5, ' ');
                    let (what, index) = (
                        parts.next().unwrap_or(""),
                        parts
                            .next()
                            .and_then(|i| i.parse::<u64>().ok())
                            .unwrap_or(next),
                    );
                    if what == "start" {
                        current = Some(index);
                        continue;
                    }
                    current = None;
                    next = index + 1;
                    tally.cases += 1;
                    let kind = parts.next().unwrap_or("");
                    let secs: f64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
                    if secs > tally.slowest.0 {
                        tally.slowest = (secs, index);
                    }
                    match kind {
                        "accepted" => tally.accepted += 1,
                        "rejected" => tally.rejected += 1,
                        _ => {
                            let message = parts.next().unwrap_or("").to_string();
                            eprintln!("FINDING {} case {index}: {kind}: {message}", target.name());
                            save_finding(o, seeds, target, index, kind, &message);
                            tally.findings.push((kind.into(), index, message));
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if Instant::now() >= deadline {
                        continue;
                    }
                    let index = current.unwrap_or(next);
                    let _ = child.kill();
                    let _ = child.wait();
                    let message = format!("no answer within {} s", o.case_timeout_s);
                    eprintln!("FINDING {} case {index}: hang: {message}", target.name());
                    save_finding(o, seeds, target, index, "hang", &message);
                    tally.findings.push(("hang".into(), index, message));
                    tally.cases += 1;
                    next = index + 1;
                    continue 'restart;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().expect("wait for the worker");
                    let tail = stderr_tail.join().unwrap_or_default();
                    match current {
                        Some(index) => {
                            let message =
                                format!("worker died ({status}) during the case; stderr: {tail}");
                            eprintln!("FINDING {} case {index}: abort: {message}", target.name());
                            save_finding(o, seeds, target, index, "abort", &message);
                            tally.findings.push(("abort".into(), index, message));
                            tally.cases += 1;
                            next = index + 1;
                        }
                        None if next >= end => {}
                        None => panic!("the worker exited ({status}) between cases: {tail}"),
                    }
                    continue 'restart;
                }
            }
        }
    }
    tally
}

fn main() {
    let o = parse_options();
    if o.worker {
        worker(&o);
        return;
    }
    let seeds = load_seeds(&o);
    if let Some(index) = o.replay {
        record_panics();
        for &target in &o.targets {
            let case = make_case(&seeds, target, o.seed, index);
            println!("{} case {index}: {}", target.name(), case.description);
            println!(
                "input ({} bytes): {}",
                case.input.len(),
                String::from_utf8_lossy(&case.input[..case.input.len().min(4000)])
            );
            println!("result: {:?}", run_guarded(&seeds, target, o.seed, index));
        }
        return;
    }
    eprintln!(
        "seeds: {} workloads, {} placements, {} ONNX models, {} profiles; {} min per target, run seed {}",
        seeds.workloads.len(),
        seeds.placements.len(),
        seeds.onnx.len(),
        seeds.profiles.len(),
        o.minutes,
        o.seed
    );
    let mut any = false;
    let mut summary = Vec::new();
    for &target in &o.targets {
        let started = Instant::now();
        let t = supervise(&o, &seeds, target);
        let count = |k: &str| t.findings.iter().filter(|f| f.0 == k).count();
        summary.push(format!(
            "{:<16} {:>8.1} min {:>8} cases {:>8} accepted {:>8} rejected   panic {} internal {} exit3 {} abort {} hang {} stdout {}   slowest {:.2} s (case {})",
            target.name(),
            started.elapsed().as_secs_f64() / 60.0,
            t.cases,
            t.accepted,
            t.rejected,
            count("panic"),
            count("internal"),
            count("exit3"),
            count("abort"),
            count("hang"),
            count("stdout"),
            t.slowest.0,
            t.slowest.1
        ));
        any |= !t.findings.is_empty();
    }
    println!("target      time        cases    accepted    rejected   findings");
    for line in summary {
        println!("{line}");
    }
    if any {
        println!("findings written to {}", o.findings.display());
        std::process::exit(1);
    }
}
