//! The fault suite: every fault issue 19 lists, each injected into `evq serve`,
//! `evq proxy` or `evq load` (run as children, the way a user runs them) while
//! live clients are measured, each ending in one row of the fault table.
//!
//! Two sizes: [`Size::Short`] (a few seconds a row, what `cargo test` runs)
//! and [`Size::Long`] (the sizes: 10,000 tricklers, longer windows,
//! three fault rounds; what `evq faults` runs by default).

mod clients;
mod exhaustion;
mod files;
mod inject;
mod load;
pub use load::LOAD_RSS_BOUND_KIB;
mod origin_faults;
pub mod row;
mod sigterm;
pub(crate) mod trial;

use row::FaultRow;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// The program a fault is aimed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `evq serve --root DIR`.
    Serve,
    /// `evq serve --io completion --root DIR`: the server on io_uring
    /// completions, under the same faults.
    ServeCompletion,
    /// `evq proxy` in front of the scripted origin.
    Proxy,
    /// `evq proxy --io completion`: the proxy on io_uring completions, under
    /// the same faults.
    ProxyCompletion,
    /// `evq load` against the scripted origin.
    Load,
}

impl Target {
    /// `serve`, `serve-completion`, `proxy`, `proxy-completion`, `load`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Serve => "serve",
            Target::ServeCompletion => "serve-completion",
            Target::Proxy => "proxy",
            Target::ProxyCompletion => "proxy-completion",
            Target::Load => "load",
        }
    }
}

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Seconds a row: the test suite's form.
    Short,
    /// The sizes.
    Long,
}

impl Size {
    /// `short` or `long`, by size.
    pub fn pick<T>(self, short: T, long: T) -> T {
        match self {
            Size::Short => short,
            Size::Long => long,
        }
    }
}

/// What every row is run with.
#[derive(Clone, Debug)]
pub struct SuiteConfig {
    /// The `evq` binary (it runs `serve`, `proxy`, `load` and `faults --origin`).
    pub evq: PathBuf,
    /// `--backend` for serve and proxy (their default when `None`).
    pub backend: Option<String>,
    /// Short or long.
    pub size: Size,
}

impl SuiteConfig {
    /// Live client connections (one thread each).
    pub fn live_conns(&self) -> usize {
        4
    }

    /// One measurement window.
    pub fn window(&self) -> Duration {
        self.size
            .pick(Duration::from_millis(1500), Duration::from_secs(4))
    }

    /// Fault windows per row (each between two fault-free ones).
    pub fn rounds(&self) -> usize {
        self.size.pick(1, 3)
    }

    /// The window over which idle CPU is read.
    pub fn idle_window(&self) -> Duration {
        self.size
            .pick(Duration::from_secs(1), Duration::from_secs(2))
    }

    /// How long a program has to exit after SIGTERM before it is killed.
    pub fn stop_bound(&self) -> Duration {
        Duration::from_secs(10)
    }
}

/// One fault of the table: its name, its target, and how it is run.
#[derive(Clone, Copy)]
pub struct Fault {
    /// Its name in the table (`reset-mid-request`, …).
    pub name: &'static str,
    /// What it is aimed at.
    pub target: Target,
    run: fn(&SuiteConfig, Target) -> FaultRow,
}

impl Fault {
    /// `serve/reset-mid-request`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.target.name(), self.name)
    }

    /// Runs it: one row.
    pub fn run(&self, cfg: &SuiteConfig) -> FaultRow {
        let mut row = (self.run)(cfg, self.target);
        // A row that could not start carries the names it was given.
        row.target = self.target.name().into();
        row.fault = self.name.into();
        row
    }
}

fn truncated(c: &SuiteConfig, t: Target) -> FaultRow {
    files::file_changed(c, t, files::Change::Truncate)
}
fn replaced(c: &SuiteConfig, t: Target) -> FaultRow {
    files::file_changed(c, t, files::Change::Replace)
}
fn removed(c: &SuiteConfig, t: Target) -> FaultRow {
    files::file_changed(c, t, files::Change::Remove)
}
fn exhaustion(c: &SuiteConfig, t: Target) -> FaultRow {
    exhaustion::descriptor_exhaustion(c, t)
}

