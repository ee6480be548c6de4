//! The report as a reader meets it: headless Chromium (Debian's `chromium`)
//! opens `index.html` built from the recorded quick run (`testdata/recorded`,
//! judged and rendered exactly as `evq lab --rejudge` does), 1400 px wide.
//!
//! - A screenshot of the first screen is kept beside the report
//!   (`target/report-in-browser/screenshot.png`), for a person to look at.
//! - A copy of the page with a script appended (the report itself carries no
//!   script) records, after layout, every figure's rendered size and where the
//!   verdict table sits; `--dump-dom` prints the page with those attributes, and
//!   the test checks that every figure has a non-zero size and that the verdict
//!   table starts, with its first claims, inside the first screen.
//!
//! Without Chromium the test says so and passes, unless `EVQ_REQUIRE_ALL=1`.

use evq_lab::experiment::{Outcome, RunSize};
use evq_lab::record::{RawExperiment, RawRun, RAW_FORMAT};
use evq_lab::tools::Tools;
use std::path::{Path, PathBuf};
use std::process::Command;

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 900;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| Tools::find(n))
}

/// The report directory, under the workspace's target directory so the
/// screenshot stays there after the test.
fn report_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            crate_dir
                .parent()
                .and_then(Path::parent)
                .unwrap_or(crate_dir)
                .join("target")
        });
    target.join("report-in-browser")
}

/// `raw.json` of the recorded quick run.
fn recorded_run(dir: &Path) {
    let experiments = evq_lab::experiments::ALL
        .iter()
        .map(|s| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/recorded")
                .join(format!("{}.json", s.name()));
            let text = std::fs::read_to_string(&path).unwrap();
            RawExperiment {
                name: s.name().to_string(),
                seconds: 0.0,
                outcome: Outcome::Measured(serde_json::from_str(&text).unwrap()),
            }
        })
        .collect();
    let raw = RawRun {
        format: RAW_FORMAT,
        machine: evq_lab::machine::machine(),
        kernel: evq_lab::machine::kernel(),
        peers: evq_lab::machine::peers(),
        size: RunSize::Quick,
        command: "evq lab --quick (recorded)".into(),
        experiments,
    };
    std::fs::write(
        dir.join(evq_lab::RAW_FILE),
        serde_json::to_string(&raw).unwrap(),
    )
    .unwrap();
}

fn headless(chromium: &Path) -> Command {
    let mut cmd = Command::new(chromium);
    // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
        &format!("--window-size={WIDTH},{HEIGHT}"),
    ]);
    cmd
}

/// Width and height from a PNG's header.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[1..4], b"PNG", "{} is not a PNG", path.display());
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

const MEASURE: &str = r#"<script>
const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
const figures = [...document.querySelectorAll('figure')].map(f => ({
  id: f.id, svg: f.querySelector('svg') ? box(f.querySelector('svg')) : [0, 0, 0, 0], caption: (f.querySelector('figcaption') || {}).textContent || ''
}));
const table = document.getElementById('verdicts');
const rows = table ? [...table.querySelectorAll('tr')].map(box) : [];
document.body.setAttribute('data-layout', JSON.stringify({
  figures, table: table ? box(table) : null, rows, viewport: [innerWidth, innerHeight]
}));
</script>"#;

#[test]
fn the_report_opens_with_its_verdicts_and_draws_every_figure() {
    let Some(chromium) = chromium() else {
        evq_testkit::skip(
            "chromium",
            "not installed (scripts/install-peers.sh installs it)",
        );
        return;
    };
    let dir = report_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    recorded_run(&dir);
    let results = evq_lab::rejudge(&dir).unwrap();
    let figures: usize = results.experiments.iter().map(|e| e.figures.len()).sum();
    let claims: usize = results.experiments.iter().map(|e| e.checks.len()).sum();

    // The screenshot, kept beside the report.
    let shot = dir.join("screenshot.png");
    let out = headless(&chromium)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", dir.join("index.html").display()))
        .output()
        .unwrap();
    assert!(
        shot.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(png_size(&shot), (WIDTH, HEIGHT));

    // The layout, measured by the browser.
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(
        !html.contains("<script"),
        "the report itself runs no script"
    );
    let check = dir.join("layout-check.html");
    std::fs::write(
        &check,
        html.replace("</body>", &format!("{MEASURE}</body>")),
    )
    .unwrap();
    let out = headless(&chromium)
        .arg("--dump-dom")
        .arg(format!("file://{}", check.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let attr = dom
        .split("data-layout=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "no layout in the dumped page: {}",
                &dom[..dom.len().min(300)]
            )
        });
    let layout: serde_json::Value =
        serde_json::from_str(&attr.replace("&quot;", "\"").replace("&amp;", "&")).unwrap();

    let drawn = layout["figures"].as_array().unwrap();
    assert_eq!(drawn.len(), figures, "one <figure> per judged figure");
    for f in drawn {
        let (w, h) = (f["svg"][2].as_f64().unwrap(), f["svg"][3].as_f64().unwrap());
        assert!(w > 100.0 && h > 50.0, "{} drawn at {w}×{h}", f["id"]);
        assert!(
            f["caption"].as_str().unwrap().len() > 40,
            "{} has no caption saying what to look at",
            f["id"]
        );
    }
    let viewport = layout["viewport"][1].as_f64().unwrap();
    let table = &layout["table"];
    assert!(!table.is_null(), "no verdict table");
    assert!(
        table[1].as_f64().unwrap() < viewport / 3.0,
        "the verdict table starts at {} px, not near the top of a {viewport} px screen",
        table[1]
    );
    let rows = layout["rows"].as_array().unwrap();
    assert_eq!(rows.len(), claims + 1, "a header and one row per claim");
    let first_claim_bottom = rows[1][1].as_f64().unwrap() + rows[1][3].as_f64().unwrap();
    assert!(
        first_claim_bottom < viewport,
        "the first claim's row ends at {first_claim_bottom} px, below the first screen"
    );
    eprintln!(
        "{figures} figures drawn, {claims} claims in the table; screenshot: {}",
        shot.display()
    );
}
