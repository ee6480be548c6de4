//! One row of the fault table: what was injected into which program, and what
//! came of it — the five columns every fault is judged on (server up, live
//! clients' throughput, descriptors and memory back to their baseline, CPU idle
//! afterwards, exit status) plus the checks peculiar to that fault.

use crate::live::{LiveCount, Window};
use crate::usage::Usage;
use serde::{Deserialize, Serialize};

/// The live clients must keep this share of their fault-free throughput.
pub const THROUGHPUT_KEPT: f64 = 0.95;

/// Above this share of one CPU, a process with no clients is not idle (a
/// process that only waits reads under 1%; a busy loop, even on a crowded
/// machine, far above).
pub const IDLE_CPU_MAX: f64 = 0.05;

/// Anonymous memory may end this far above its baseline (KiB) and still count
/// as back: the allocator keeps freed pages in its arenas below this.
pub const RSS_SLACK_KIB: u64 = 2048;

/// One fault-specific check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What must hold.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// What was seen.
    pub detail: String,
    /// The item of issue 19 that asks for exactly this ("19.3"), where one does:
    /// a failure here is that item's, known until its fix lands.
    pub issue_item: Option<String>,
}

impl Check {
    /// A check.
    pub fn new(name: &str, passed: bool, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            passed,
            detail: detail.into(),
            issue_item: None,
        }
    }

    /// The same check, as what issue 19's item `item` asks for.
    pub fn item(mut self, item: &str) -> Check {
        self.issue_item = Some(format!("19.{item}"));
        self
    }
}

/// Descriptors and anonymous memory before, at the worst moment of, and after
/// the fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// With no client connected, after a warm-up that ran every path the trial
    /// uses.
    pub baseline: Usage,
    /// The most seen while the fault was on.
    pub peak: Usage,
    /// With no client connected again, after the fault and the live clients
    /// stopped (descriptors waited for up to the trial's bound).
    pub after: Usage,
}

impl Resources {
    /// Descriptors back to (or under) their baseline.
    pub fn fds_back(&self) -> bool {
        self.after.fds <= self.baseline.fds
    }

    /// Memory back within [`RSS_SLACK_KIB`] of its baseline.
    pub fn rss_back(&self) -> bool {
        self.after.anon_rss_kib <= self.baseline.anon_rss_kib + RSS_SLACK_KIB
    }
}

/// The live clients' throughput with and without the fault, in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Fault-free windows (the first one before any fault, the others between
    /// and after fault windows).
    pub fault_free: Vec<Window>,
    /// Windows with the fault on.
    pub under_fault: Vec<Window>,
    /// Requests per second the live clients offered (paced at half the
    /// capacity measured at warm-up); `None`: closed loop.
    #[serde(default)]
    pub offered_rate: Option<f64>,
}

impl Throughput {
    fn mean(w: &[Window]) -> Option<f64> {
        (!w.is_empty()).then(|| w.iter().map(|w| w.rate).sum::<f64>() / w.len() as f64)
    }

    /// Mean good replies per second without the fault.
    pub fn fault_free_rate(&self) -> Option<f64> {
        Self::mean(&self.fault_free)
    }

    /// Mean good replies per second under the fault.
    pub fn fault_rate(&self) -> Option<f64> {
        Self::mean(&self.under_fault)
    }

    /// Under-fault rate over fault-free rate.
    pub fn ratio(&self) -> Option<f64> {
        match (self.fault_rate(), self.fault_free_rate()) {
            (Some(f), Some(b)) if b > 0.0 => Some(f / b),
            _ => None,
        }
    }

    /// The fault-free windows' spread, (max − min) / mean: the noise the ratio
    /// is read against.
    pub fn noise(&self) -> Option<f64> {
        let m = self.fault_free_rate()?;
        let rates = self.fault_free.iter().map(|w| w.rate);
        let max = rates.clone().fold(f64::MIN, f64::max);
        let min = rates.fold(f64::MAX, f64::min);
        (m > 0.0).then(|| (max - min) / m)
    }

