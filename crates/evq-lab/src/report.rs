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
    let color = match v {
        Verdict::Holds => "#1a7f37",
        Verdict::Differs => "#b35900",
        Verdict::NotMeasured => "#6e7781",
    };
    format!(
        "<span class=\"badge\" style=\"background:{color}\">{}</span>",
        v.label()
    )
}

/// Renders the whole report.
pub fn html(results: &LabResults) -> String {
    let mut h = String::new();
    let m = &results.machine;
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>evq lab report</title><style>\
body{{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#1f2328;line-height:1.45}}\
table{{border-collapse:collapse;margin:.6em 0;width:100%}}td,th{{border:1px solid #d0d7de;padding:.3em .5em;text-align:left;vertical-align:top;font-size:.92em}}\
th{{background:#f6f8fa}}.badge{{color:#fff;border-radius:.8em;padding:.05em .6em;font-size:.85em;white-space:nowrap}}\
code,pre{{background:#f6f8fa;border-radius:4px;padding:.1em .3em;font-size:.88em}}pre{{padding:.6em;overflow-x:auto}}\
section{{border-top:2px solid #d0d7de;margin-top:2em}}svg{{max-width:100%;height:auto}}</style></head><body>\
<h1>evq lab report</h1><p>Each source's experiment re-run on this kernel. Every speed figure is a ratio \
against a baseline measured in the same run; verdicts say whether the source's claim holds here and \
the rule that decided it.</p>"
    );
    let _ = write!(
        h,
        "<h2>Machine</h2><table><tr><th>kernel</th><td>{}</td></tr><tr><th>CPU</th><td>{} × {}</td></tr>\
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
    h.push_str("</table><h2>Summary</h2><table><tr><th>experiment</th><th>source</th><th>claim</th><th>measured here</th><th>verdict</th></tr>");
    for e in &results.experiments {
        let _ = write!(
            h,
            "<tr><td><a href=\"#{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td></tr>",
            escape(&e.name),
            escape(&e.seed),
            escape(&e.claim),
            escape(&e.measured),
            badge(e.verdict)
        );
    }
    h.push_str("</table>");
    for e in &results.experiments {
        let _ = write!(
            h,
            "<section id=\"{0}\"><h2>{0}</h2><p><strong>Source:</strong> {1} · took {2:.1} s</p>\
<table><tr><th>claim</th><th>measured here</th><th>verdict</th><th>how the verdict follows</th></tr>",
            escape(&e.name),
            escape(&e.seed),
            e.seconds
        );
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
        for p in &e.plots {
            let _ = write!(h, "<figure>{}<figcaption>{}", p.svg, escape(&p.title));
            if !p.png.is_empty() {
                let _ = write!(h, " (PNG: <a href=\"{0}\">{0}</a>)", escape(&p.png));
            }
            h.push_str("</figcaption></figure>");
        }
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
    }
    h.push_str("</body></html>\n");
    h
}