/// The faults a client can inflict, aimed at `target` (a server or the proxy).
fn client_faults(target: Target) -> [Fault; 8] {
    type Run = fn(&SuiteConfig, Target) -> FaultRow;
    let runs: [(&'static str, Run); 8] = [
        ("reset-mid-request", clients::reset_mid_request),
        ("reset-mid-response", clients::reset_mid_response),
        ("vanish", clients::vanish),
        ("request-then-close", clients::request_then_close),
        ("trickle", clients::trickle_fault),
        ("pipeline-100", clients::pipeline),
        ("huge-headers", clients::huge_headers),
        ("sigterm", sigterm::sigterm),
    ];
    runs.map(|(name, run)| Fault { name, target, run })
}

/// Every fault, in table order.
pub fn faults() -> Vec<Fault> {
    let f = |name, target, run| Fault { name, target, run };
    let mut all = Vec::new();
    all.extend(client_faults(Target::Serve));
    all.extend(client_faults(Target::Proxy));
    all.push(f("descriptor-exhaustion", Target::Serve, exhaustion));
    all.push(f("descriptor-exhaustion", Target::Proxy, exhaustion));
    all.push(f("file-truncated", Target::Serve, truncated));
    all.push(f("file-replaced", Target::Serve, replaced));
    all.push(f("file-removed", Target::Serve, removed));
    all.push(f(
        "origin-crash-restart",
        Target::Proxy,
        origin_faults::crash_restart,
    ));
    all.push(f("origin-stall", Target::Proxy, origin_faults::stall));
    all.push(f("origin-garbage", Target::Proxy, origin_faults::garbage));
    all.push(f(
        "origin-answers-early",
        Target::Proxy,
        origin_faults::answers_early,
    ));
    all.push(f(load::FAULTS[0], Target::Load, load::crash));
    all.push(f(load::FAULTS[1], Target::Load, load::stall));
    all.push(f(load::FAULTS[2], Target::Load, load::garbage));
    all.push(f(load::FAULTS[3], Target::Load, load::garbage_head));
    all.push(f(load::FAULTS[4], Target::Load, load::reset));
    // The server on completions, under every server fault.
    let t = Target::ServeCompletion;
    all.extend(client_faults(t));
    all.push(f("descriptor-exhaustion", t, exhaustion));
    all.push(f("file-truncated", t, truncated));
    all.push(f("file-replaced", t, replaced));
    all.push(f("file-removed", t, removed));
    // The proxy on completions, under every proxy fault.
    let t = Target::ProxyCompletion;
    all.extend(client_faults(t));
    all.push(f("descriptor-exhaustion", t, exhaustion));
    all.push(f("origin-crash-restart", t, origin_faults::crash_restart));
    all.push(f("origin-stall", t, origin_faults::stall));
    all.push(f("origin-garbage", t, origin_faults::garbage));
    all.push(f("origin-answers-early", t, origin_faults::answers_early));
    all
}

/// The faults whose id (`serve/trickle`) or name contains one of `only`
/// (every fault when `only` is empty).
pub fn select(only: &[String]) -> Vec<Fault> {
    faults()
        .into_iter()
        .filter(|f| only.is_empty() || only.iter().any(|o| f.id().contains(o.as_str())))
        .collect()
}

/// A row for a trial that could not start.
pub(crate) fn not_run(target: Target, fault: &str, e: io::Error) -> FaultRow {
    FaultRow {
        target: target.name().into(),
        fault: fault.into(),
        error: Some(e.to_string()),
        ..FaultRow::default()
    }
}

/// The fault table as aligned text: one line a row, then what failed.
pub fn table(rows: &[FaultRow]) -> String {
    let mut out = format!(
        "{:<16} {:<22} {:>4} {:>16} {:>5} {:>5} {:>6} {:>5} {:>6} {:>7}\n",
        "target", "fault", "up", "live kept", "fds", "rss", "idle", "exit", "checks", "verdict"
    );
    for r in rows {
        let kept = match r.throughput.as_ref().and_then(row::Throughput::ratio) {
            Some(k) => format!(
                "{:.0}% (±{:.0}%)",
                k * 100.0,
                r.throughput
                    .as_ref()
                    .and_then(row::Throughput::noise)
                    .unwrap_or(0.0)
                    * 100.0
            ),
            None => "-".into(),
        };
        out += &format!(
            "{:<16} {:<22} {:>4} {:>16} {:>5} {:>5} {:>6} {:>5} {:>6} {:>7}\n",
            r.target,
            r.fault,
            if r.error.is_some() {
                "?"
            } else if r.up {
                "yes"
            } else {
                "NO"
            },
            kept,
            r.fds_mark().word(),
            r.rss_mark().word(),
            match r.idle_cpu {
                Some(c) => format!("{:.1}%", c * 100.0),
                None => "-".into(),
            },
            r.exit_mark().word(),
            r.checks_mark().word(),
            if r.passed() { "pass" } else { "FAIL" },
        );
    }
    for r in rows.iter().filter(|r| !r.passed()) {
        out += &format!("\n{}/{}:\n", r.target, r.fault);
        for f in r.failures() {
            out += &format!("  - {f}\n");
        }
    }
    out
}
