//! What httperf, wrk and `evq load --json` print at the end of a run, parsed into
//! one shape.

use serde::{Deserialize, Serialize};

/// What a client's own report said, parsed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// Complete replies (wrk: completed requests).
    pub replies: u64,
    /// The tool's own test duration, seconds.
    pub duration_s: f64,
    /// Replies per second as the scenario compares them: replies / duration for
    /// httperf and evq load, `Requests/sec` as wrk prints it.
    pub replies_per_s: f64,
    /// Connection-level errors the tool counted.
    pub errors: u64,
    /// Replies with status 400 or above (wrk's "Non-2xx or 3xx responses").
    pub bad_status: u64,
    /// The CPU time the tool reported for itself, if it does (httperf, evq load).
    pub self_cpu_s: Option<f64>,
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The number after `key` among a line's words (`key` itself a whole word, or
/// `key=` glued to the number as in httperf's `2xx=200`).
fn after<T: std::str::FromStr>(line: &str, key: &str) -> Option<T> {
    let w = words(line);
    if let Some(i) = w.iter().position(|x| *x == key) {
        return w.get(i + 1)?.trim_end_matches([',', 's']).parse().ok();
    }
    let glued = format!("{key}=");
    w.iter()
        .find_map(|x| x.strip_prefix(glued.as_str()))
        .and_then(|v| v.parse().ok())
}

/// httperf's summary: `Total: connections N requests N replies N test-duration
/// D s`, `Reply status: ... 4xx=N 5xx=N`, `CPU time [s]: user U system S ...`,
/// `Errors: total N ...`. The rate is replies over the test duration (httperf's
/// own `Reply rate` line averages 5-s samples and has none in runs under 5 s).
pub(super) fn parse_httperf(text: &str) -> Option<ToolSummary> {
    let total = text.lines().find(|l| l.starts_with("Total: connections"))?;
    let replies: u64 = after(total, "replies")?;
    let duration_s: f64 = after(total, "test-duration")?;
    let errors = text
        .lines()
        .find(|l| l.starts_with("Errors: total"))
        .and_then(|l| after(l, "total"))?;
    let status = text.lines().find(|l| l.starts_with("Reply status:"));
    let bad_status = status.map_or(0, |l| {
        after::<u64>(l, "4xx").unwrap_or(0) + after::<u64>(l, "5xx").unwrap_or(0)
    });
    let self_cpu_s = text
        .lines()
        .find(|l| l.starts_with("CPU time [s]:"))
        .and_then(|l| Some(after::<f64>(l, "user")? + after::<f64>(l, "system")?));
    Some(ToolSummary {
        replies,
        duration_s,
        replies_per_s: if duration_s > 0.0 {
            replies as f64 / duration_s
        } else {
            0.0
        },
        errors,
        bad_status,
        self_cpu_s,
    })
}

/// A wrk time: a number with `us`, `ms`, `s`, `m` or `h` (its `format_time`).
fn wrk_seconds(s: &str) -> Option<f64> {
    let s = s.trim_end_matches(',');
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Some(n * scale)
}

/// wrk's summary: `N requests in Ds, B read`, `Requests/sec: R`, `Socket
/// errors: connect a, read b, write c, timeout d`, `Non-2xx or 3xx responses:
/// N`.
pub(super) fn parse_wrk(text: &str) -> Option<ToolSummary> {
    let done = text.lines().map(str::trim).find(|l| {
        let w = words(l);
        w.len() >= 4 && w[1] == "requests" && w[2] == "in"
    })?;
    let w = words(done);
    let replies: u64 = w[0].parse().ok()?;
    let duration_s = wrk_seconds(w[3])?;
    let replies_per_s = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())?;
    let errors = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Socket errors:"))
        .map_or(Some(0), |l| {
            l.split(',')
                .map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<Option<u64>>()
        })?;
    let bad_status = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .map_or(Some(0), |v| v.trim().parse().ok())?;
    Some(ToolSummary {
        replies,
        duration_s,
        replies_per_s,
        errors,
        bad_status,
        self_cpu_s: None,
    })
}

