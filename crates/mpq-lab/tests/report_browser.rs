//! The report of a real (small) experiment opened in headless Chromium: the browser loads
//! every figure (the DOM it built holds one SVG per figure) and its screenshot is not blank.
//!
//! Chromium comes from Debian's `chromium` package: `scripts/setup-chromium.sh` installs it
//! (the test command runs it and then sets `MPQ_REQUIRE_CHROMIUM=1`, making a missing browser
//! a failure). Without the browser and without that variable the test is skipped with a
//! message. `MPQ_CHROMIUM` names another browser binary.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpq_lab::plan::Plan;
use mpq_lab::report::write_report;
use mpq_lab::runner::{run, RunOptions};
use mpq_lab::Experiment;

/// Two scenarios of downloads and one of request/response with a path failing (time series).
const DOWNLOADS: &str = "\
name: browser-downloads
seed: 3
workload: {download: 300KB}
factors: {initial_path: [0, 1]}
design: {type: wsp, points: 2, seed: 1}
topology:
  paths:
    - {rate: {min: 5mbit, max: 20mbit}, rtt: {min: 10ms, max: 40ms}, queue: 50ms}
    - {rate: 10mbit, rtt: 30ms, queue: 50ms}
";
const HANDOVER: &str = "\
name: browser-handover
workload: {reqresp: {size: 750B, interval: 400ms, count: 12}}
classes:
  - name: handover
    topology:
      paths:
        - {rate: 50mbit, rtt: 15ms, queue: 30ms}
        - {rate: 50mbit, rtt: 25ms, queue: 50ms}
      events:
        - {path: 0, fail_at: 3s}
";

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPQ_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Runs the browser with `args` on `page`, killing it after 90 s; returns its stdout (through
/// a file: a pipe nobody reads while waiting would fill up and stall the browser).
fn browse(bin: &Path, profile: &Path, args: &[&str], page: &Path) -> String {
    let out_path = profile.with_extension("stdout");
    let out_file = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new(bin)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(out_file)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    // 900 polls 100 ms apart: about 90 s.
    let mut polls = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        polls += 1;
        if polls > 900 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {args:?} did not finish within 90 s", bin.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{} {args:?} failed: {status}", bin.display());
    std::fs::read_to_string(&out_path).unwrap()
}

fn run_experiment(yaml: &str, out: &Path) {
    let exp = Experiment::from_text(Path::new("browser.yaml"), yaml.into()).unwrap();
    let plan = Plan::new(&exp).unwrap();
    run(&exp, &plan, &RunOptions::new(out, 2)).unwrap();
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(bin) = chromium() else {
        if std::env::var_os("MPQ_REQUIRE_CHROMIUM").is_some() {
            panic!("MPQ_REQUIRE_CHROMIUM is set but no chromium was found (scripts/setup-chromium.sh installs it)");
        }
        eprintln!(
            "SKIPPED report_renders_in_headless_chromium: no chromium on PATH and MPQ_CHROMIUM unset; \
             install it with scripts/setup-chromium.sh (Debian package `chromium`)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (downloads, handover) = (dir.path().join("downloads"), dir.path().join("handover"));
    run_experiment(DOWNLOADS, &downloads);
    run_experiment(HANDOVER, &handover);
    let joined = dir.path().join("joined");
    mpq_lab::results::merge(&joined, &[downloads, handover]).unwrap();
    let page = dir.path().join("report.html");
    let s = write_report(&joined, &page, None).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"fig-delay-handover-0000-r0\""), "the handover's time series is in the page");

    // Every figure loaded: the DOM the browser built has one <svg> per figure, each in its
    // <figure>.
    let profile = dir.path().join("profile");
    let dom = browse(&bin, &profile, &["--dump-dom"], &page);
    assert_eq!(dom.matches("<svg").count(), s.figures, "SVGs in the DOM");
    assert_eq!(dom.matches("class=\"figure\"").count(), s.figures, "figures in the DOM");
    assert!(dom.contains("<table id=\"scenarios\""), "the scenario table");

    // The screenshot is not blank: many colours, and not white nearly everywhere.
    let shot = dir.path().join("shot.png");
    browse(&bin, &profile, &[&format!("--screenshot={}", shot.display()), "--window-size=1200,2400"], &page);
    let decoder = png::Decoder::new(std::fs::File::open(&shot).expect("no screenshot written"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    let colours: HashSet<&[u8]> = pixels.iter().copied().collect();
    let non_white = pixels.iter().filter(|p| p.iter().take(3).any(|&c| c < 200)).count();
    assert!(colours.len() > 50, "screenshot has {} colours", colours.len());
    assert!(non_white * 100 > pixels.len(), "screenshot is {non_white} of {} pixels not white", pixels.len());
}
