//! The report in a real browser: headless Chromium renders the page written by
//! `dnnplace plan --report`, takes a screenshot (decoded with the `png` crate: not blank,
//! many colours) and dumps the DOM (one load bar and one Gantt row per device), and its log
//! shows no console error. Skips, saying why, where Chromium is absent — except when
//! `DNNPLACE_REQUIRE_BROWSER` is set (CI), where that is a failure.

mod pipeline_gen;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(PathBuf::from);
    if found.is_none() {
        if std::env::var_os("DNNPLACE_REQUIRE_BROWSER").is_some() {
            panic!("chromium is absent but DNNPLACE_REQUIRE_BROWSER is set (.ci/run installs it)");
        }
        eprintln!("SKIPPED: chromium is not installed (apt-get install -y chromium); the browser test needs it");
    }
    found
}

/// Runs the browser with `args` on `page`, killing it after 90 s. Returns (stdout, stderr).
fn browse(browser: &Path, profile: &Path, args: &[String], page: &Path) -> (String, String) {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("waits").is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().expect("output");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains(":CONSOLE")
                || l.contains("Uncaught")
                || l.contains("Failed to load resource")
                || l.contains("net::ERR_")
        })
        .collect()
}

#[test]
fn the_report_renders_in_chromium() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (w, _) = pipeline_gen::uniform_chain(4, 3, 4, 1.0, 2.0, true, 0.25);
    let workload = dir.path().join("chain.json");
    std::fs::write(&workload, dnnplace::io::workload_to_json(&w)).unwrap();
    let page = dir.path().join("plan.html");
    let run = Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .arg("plan")
        .arg(&workload)
        .args(["--schedule", "1f1b", "--micro-batches", "6", "--report"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let devices = html.matches("class=\"load-bar").count();
    assert!(devices >= 2, "the plan uses several devices");

    // One run: the screenshot and the DOM as rendered.
    let shot = dir.path().join("shot.png");
    let (dom, log) = browse(
        &browser,
        &dir.path().join("profile-a"),
        &[
            format!("--screenshot={}", shot.display()),
            "--dump-dom".to_string(),
        ],
        &page,
    );

    // The screenshot: decoded, not blank, colourful.
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}); log:\n{log}")),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buffer).unwrap();
    assert_eq!((info.width, info.height), (1400, 1000));
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels = &buffer[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    for px in pixels.chunks(channels) {
        colours.insert((px[0], px[1], px[2]));
        if px[0] < 235 || px[1] < 235 || px[2] < 235 {
            inked += 1;
        }
    }
    let total = (info.width * info.height) as usize;
    println!(
        "screenshot: {} distinct colours, {:.1}% of pixels inked",
        colours.len(),
        100.0 * inked as f64 / total as f64
    );
    assert!(
        colours.len() >= 32,
        "the page rendered in few colours: {}",
        colours.len()
    );
    assert!(
        inked * 50 >= total,
        "the page is (nearly) blank: {inked} of {total} pixels inked"
    );
    assert!(
        console_errors(&log).is_empty(),
        "console errors:\n{}",
        console_errors(&log).join("\n")
    );

    // The DOM as rendered: one load bar and one Gantt row per device.
    assert!(dom.contains("<svg"), "no DOM dumped; log:\n{log}");
    assert_eq!(
        dom.matches("class=\"load-bar").count(),
        devices,
        "load bars in the rendered DOM"
    );
    assert_eq!(
        dom.matches("class=\"gantt-row\"").count(),
        devices,
        "Gantt rows in the rendered DOM"
    );
    assert!(dom.contains("bottleneck"));

    // The console check catches an error: a page whose script throws.
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><p>x</p><script>throw new Error('boom')</script></body></html>",
    )
    .unwrap();
    let (_, log) = browse(
        &browser,
        &dir.path().join("profile-c"),
        &["--dump-dom".to_string()],
        &bad,
    );
    assert!(
        console_errors(&log).iter().any(|l| l.contains("boom")),
        "the console check missed a thrown error; log:\n{log}"
    );
}