/// `evq load --json`'s report.
pub(super) fn parse_evq(text: &str) -> Option<ToolSummary> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let status = |k: &str| v["status"][k].as_u64().unwrap_or(0);
    Some(ToolSummary {
        replies: v["replies"].as_u64()?,
        duration_s: v["duration_s"].as_f64()?,
        replies_per_s: v["reply_rate_avg"].as_f64()?,
        errors: v["errors"]["total"].as_u64()?,
        bad_status: status("4xx") + status("5xx"),
        self_cpu_s: Some(v["cpu_user_s"].as_f64()? + v["cpu_sys_s"].as_f64()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! captured {
        ($f:literal) => {
            include_str!(concat!("../../../testdata/load-client/", $f))
        };
    }

    #[test]
    fn httperf_full_run() {
        let s = parse_httperf(captured!("httperf-full.txt")).expect("parses");
        assert_eq!(s.replies, 200_000);
        assert!((s.duration_s - 68.710).abs() < 1e-9);
        assert!((s.replies_per_s - 200_000.0 / 68.710).abs() < 1e-6);
        assert_eq!(s.errors, 0);
        assert_eq!(s.bad_status, 0);
        assert!((s.self_cpu_s.unwrap() - (0.15 + 7.09)).abs() < 1e-9);
    }

    #[test]
    fn httperf_errors_and_no_replies() {
        let s = parse_httperf(captured!("httperf-reset.txt")).expect("parses");
        assert_eq!((s.replies, s.errors), (5237, 50));
        let s = parse_httperf(captured!("httperf-refused.txt")).expect("parses");
        assert_eq!((s.replies, s.errors), (0, 5));
        assert_eq!(s.replies_per_s, 0.0);
        assert_eq!(parse_httperf("httperf: warning: something\n"), None);
    }

    #[test]
    fn wrk_runs() {
        let s = parse_wrk(captured!("wrk-1-100.txt")).expect("parses");
        assert_eq!(s.replies, 22_894);
        assert!((s.duration_s - 2.05).abs() < 1e-9);
        assert!((s.replies_per_s - 11_183.30).abs() < 1e-9);
        assert_eq!((s.errors, s.bad_status, s.self_cpu_s), (0, 0, None));
        let s = parse_wrk(captured!("wrk-2-100-lat.txt")).expect("parses");
        assert_eq!(s.replies, 33_368);
        assert!((s.replies_per_s - 16_015.44).abs() < 1e-9);
        let s = parse_wrk(captured!("wrk-404.txt")).expect("parses");
        assert_eq!((s.replies, s.bad_status, s.errors), (15_723, 15_723, 0));
        let s = parse_wrk(captured!("wrk-reset.txt")).expect("parses");
        assert_eq!((s.replies, s.errors), (29_206, 50));
        assert!((s.duration_s - 3.08).abs() < 1e-9);
        assert_eq!(
            parse_wrk("unable to connect to 127.0.0.1:18099 Connection refused\n"),
            None
        );
    }

    #[test]
    fn wrk_time_units() {
        assert_eq!(wrk_seconds("2.05s,"), Some(2.05));
        assert_eq!(wrk_seconds("1.00m"), Some(60.0));
        assert_eq!(wrk_seconds("500.00ms"), Some(0.5));
        assert_eq!(wrk_seconds("12"), None);
    }

    #[test]
    fn evq_json() {
        let s = parse_evq(captured!("evq-closed.json")).expect("parses");
        assert_eq!((s.replies, s.errors, s.bad_status), (18_122, 0, 0));
        assert_eq!(s.replies_per_s, 18_122.0);
        assert_eq!(s.duration_s, 1.0);
        let s = parse_evq(captured!("evq-open-smoke.json")).expect("parses");
        assert_eq!(s.replies, 100);
        assert!(s.self_cpu_s.is_some());
        assert_eq!(parse_evq("Total: connections 1"), None);
    }
}