    /// What the live clients got while the fault was on, summed.
    pub fn under_fault_count(&self) -> LiveCount {
        self.under_fault
            .iter()
            .fold(LiveCount::default(), |a, w| a.plus(&w.count))
    }
}

/// How the program ended when the suite stopped it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitSummary {
    /// Exit status, if it exited.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// It outlived its bound and was killed.
    pub killed: bool,
    /// Seconds from SIGTERM to its end.
    pub seconds: f64,
    /// In words.
    pub describe: String,
}

impl ExitSummary {
    /// Exited by itself with status 0.
    pub fn clean(&self) -> bool {
        self.code == Some(0) && !self.killed
    }
}

impl From<&crate::subject::Exit> for ExitSummary {
    fn from(e: &crate::subject::Exit) -> Self {
        ExitSummary {
            code: e.code,
            signal: e.signal,
            killed: e.killed,
            seconds: e.seconds,
            describe: e.describe(),
        }
    }
}

/// A row of the fault table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultRow {
    /// `serve`, `proxy` or `load`: the program the fault was aimed at.
    pub target: String,
    /// The fault's name (`reset-mid-request`, …).
    pub fault: String,
    /// What was injected, with its sizes, and the program's flags.
    pub injected: String,
    /// The program ran throughout and answered a fresh request afterwards.
    pub up: bool,
    /// Why `up` is false, when it is.
    pub up_detail: String,
    /// The live clients' throughput, where the fault leaves them something to
    /// be measured on (`None` where the fault stops every client by design:
    /// origin down, SIGTERM).
    pub throughput: Option<Throughput>,
    /// Descriptors and memory of the program.
    pub resources: Option<Resources>,
    /// Share of one CPU the program used over an idle window after the clients
    /// stopped.
    pub idle_cpu: Option<f64>,
    /// How it ended when stopped with SIGTERM.
    pub exit: Option<ExitSummary>,
    /// The checks peculiar to this fault.
    pub checks: Vec<Check>,
    /// The trial could not run as a whole (why).
    pub error: Option<String>,
    /// Seconds the row took.
    pub seconds: f64,
}

/// The verdict on one column of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mark {
    /// It held.
    Pass,
    /// It did not.
    Fail,
    /// Not measured for this fault.
    NotMeasured,
}

impl Mark {
    fn of(x: Option<bool>) -> Mark {
        match x {
            Some(true) => Mark::Pass,
            Some(false) => Mark::Fail,
            None => Mark::NotMeasured,
        }
    }

    /// "ok", "FAIL", "-".
    pub fn word(self) -> &'static str {
        match self {
            Mark::Pass => "ok",
            Mark::Fail => "FAIL",
            Mark::NotMeasured => "-",
        }
    }
}

impl FaultRow {
    /// Live clients kept [`THROUGHPUT_KEPT`] of their fault-free throughput.
    pub fn throughput_mark(&self) -> Mark {
        Mark::of(
            self.throughput
                .as_ref()
                .and_then(Throughput::ratio)
                .map(|r| r >= THROUGHPUT_KEPT),
        )
    }

    /// Descriptors back to baseline.
    pub fn fds_mark(&self) -> Mark {
        Mark::of(self.resources.as_ref().map(Resources::fds_back))
    }

    /// Memory back to baseline.
    pub fn rss_mark(&self) -> Mark {
        Mark::of(self.resources.as_ref().map(Resources::rss_back))
    }

    /// Idle when the clients stopped.
    pub fn idle_mark(&self) -> Mark {
        Mark::of(self.idle_cpu.map(|c| c <= IDLE_CPU_MAX))
    }

    /// Exit 0 on SIGTERM.
    pub fn exit_mark(&self) -> Mark {
        Mark::of(self.exit.as_ref().map(ExitSummary::clean))
    }

    /// Every fault-specific check held.
    pub fn checks_mark(&self) -> Mark {
        Mark::of((!self.checks.is_empty()).then(|| self.checks.iter().all(|c| c.passed)))
    }

