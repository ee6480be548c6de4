//! The procedure every fault row follows, so that every row is measured alike:
//!
//! 1. start the program (`evq serve --root DIR`, or the scripted origin and
//!    `evq proxy` in front of it) as a child on an ephemeral loopback port;
//! 2. warm it up: the live clients run for a window and every path the fault
//!    will use is fetched once (so caches and allocator arenas are in their
//!    steady state), then every client disconnects and the baseline is read —
//!    descriptors and anonymous memory with nobody connected;
//! 3. the live clients run again; the fault goes on and off between windows
//!    (fault-free, fault, fault-free, …, fault-free), the peak of descriptors
//!    and memory read every 100 ms;
//! 4. the fault and the live clients stop: descriptors are waited for (up to a
//!    bound the fault states: timeouts the server is given), memory read, then
//!    CPU over an idle window, then a fresh request must be answered, then
//!    SIGTERM, and the exit status and the time to exit are kept.

use super::inject::Injector;
use super::row::{Check, ExitSummary, FaultRow, Resources, Throughput};
use super::{SuiteConfig, Target};
use crate::http::{self, ResponseReader};
use crate::live::{echo_body, Expect, LiveClients, LiveSpec, Window, ID_HEADER};
use crate::peer::{self, LIVE_SOURCE};
use crate::subject::{Limits, Subject};
use crate::usage::{self, Usage};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The share of the capacity measured at warm-up that the live clients offer
/// during the windows (`live.rs` says why they do not saturate the server).
pub(crate) const OFFERED_SHARE: f64 = 0.5;

/// Bytes of the live clients' file.
pub(crate) const SMALL_BYTES: usize = 1024;
/// Bytes of the big file the hostile clients fetch.
pub(crate) const BIG_BYTES: usize = 8 << 20;

/// A document root in a temporary directory: `small` (what live clients fetch)
/// and `big`, both filled with [`crate::origin::pattern`].
pub(crate) struct DocRoot {
    dir: tempfile::TempDir,
}

impl DocRoot {
    pub(crate) fn new() -> io::Result<DocRoot> {
        let dir = tempfile::Builder::new().prefix("evq-faults-").tempdir()?;
        let root = DocRoot { dir };
        root.write("small", SMALL_BYTES)?;
        root.write("big", BIG_BYTES)?;
        Ok(root)
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A file of `n` pattern bytes named `name`.
    pub(crate) fn write(&self, name: &str, n: usize) -> io::Result<PathBuf> {
        let p = self.dir.path().join(name);
        let body: Vec<u8> = (0..n).map(crate::origin::pattern).collect();
        std::fs::write(&p, body)?;
        Ok(p)
    }
}

/// A trial in progress.
pub(crate) struct Trial<'a> {
    pub(crate) cfg: &'a SuiteConfig,
    pub(crate) row: FaultRow,
    pub(crate) server: Option<Subject>,
    pub(crate) origin: Option<Subject>,
    pub(crate) docroot: Option<DocRoot>,
    pub(crate) live_spec: LiveSpec,
    /// Requests per second the live clients offer (set at warm-up).
    pub(crate) offered: Option<f64>,
    live: Option<LiveClients>,
    pub(crate) resources: Resources,
    pid: u32,
    /// The origin's port for `evq proxy` (its pooled origin connections are
    /// left out of the descriptor count), `None` for `evq serve`.
    pool_port: Option<u16>,
    addr: SocketAddr,
    started: Instant,
}

fn backend_args(cfg: &SuiteConfig) -> Vec<String> {
    cfg.backend
        .as_ref()
        .map(|b| vec!["--backend".to_string(), b.clone()])
        .unwrap_or_default()
}

impl<'a> Trial<'a> {
    fn new_row(target: &str, fault: &str, injected: String) -> FaultRow {
        FaultRow {
            target: target.into(),
            fault: fault.into(),
            injected,
            ..FaultRow::default()
        }
    }

