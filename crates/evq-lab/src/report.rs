//! Rendering: the judged results drawn (SVG in the page, PNG copies beside it)
//! and written out as `index.html` and `results.json`. Reads only
//! [`LabResults`], never raw records or scenario code.

use crate::html::escape;
use crate::record::LabResults;
use crate::verdict::Verdict;
use std::fmt::Write;
use std::io;
use std::path::Path;

/// Draws every figure into `dir` and writes `results.json` and `index.html`.
///
/// # Errors
/// A file cannot be written.
pub fn write(results: &mut LabResults, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for e in &mut results.experiments {
        e.plots = e
            .figures
            .iter()
            .map(|f| crate::plot::render(&f.chart, dir, &f.stem))
            .collect();
    }
    let json = serde_json::to_string_pretty(results).map_err(io::Error::other)?;
    std::fs::write(dir.join("results.json"), json)?;
    std::fs::write(dir.join("index.html"), html(results))
}

fn badge(v: Verdict) -> String {
    let class = match v {
        Verdict::Holds => "holds",
        Verdict::Differs => "differs",
        Verdict::NotMeasured => "not-measured",
    };
    format!("<span class=\"badge {class}\">{}</span>", v.label())
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1340px;margin:1.2em auto;padding:0 1em;color:#1f2328;line-height:1.4}\
h1{margin:.2em 0}table{border-collapse:collapse;margin:.6em 0;width:100%}\
td,th{border:1px solid #d0d7de;padding:.3em .5em;text-align:left;vertical-align:top;font-size:.9em}\
th{background:#f6f8fa}#verdicts td{font-size:.84em}#verdicts td.claim{width:30%}#verdicts td.seed{width:15%}\
#verdicts td.verdict{width:7em}.badge{color:#fff;border-radius:.8em;padding:.05em .6em;font-size:.9em;white-space:nowrap}\
.holds{background:#1a7f37}.differs{background:#b35900}.not-measured{background:#6e7781}\
.tally{font-size:1.3em;margin:.2em 0}.run{color:#424a53;margin:.3em 0 .6em}code,pre{background:#f6f8fa;border-radius:4px;padding:.1em .3em;font-size:.88em}\
pre{padding:.6em;overflow-x:auto;white-space:pre-wrap}section{border-top:2px solid #d0d7de;margin-top:2em}\
figure{margin:1em 0}figure svg{width:100%;max-width:900px;height:auto;display:block}\
figcaption{max-width:900px;font-size:.92em;color:#424a53}";

/// Renders the whole report: the verdict table first (one row per claim), then
/// each experiment's plots, checks and method, then the machine and peers.
pub fn html(results: &LabResults) -> String {
    let mut h = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>evq lab report</title><style>{STYLE}</style></head><body>\
<h1>evq lab report</h1>"
    );
    h.push_str(&verdict_table(results));
    for e in &results.experiments {
        h.push_str(&section(e));
    }
    h.push_str(&about(results));
    h.push_str("</body></html>\n");
    h
}

/// The first screen: how many claims hold, then every claim with its verdict.
fn verdict_table(results: &LabResults) -> String {
    let checks = || results.experiments.iter().flat_map(|e| e.checks.iter());
    let count = |v: Verdict| checks().filter(|c| c.verdict == v).count();
    let words: Vec<&str> = results.kernel.split_whitespace().collect();
    let kernel = match words[..] {
        [os, release, .., arch] => format!("{os} {release} {arch}"),
        _ => results.kernel.clone(),
    };
    let size = match results.size {
        crate::RunSize::Smoke => "smoke run: tiny sweeps, the numbers mean nothing",
        crate::RunSize::Quick => "quick run: smaller sweeps",
        crate::RunSize::Full => "full run",
    };
    let missing: Vec<&crate::machine::PeerInfo> = results
        .peers
        .iter()
        .filter(|p| p.version.is_none())
        .collect();
    let missing_line = if missing.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = missing.iter().map(|p| p.name.as_str()).collect();
        let packages: Vec<&str> = missing.iter().map(|p| p.package.as_str()).collect();
        format!(
            "<p class=\"run\"><strong>Not installed here:</strong> {} — the rows that compare against them are not measured. To fill them: <code>sudo apt-get install -y --no-install-recommends {}</code>, then run the lab again.</p>",
            escape(&names.join(", ")),
            escape(&packages.join(" "))
        )
    };
    let mut h = format!(
        "<p class=\"tally\"><strong>{} of {} claims hold here</strong> {} · {} differ {} · {} not measured {}</p>\
<p class=\"run\">The source papers' experiments re-run on {} ({} × {}, load average {} at the start; {size}). \
Each speed figure is a ratio against a baseline measured in the same run. Each experiment's section below \
has its plots, the rule that decided each verdict, and the commands that reproduce it.</p>{missing_line}\
<table id=\"verdicts\"><tr><th>seed</th><th>claim</th><th>measured here</th><th>verdict</th></tr>",
        count(Verdict::Holds),
        checks().count(),
        badge(Verdict::Holds),
        count(Verdict::Differs),
        badge(Verdict::Differs),
        count(Verdict::NotMeasured),
        badge(Verdict::NotMeasured),
        escape(&kernel),
        results.machine.cores,
        escape(&results.machine.cpu),
        escape(results.machine.loadavg_at_start.split_whitespace().next().unwrap_or("?")),
    );
    for e in &results.experiments {
        for (i, c) in e.checks.iter().enumerate() {
            h.push_str("<tr>");
            if i == 0 {
                let _ = write!(
                    h,
                    "<td class=\"seed\" rowspan=\"{}\"><a href=\"#{}\">{}</a><br>{}</td>",
                    e.checks.len(),
                    escape(&e.name),
                    escape(&e.name),
                    escape(&e.seed)
                );
            }
            let _ = write!(
                h,
                "<td class=\"claim\">{}</td><td>{}</td><td class=\"verdict\">{}</td></tr>",
                escape(&c.claim),
                escape(&c.measured),
                badge(c.verdict)
            );
        }
    }
    h.push_str("</table>");
    h
}

/// One experiment: its plots first, then its checks with their rules, notes,
/// commands and raw data.
fn section(e: &crate::record::ExperimentRecord) -> String {
    let mut h = format!(
        "<section id=\"{0}\"><h2>{0}</h2><p><strong>Source:</strong> {1} · measured in {2:.1} s</p>",
        escape(&e.name),
        escape(&e.seed),
        e.seconds
    );
    for (p, f) in e.plots.iter().zip(&e.figures) {
        let _ = write!(
            h,
            "<figure id=\"fig-{}\">{}<figcaption><strong>{}.</strong> {}",
            escape(&f.stem),
            p.svg,
            escape(&p.title),
            escape(&f.caption)
        );
        if !p.png.is_empty() {
            let _ = write!(h, " (PNG: <a href=\"{0}\">{0}</a>)", escape(&p.png));
        }
        h.push_str("</figcaption></figure>");
    }
    h.push_str("<table><tr><th>claim</th><th>measured here</th><th>verdict</th><th>how the verdict follows</th></tr>");
    for c in &e.checks {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.claim),
            escape(&c.measured),
            badge(c.verdict),
            escape(&c.reasoning)
        );
    }
    h.push_str("</table>");
    if !e.notes.is_empty() {
        h.push_str("<h3>Method notes</h3><ul>");
        for n in &e.notes {
            let _ = write!(h, "<li>{}</li>", escape(n));
        }
        h.push_str("</ul>");
    }
    if !e.commands.is_empty() {
        h.push_str("<h3>Reproduce</h3><pre>");
        for c in &e.commands {
            let _ = writeln!(h, "{}", escape(c));
        }
        h.push_str("</pre>");
    }
    let data = serde_json::to_string_pretty(&e.data).unwrap_or_default();
    let _ = write!(
        h,
        "<details><summary>raw data</summary><pre>{}</pre></details></section>",
        escape(&data)
    );
    h
}

/// The machine and the peers, for a reader judging the numbers.
fn about(results: &LabResults) -> String {
    let m = &results.machine;
    let mut h = format!(
        "<section id=\"machine\"><h2>Machine</h2><table><tr><th>kernel</th><td>{}</td></tr><tr><th>CPU</th><td>{} × {}</td></tr>\
<tr><th>memory</th><td>{} MiB</td></tr><tr><th>descriptor limit</th><td>{}</td></tr>\
<tr><th>load average at start</th><td>{} (the machine is shared; noise is reported with each figure)</td></tr>\
<tr><th>compiler</th><td>{}</td></tr><tr><th>command</th><td><code>{}</code>{}</td></tr></table>",
        escape(&results.kernel),
        m.cores,
        escape(&m.cpu),
        m.memory_mib,
        m.nofile_hard,
        escape(&m.loadavg_at_start),
        escape(&m.rustc),
        escape(&results.command),
        if results.quick { " (quick: smaller sweeps)" } else { "" }
    );
    h.push_str(
        "<h2>Peers</h2><table><tr><th>peer</th><th>version here</th><th>if missing</th></tr>",
    );
    for p in &results.peers {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.name),
            p.version
                .as_deref()
                .map_or("<em>not installed</em>".to_string(), escape),
            escape(&p.install)
        );
    }
    h.push_str("</table></section>");
    h
}