    /// The checks that failed.
    pub fn failed_checks(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.passed).collect()
    }

    /// The row passes: it ran, the program stayed up, and no column failed.
    pub fn passed(&self) -> bool {
        self.error.is_none()
            && self.up
            && [
                self.throughput_mark(),
                self.fds_mark(),
                self.rss_mark(),
                self.idle_mark(),
                self.exit_mark(),
                self.checks_mark(),
            ]
            .iter()
            .all(|m| *m != Mark::Fail)
    }

    /// Everything that failed, in words (empty if nothing did).
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &self.error {
            out.push(format!("did not run: {e}"));
        }
        if !self.up && self.error.is_none() {
            out.push(format!("not up: {}", self.up_detail));
        }
        if self.throughput_mark() == Mark::Fail {
            let t = self
                .throughput
                .as_ref()
                .expect("a failed mark has a measurement");
            out.push(format!(
                "live clients kept {:.0}% of their fault-free throughput ({:.0} → {:.0} replies/s)",
                t.ratio().unwrap_or(0.0) * 100.0,
                t.fault_free_rate().unwrap_or(0.0),
                t.fault_rate().unwrap_or(0.0)
            ));
        }
        if let Some(r) = &self.resources {
            if !r.fds_back() {
                out.push(format!(
                    "descriptors {} after, baseline {}",
                    r.after.fds, r.baseline.fds
                ));
            }
            if !r.rss_back() {
                out.push(format!(
                    "anonymous memory {} KiB after, baseline {} KiB",
                    r.after.anon_rss_kib, r.baseline.anon_rss_kib
                ));
            }
        }
        if self.idle_mark() == Mark::Fail {
            out.push(format!(
                "{:.0}% of a CPU with no clients",
                self.idle_cpu.unwrap_or(0.0) * 100.0
            ));
        }
        if self.exit_mark() == Mark::Fail {
            out.push(format!(
                "on SIGTERM: {}",
                self.exit.as_ref().map_or("", |e| e.describe.as_str())
            ));
        }
        for c in self.failed_checks() {
            out.push(format!(
                "{}{}: {}",
                c.name,
                c.issue_item
                    .as_ref()
                    .map_or(String::new(), |i| format!(" [issue {i}]")),
                c.detail
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(rate: f64) -> Window {
        Window {
            seconds: 1.0,
            rate,
            max_latency_ms: 1.0,
            count: LiveCount::default(),
        }
    }

    #[test]
    fn the_ratio_is_fault_over_fault_free_and_judged_at_95_percent() {
        let t = Throughput {
            fault_free: vec![window(100.0), window(110.0), window(90.0)],
            under_fault: vec![window(96.0), window(94.0)],
            offered_rate: None,
        };
        assert_eq!(t.ratio(), Some(0.95));
        assert!((t.noise().unwrap() - 0.2).abs() < 1e-9);
        let mut row = FaultRow {
            up: true,
            throughput: Some(t),
            ..FaultRow::default()
        };
        assert_eq!(row.throughput_mark(), Mark::Pass);
        assert!(row.passed());
        row.throughput.as_mut().unwrap().under_fault[0].rate = 90.0;
        assert_eq!(row.throughput_mark(), Mark::Fail);
        assert!(!row.passed());
        assert!(row.failures()[0].contains("92%"), "{:?}", row.failures());
    }

    #[test]
    fn resources_back_means_fds_at_most_and_memory_within_slack() {
        let u = |fds, kib| Usage {
            fds,
            anon_rss_kib: kib,
        };
        let mut r = Resources {
            baseline: u(10, 1000),
            peak: u(500, 9000),
            after: u(10, 1000 + RSS_SLACK_KIB),
        };
        assert!(r.fds_back() && r.rss_back());
        r.after = u(11, 1000 + RSS_SLACK_KIB + 1);
        assert!(!r.fds_back() && !r.rss_back());
    }

    #[test]
    fn a_failed_check_names_its_issue_item() {
        let row = FaultRow {
            up: true,
            checks: vec![
                Check::new("listener closed at once", false, "3 of 3 connected").item("2"),
            ],
            ..FaultRow::default()
        };
        assert!(!row.passed());
        assert_eq!(
            row.failures(),
            vec!["listener closed at once [issue 19.2]: 3 of 3 connected".to_string()]
        );
    }
}