    /// `evq serve --root DIR --listen 127.0.0.1:0 FLAGS` (with `--io completion` for
    /// [`Target::ServeCompletion`]); live clients fetch
    /// `/small`.
    pub(crate) fn serve(
        cfg: &'a SuiteConfig,
        target: Target,
        fault: &str,
        injected: String,
        flags: &[&str],
        limits: Limits,
    ) -> io::Result<Trial<'a>> {
        let started = Instant::now();
        let docroot = DocRoot::new()?;
        let mut args: Vec<String> = ["serve", "--listen", "127.0.0.1:0", "--root"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if target == Target::ServeCompletion {
            args.splice(1..1, ["--io".to_string(), "completion".to_string()]);
        }
        args.push(docroot.path().display().to_string());
        args.extend(backend_args(cfg));
        args.extend(flags.iter().map(|s| s.to_string()));
        let server = Subject::start("evq serve", &cfg.evq, &args, limits)?;
        let row = Self::new_row(
            "serve",
            fault,
            format!(
                "{injected}; evq {}",
                args.join(" ")
                    .replace(&docroot.path().display().to_string(), "DIR")
            ),
        );
        let small: Vec<u8> = (0..SMALL_BYTES).map(crate::origin::pattern).collect();
        Ok(Trial {
            cfg,
            row,
            pid: server.pid(),
            pool_port: None,
            addr: server.addr(),
            server: Some(server),
            origin: None,
            docroot: Some(docroot),
            live_spec: LiveSpec {
                target: SocketAddr::from(([127, 0, 0, 1], 0)),
                conns: cfg.live_conns(),
                path: "/small".into(),
                expect: Expect::Body(std::sync::Arc::new(small)),
                timeout: Duration::from_secs(10),
                pace: None,
            },
            live: None,
            offered: None,
            resources: Resources::default(),
            started,
        }
        .with_live_target())
    }

    /// The scripted origin (`evq faults --origin`) and `evq proxy --origin
    /// ADDR --listen 127.0.0.1:0 FLAGS` in front of it; live clients fetch
    /// `/live` through the proxy and check the origin's echo of their id.
    /// With [`Target::ProxyCompletion`], `evq proxy --io completion` (no
    /// `--backend`: the completion relay has none).
    pub(crate) fn proxy(
        cfg: &'a SuiteConfig,
        target: Target,
        fault: &str,
        injected: String,
        flags: &[&str],
    ) -> io::Result<Trial<'a>> {
        Trial::proxy_limited(cfg, target, fault, injected, flags, Limits::default())
    }

    /// [`Trial::proxy`] with the proxy started under `limits`.
    pub(crate) fn proxy_limited(
        cfg: &'a SuiteConfig,
        target: Target,
        fault: &str,
        injected: String,
        flags: &[&str],
        limits: Limits,
    ) -> io::Result<Trial<'a>> {
        let started = Instant::now();
        let origin = start_origin(cfg, SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let mut args: Vec<String> = vec![
            "proxy".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--origin".into(),
            origin.addr().to_string(),
        ];
        if target == Target::ProxyCompletion {
            args.splice(1..1, ["--io".to_string(), "completion".to_string()]);
        } else {
            args.extend(backend_args(cfg));
        }
        args.extend(flags.iter().map(|s| s.to_string()));
        let server = Subject::start("evq proxy", &cfg.evq, &args, limits)?;
        let row = Self::new_row(
            "proxy",
            fault,
            format!(
                "{injected}; evq {}",
                args.join(" ").replace(&origin.addr().to_string(), "ORIGIN")
            ) + "; descriptors counted apart from pooled origin connections (at most --pool-size, kept on purpose)",
        );
        Ok(Trial {
            cfg,
            row,
            pid: server.pid(),
            pool_port: Some(origin.addr().port()),
            addr: server.addr(),
            server: Some(server),
            origin: Some(origin),
            docroot: None,
            live_spec: LiveSpec {
                target: SocketAddr::from(([127, 0, 0, 1], 0)),
                conns: cfg.live_conns(),
                path: "/live".into(),
                expect: Expect::Echo,
                timeout: Duration::from_secs(10),
                pace: None,
            },
            live: None,
            offered: None,
            resources: Resources::default(),
            started,
        }
        .with_live_target())
    }

    fn with_live_target(mut self) -> Self {
        self.live_spec.target = self.addr;
        self
    }

    /// Seconds since the trial started.
    pub(crate) fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The program's address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The program's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// A document root file's path (serve trials).
    pub(crate) fn docroot(&self) -> &DocRoot {
        self.docroot
            .as_ref()
            .expect("a serve trial has a document root")
    }

    /// Step 2: warm up with the live clients (closed loop: the rate they get is
    /// the capacity, and from now on they are paced at `OFFERED_SHARE` of it)
    /// and one fetch of each of `paths`, disconnect everyone, and read the
    /// baseline.
    pub(crate) fn baseline(&mut self, paths: &[&str]) -> io::Result<Usage> {
        self.live_spec.pace = None;
        let started = Instant::now();
        let live = LiveClients::start(&self.live_spec);
        std::thread::sleep(self.cfg.window() / 2);
        let warm = live.stop();
        let capacity = warm.ok as f64 / started.elapsed().as_secs_f64();
        let offered = capacity * OFFERED_SHARE;
        if offered >= 1.0 {
            self.offered = Some(offered);
            self.live_spec.pace = Some(Duration::from_secs_f64(
                self.live_spec.conns as f64 / offered,
            ));
        }
        if warm.ok == 0 {
            return Err(io::Error::other(format!(
                "the live clients got no good reply while warming up ({}; {:?})",
                warm.describe(),
                self.server.as_ref().map(Subject::stderr)
            )));
        }
        for p in paths {
            fetch(self.addr, p, Duration::from_secs(20))?;
        }
        let baseline = settle(self.pid, self.pool_port)?;
        self.resources.baseline = baseline;
        self.resources.peak = baseline;
        Ok(baseline)
    }

    /// Starts the live clients.
    pub(crate) fn live_on(&mut self) {
        if self.live.is_none() {
            self.live = Some(LiveClients::start(&self.live_spec));
        }
    }

    /// Stops the live clients.
    pub(crate) fn live_off(&mut self) -> Option<crate::live::LiveCount> {
        self.live.take().map(LiveClients::stop)
    }

    /// The live clients' first failures (at most 8), as evidence.
    pub(crate) fn live_notes(&self) -> Vec<String> {
        self.live
            .as_ref()
            .map(LiveClients::notes)
            .unwrap_or_default()
    }

    /// Reads descriptors and memory and keeps the peak.
    pub(crate) fn sample(&mut self) {
        if let Ok(u) = usage::usage_apart_from(self.pid, self.pool_port) {
            let p = &mut self.resources.peak;
            p.fds = p.fds.max(u.fds);
            p.anon_rss_kib = p.anon_rss_kib.max(u.anon_rss_kib);
        }
    }

    /// One measurement window of the live clients, sampling the peak as it goes.
    pub(crate) fn window(&mut self) -> Window {
        let length = self.cfg.window();
        let live = self.live.as_ref().expect("live clients on during a window");
        let before = live.count();
        live.take_max_latency_ms();
        let started = Instant::now();
        while started.elapsed() < length {
            std::thread::sleep(Duration::from_millis(100).min(length));
            self.sample();
        }
        let live = self.live.as_ref().expect("live clients on during a window");
        let count = live.count().since(&before);
        let seconds = started.elapsed().as_secs_f64();
        Window {
            seconds,
            rate: count.ok as f64 / seconds,
            max_latency_ms: live.take_max_latency_ms(),
            count,
        }
    }

    /// Step 3: live clients on; fault-free and fault windows alternate
    /// (`rounds` fault windows, each between two fault-free ones); live
    /// clients stay on.
    pub(crate) fn alternate(
        &mut self,
        rounds: usize,
        fault: &mut dyn Injector,
    ) -> io::Result<Throughput> {
        self.live_on();
        let mut t = Throughput::default();
        t.fault_free.push(self.window());
        for _ in 0..rounds {
            fault.on()?;
            self.sample();
            t.under_fault.push(self.window());
            fault.off();
            t.fault_free.push(self.window());
        }
        Ok(t)
    }

    /// Adds a check.
    pub(crate) fn check(&mut self, c: Check) {
        self.row.checks.push(c);
    }

    /// Whether the program still runs.
    pub(crate) fn alive(&mut self) -> bool {
        self.server.as_mut().is_some_and(Subject::alive)
    }

    /// Step 4, and the row. `fd_wait` bounds the wait for descriptors (the
    /// timeouts the fault relies on, plus a margin); `stop_bound` the wait for
    /// the exit after SIGTERM.
    pub(crate) fn finish(mut self, fd_wait: Duration, stop_bound: Duration) -> FaultRow {
        self.live_off();
        if !self.alive() {
            return self.died();
        }
        let baseline = self.resources.baseline;
        let fds = usage::wait_fds_at_most(self.pid, self.pool_port, baseline.fds, fd_wait)
            .unwrap_or(usize::MAX);
        // The last closes free memory a moment later than their descriptors.
        std::thread::sleep(Duration::from_millis(200));
        let rss = usage::anon_rss_kib(self.pid).unwrap_or(u64::MAX);
        self.resources.after = Usage {
            fds,
            anon_rss_kib: rss,
        };
        self.row.resources = Some(self.resources);
        if let Some(t) = &mut self.row.throughput {
            t.offered_rate = self.offered;
        }
        self.row.idle_cpu = usage::cpu_share(self.pid, self.cfg.idle_window()).ok();
        match self.fresh_request() {
            Ok(()) => self.row.up = self.alive(),
            Err(e) => {
                self.row.up = false;
                self.row.up_detail = format!("a fresh request after the fault: {e}");
            }
        }
        if !self.alive() {
            return self.died();
        }
        let exit = self
            .server
            .take()
            .expect("a live trial holds its program")
            .terminate(stop_bound);
        self.row.exit = Some(ExitSummary::from(&exit));
        if let Some(o) = self.origin.take() {
            o.crash();
        }
        self.row.seconds = self.started.elapsed().as_secs_f64();
        self.row
    }

    /// The program died during the trial: the row says how.
    pub(crate) fn died(mut self) -> FaultRow {
        self.live_off();
        self.row.up = false;
        if let Some(s) = self.server.take() {
            let exit = s.wait_exit(Duration::from_secs(1));
            self.row.up_detail = format!(
                "the program died during the fault: {}; stderr: {}",
                exit.describe(),
                exit.stderr
            );
            self.row.exit = Some(ExitSummary::from(&exit));
        }
        if let Some(o) = self.origin.take() {
            o.crash();
        }
        self.row.seconds = self.started.elapsed().as_secs_f64();
        self.row
    }

    /// One new connection, one request for the live path, answered as the live
    /// clients expect.
    pub(crate) fn fresh_request(&self) -> io::Result<()> {
        let mut s = peer::connect(LIVE_SOURCE, self.addr, Duration::from_secs(10))?;
        let id = 1_000_000_007u64;
        s.write_all(&http::get(
            &self.live_spec.path,
            &[format!("{ID_HEADER}: {id}")],
            true,
        ))?;
        let r = ResponseReader::new()
            .read(&mut s, "GET")
            .map_err(|e| io::Error::other(e.to_string()))?;
        let good = match &self.live_spec.expect {
            Expect::Body(b) => r.body == **b,
            Expect::Echo => r.body == echo_body(id).as_bytes(),
        };
        if r.status == 200 && good {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "status {}, {} body bytes",
                r.status,
                r.body.len()
            )))
        }
    }
}

/// Starts the scripted origin as `evq faults --origin ADDR`.
pub(crate) fn start_origin(cfg: &SuiteConfig, at: SocketAddr) -> io::Result<Subject> {
    Subject::start(
        "scripted origin",
        &cfg.evq,
        &["faults".into(), "--origin".into(), at.to_string()],
        Limits::default(),
    )
}

/// One GET on a new connection; the response.
pub(crate) fn fetch(addr: SocketAddr, path: &str, timeout: Duration) -> io::Result<http::Response> {
    let mut s = peer::connect(LIVE_SOURCE, addr, timeout)?;
    s.write_all(&http::get(path, &[], true))?;
    ResponseReader::new()
        .read(&mut s, "GET")
        .map_err(|e| io::Error::other(format!("GET {path}: {e}")))
}

/// Waits until the descriptor count holds still for 300 ms (every client gone),
/// then reads descriptors and memory.
fn settle(pid: u32, pool_port: Option<u16>) -> io::Result<Usage> {
    let until = Instant::now() + Duration::from_secs(10);
    let mut last = usage::fd_count_apart_from(pid, pool_port)?;
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = usage::fd_count_apart_from(pid, pool_port)?;
        if now == last || Instant::now() > until {
            break;
        }
        last = now;
    }
    usage::usage_apart_from(pid, pool_port)
}
