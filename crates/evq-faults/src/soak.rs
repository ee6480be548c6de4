//! The soak: a long mixed run against `evq serve` and `evq proxy` at once —
//! keep-alive clients, a new connection per request, slow clients that send a
//! valid request a byte at a time, clients that reset mid-request, malformed
//! requests, and `evq load` at a steady rate beside them — with each program's
//! descriptors and anonymous memory read at a steady interval.
//!
//! What it reports: the slope of memory (KiB per minute) and of descriptors
//! (per minute) over the run after its first tenth (warm-up), every
//! valid request's fate (answered 2xx, answered 5xx, no answer), and `evq
//! load`'s peak memory and slope. A program that leaks a few bytes per
//! connection, or a descriptor per reset, shows as a slope that the run's
//! length turns into a clear figure.

use crate::http::{self, ResponseReader};
use crate::live::{Expect, LiveClients, LiveCount, LiveSpec};
use crate::peer::{self, HOSTILE_SOURCE, LIVE_SOURCE};
use crate::subject::{Limits, Subject};
use crate::suite::trial::{start_origin, DocRoot, SMALL_BYTES};
use crate::suite::SuiteConfig;
use crate::usage;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Memory may grow at most this much per minute after the warm-up and the run
/// still count as flat (KiB/min): 100 KiB/min is 1 MiB over the 10-minute run,
/// within what the allocator keeps in its arenas.
pub const RSS_SLOPE_MAX_KIB_PER_MIN: f64 = 100.0;

/// Descriptors may grow at most this much per minute and count as flat (the
/// samples catch live connections in passing, so single readings vary by a
/// few).
pub const FD_SLOPE_MAX_PER_MIN: f64 = 1.0;

/// How the soaked programs do their I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SoakIo {
    /// Readiness events from an evq backend (`--backend` picks it).
    #[default]
    Readiness,
    /// io_uring completions: `evq serve`, `evq proxy` and `evq load`, each
    /// with `--io completion`.
    Completion,
}

/// What a soak is run with.
#[derive(Clone, Debug)]
pub struct SoakConfig {
    /// `evq`, `--backend` (readiness only).
    pub suite: SuiteConfig,
    /// Readiness or completions, for all three programs.
    pub io: SoakIo,
    /// How long the mixed load runs.
    pub duration: Duration,
    /// How often descriptors and memory are read.
    pub sample_every: Duration,
}

/// One reading of a program.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds into the run.
    pub t: f64,
    /// Open descriptors.
    pub fds: usize,
    /// Anonymous resident memory, KiB.
    pub anon_rss_kib: u64,
}

/// The fate of the valid requests of one kind of client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Valid {
    /// Requests sent.
    pub sent: u64,
    /// Answered 2xx with the right body.
    pub ok: u64,
    /// Answered 5xx.
    pub status_5xx: u64,
    /// Answered with another status, or a wrong body.
    pub wrong: u64,
    /// Not answered (reset, closed, timed out).
    pub unanswered: u64,
}

impl Valid {
    fn plus(self, o: Valid) -> Valid {
        Valid {
            sent: self.sent + o.sent,
            ok: self.ok + o.ok,
            status_5xx: self.status_5xx + o.status_5xx,
            wrong: self.wrong + o.wrong,
            unanswered: self.unanswered + o.unanswered,
        }
    }

    fn from_live(c: &LiveCount) -> Valid {
        Valid {
            sent: c.ended(),
            ok: c.ok,
            status_5xx: c.status_5xx,
            wrong: c.wrong_body + c.status_other,
            unanswered: c.failed,
        }
    }
}

/// One program's soak figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramSoak {
    /// `serve`, `proxy` or `load`.
    pub program: String,
    /// Its readings.
    pub samples: Vec<Sample>,
    /// Memory slope after the warm-up, KiB per minute.
    pub rss_slope_kib_per_min: f64,
    /// Descriptor slope after the warm-up, per minute.
    pub fd_slope_per_min: f64,
    /// Highest anonymous memory read, KiB.
    pub peak_rss_kib: u64,
    /// Valid requests by kind of client (`keep-alive`, `new-connection`,
    /// `slow`), empty for `load`.
    pub valid: Vec<(String, Valid)>,
    /// Hostile requests by outcome (`reset sent`, `400`, …).
    pub hostile: Vec<(String, u64)>,
    /// Still running at the end of the soak.
    pub up: bool,
    /// How it ended when stopped (exit status), or why it did not run.
    pub exit: String,
}

impl ProgramSoak {
    /// Every valid request, summed.
    pub fn valid_total(&self) -> Valid {
        self.valid
            .iter()
            .fold(Valid::default(), |a, (_, v)| a.plus(*v))
    }

    /// Memory flat, descriptors flat, up, every valid request answered without
    /// a 5xx.
    pub fn passed(&self) -> bool {
        let v = self.valid_total();
        self.up
            && self.rss_slope_kib_per_min <= RSS_SLOPE_MAX_KIB_PER_MIN
            && self.fd_slope_per_min <= FD_SLOPE_MAX_PER_MIN
            && v.status_5xx == 0
            && v.unanswered == 0
            && v.wrong == 0
    }
}

/// `evq load`'s part of the soak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadSoak {
    /// Connections it made, replies (2xx), 5xx replies, errors.
    pub connections: u64,
    /// 2xx replies.
    pub replies_2xx: u64,
    /// 5xx replies.
    pub replies_5xx: u64,
    /// Errors by kind (those counted).
    pub errors: Vec<(String, u64)>,
    /// Peak anonymous memory, KiB, against [`crate::suite::LOAD_RSS_BOUND_KIB`].
    pub peak_rss_kib: u64,
    /// Memory slope after the warm-up, KiB per minute.
    pub rss_slope_kib_per_min: f64,
    /// How it ended.
    pub exit: String,
    /// Exit 0.
    pub clean: bool,
}

/// The whole soak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    /// Seconds the mixed load ran.
    pub seconds: f64,
    /// What ran, in words.
    pub mix: String,
    /// `evq serve` and `evq proxy`.
    pub programs: Vec<ProgramSoak>,
    /// `evq load`.
    pub load: Option<LoadSoak>,
    /// Why it could not run, when it could not.
    pub error: Option<String>,
}

impl SoakReport {
    /// Every program passed, and `evq load` exited 0 within its memory bound.
    pub fn passed(&self) -> bool {
        self.error.is_none()
            && !self.programs.is_empty()
            && self.programs.iter().all(ProgramSoak::passed)
            && self.load.as_ref().is_some_and(|l| {
                l.clean && l.peak_rss_kib <= crate::suite::LOAD_RSS_BOUND_KIB && l.replies_5xx == 0
            })
    }

    /// A few lines a person reads.
    pub fn describe(&self) -> String {
        let mut out = format!("evq soak: {:.0} s; {}\n", self.seconds, self.mix);
        if let Some(e) = &self.error {
            out += &format!("did not run: {e}\n");
        }
        for p in &self.programs {
            let v = p.valid_total();
            out += &format!(
                "{:<6} rss slope {:+.1} KiB/min (peak {} KiB), fd slope {:+.2}/min; valid requests {} sent, {} ok, {} 5xx, {} wrong, {} unanswered; hostile {}; {} — {}\n",
                p.program,
                p.rss_slope_kib_per_min,
                p.peak_rss_kib,
                p.fd_slope_per_min,
                v.sent,
                v.ok,
                v.status_5xx,
                v.wrong,
                v.unanswered,
                p.hostile.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", "),
                p.exit,
                if p.passed() { "pass" } else { "FAIL" }
            );
            for (k, v) in &p.valid {
                out += &format!(
                    "       {k}: {} sent, {} ok, {} 5xx, {} wrong, {} unanswered\n",
                    v.sent, v.ok, v.status_5xx, v.wrong, v.unanswered
                );
            }
        }
        if let Some(l) = &self.load {
            out += &format!(
                "load   {} connections, {} 2xx, {} 5xx, errors [{}]; peak {} KiB (bound {} KiB), rss slope {:+.1} KiB/min; {}\n",
                l.connections,
                l.replies_2xx,
                l.replies_5xx,
                l.errors.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", "),
                l.peak_rss_kib,
                crate::suite::LOAD_RSS_BOUND_KIB,
                l.rss_slope_kib_per_min,
                l.exit
            );
        }
        out += if self.passed() {
            "soak: pass\n"
        } else {
            "soak: FAIL\n"
        };
        out
    }
}

/// Slope of `y` over `t`, per minute, over the samples after the first tenth
/// of the run: the Theil–Sen estimate, the median of the slopes between every
/// pair of samples.
///
/// Robust, not least squares: a sample is a glimpse of a moving count, and
/// clients that come and go in step make it dip. In a 60-second soak the
/// proxy's descriptors stood at 22 throughout but read 14 every fourth second
/// for the first 20 s (eight slow clients reconnecting together, then drifting
/// apart); least squares turned those dips into +2.71 descriptors a minute,
/// the same figure in two runs, and called a flat line a leak. The median
/// pairwise slope is 0 there, and a real leak — a steady climb — still reads
/// at its rate.
pub fn slope_per_min(samples: &[(f64, f64)]) -> f64 {
    let end = samples.last().map_or(0.0, |s| s.0);
    let pts: Vec<(f64, f64)> = samples
        .iter()
        .copied()
        .filter(|(t, _)| *t >= end / 10.0)
        .collect();
    let mut slopes: Vec<f64> = Vec::with_capacity(pts.len() * pts.len() / 2);
    for (k, &(t0, y0)) in pts.iter().enumerate() {
        for &(t1, y1) in &pts[k + 1..] {
            if t1 > t0 {
                slopes.push((y1 - y0) / (t1 - t0));
            }
        }
    }
    if slopes.is_empty() {
        return 0.0;
    }
    slopes.sort_by(f64::total_cmp);
    let mid = slopes.len() / 2;
    let median = if slopes.len() % 2 == 1 {
        slopes[mid]
    } else {
        (slopes[mid - 1] + slopes[mid]) / 2.0
    };
    median * 60.0
}

/// Counters of one client kind.
#[derive(Default)]
struct Tallies {
    sent: AtomicU64,
    ok: AtomicU64,
    s5xx: AtomicU64,
    wrong: AtomicU64,
    unanswered: AtomicU64,
}

impl Tallies {
    fn valid(&self) -> Valid {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Valid {
            sent: g(&self.sent),
            ok: g(&self.ok),
            status_5xx: g(&self.s5xx),
            wrong: g(&self.wrong),
            unanswered: g(&self.unanswered),
        }
    }

    fn judge(
        &self,
        got: Result<http::Response, crate::http::ReadError>,
        good: &dyn Fn(&[u8]) -> bool,
    ) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let slot = match got {
            Ok(r) if (200..300).contains(&r.status) && good(&r.body) => &self.ok,
            Ok(r) if (500..600).contains(&r.status) => &self.s5xx,
            Ok(_) => &self.wrong,
            Err(_) => &self.unanswered,
        };
        slot.fetch_add(1, Ordering::Relaxed);
    }
}

/// A program under soak and the clients aimed at it.
struct Front {
    name: &'static str,
    addr: SocketAddr,
    path: String,
    expect: Expect,
    fresh: Arc<Tallies>,
    slow: Arc<Tallies>,
    resets: Arc<AtomicU64>,
    bad: Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>,
}

fn body_ok(expect: &Expect, id: u64, body: &[u8]) -> bool {
    match expect {
        Expect::Body(b) => body == b.as_slice(),
        Expect::Echo => body == crate::live::echo_body(id).as_bytes(),
    }
}

fn paced(
    stop: Arc<AtomicBool>,
    every: Duration,
    mut act: impl FnMut() + Send + 'static,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut next = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            act();
            next += every;
            match next.checked_duration_since(Instant::now()) {
                Some(d) => std::thread::sleep(d),
                None => next = Instant::now(),
            }
        }
    })
}

impl Front {
    fn spawn(&self, stop: &Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
        let mut threads = Vec::new();
        // New connection per request, 20/s.
        {
            let (addr, path, expect, t) = (
                self.addr,
                self.path.clone(),
                self.expect.clone(),
                self.fresh.clone(),
            );
            let mut id = 2_000_000_000u64;
            threads.push(paced(stop.clone(), Duration::from_millis(50), move || {
                id += 1;
                let got = peer::connect(LIVE_SOURCE, addr, Duration::from_secs(10))
                    .map_err(crate::http::ReadError::Io)
                    .and_then(|mut s| {
                        s.write_all(&http::get(
                            &path,
                            &[format!("{}: {id}", crate::live::ID_HEADER)],
                            true,
                        ))?;
                        ResponseReader::new().read(&mut s, "GET")
                    });
                t.judge(got, &|b| body_ok(&expect, id, b));
            }));
        }
        // Slow clients: 8 at a time, each sending a valid request a byte every
        // 50 ms (about 3 s a head), then reading the reply.
        for k in 0..8u64 {
            let (addr, path, expect, t) = (
                self.addr,
                self.path.clone(),
                self.expect.clone(),
                self.slow.clone(),
            );
            let stop2 = stop.clone();
            let mut id = 3_000_000_000u64 + k * 100_000_000;
            threads.push(std::thread::spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    id += 1;
                    let req =
                        http::get(&path, &[format!("{}: {id}", crate::live::ID_HEADER)], true);
                    let got = peer::connect(HOSTILE_SOURCE, addr, Duration::from_secs(10))
                        .map_err(crate::http::ReadError::Io)
                        .and_then(|mut s| {
                            for b in &req {
                                s.write_all(std::slice::from_ref(b))?;
                                std::thread::sleep(Duration::from_millis(50));
                            }
                            ResponseReader::new().read(&mut s, "GET")
                        });
                    t.judge(got, &|b| body_ok(&expect, id, b));
                }
            }));
        }
        // Resets mid-request, 20/s.
        {
            let (addr, n) = (self.addr, self.resets.clone());
            threads.push(paced(stop.clone(), Duration::from_millis(50), move || {
                if let Ok(mut s) = peer::connect(HOSTILE_SOURCE, addr, Duration::from_secs(10)) {
                    let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ");
                    peer::reset(s);
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        // Malformed requests, 20/s, in turn.
        {
            let (addr, tally) = (self.addr, self.bad.clone());
            let bad: [&[u8]; 4] = [
                b"GARBAGE\r\n\r\n",
                b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
                b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
            ];
            let mut turn = 0usize;
            threads.push(paced(stop.clone(), Duration::from_millis(50), move || {
                turn += 1;
                let outcome = match peer::connect(HOSTILE_SOURCE, addr, Duration::from_secs(10)) {
                    Ok(mut s) => {
                        let sent = s.write_all(bad[turn % bad.len()]);
                        let mut r = Vec::new();
                        let read = s.read_to_end(&mut r);
                        match (r.get(9..12), sent.and(read)) {
                            (Some(code), _) => {
                                format!("bad request answered {}", String::from_utf8_lossy(code))
                            }
                            (None, Ok(_)) => "bad request closed unanswered".into(),
                            (None, Err(e)) => format!("bad request unanswered: {:?}", e.kind()),
                        }
                    }
                    Err(_) => "bad request: connect failed".into(),
                };
                *tally
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(outcome)
                    .or_default() += 1;
            }));
        }
        threads
    }
}

/// Runs the soak.
pub fn run(cfg: &SoakConfig) -> SoakReport {
    match run_inner(cfg) {
        Ok(r) => r,
        Err(e) => SoakReport {
            seconds: 0.0,
            mix: String::new(),
            programs: Vec::new(),
            load: None,
            error: Some(e.to_string()),
        },
    }
}

impl SoakConfig {
    /// Refuses settings that do not go together: a readiness backend with
    /// the completion loops.
    ///
    /// # Errors
    /// `InvalidInput`, saying which.
    pub fn check(&self) -> io::Result<()> {
        if self.io == SoakIo::Completion && self.suite.backend.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "--backend picks a readiness backend; --io completion takes none",
            ));
        }
        Ok(())
    }
}

fn run_inner(cfg: &SoakConfig) -> io::Result<SoakReport> {
    cfg.check()?;
    let completion = cfg.io == SoakIo::Completion;
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let docroot = DocRoot::new()?;
    let mut backend: Vec<String> = cfg
        .suite
        .backend
        .as_ref()
        .map(|b| vec!["--backend".into(), b.clone()])
        .unwrap_or_default();
    if completion {
        backend = vec!["--io".into(), "completion".into()];
    }
    let mut serve_args: Vec<String> = ["serve", "--listen", "127.0.0.1:0", "--root"]
        .map(String::from)
        .to_vec();
    serve_args.push(docroot.path().display().to_string());
    serve_args.extend(backend.clone());
    let mut serve = Subject::start("evq serve", &cfg.suite.evq, &serve_args, Limits::default())?;
    let origin = start_origin(&cfg.suite, SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let mut proxy_args: Vec<String> = ["proxy", "--listen", "127.0.0.1:0", "--origin"]
        .map(String::from)
        .to_vec();
    proxy_args.push(origin.addr().to_string());
    proxy_args.extend(backend);
    let mut proxy = Subject::start("evq proxy", &cfg.suite.evq, &proxy_args, Limits::default())?;

    let small: Arc<Vec<u8>> = Arc::new((0..SMALL_BYTES).map(crate::origin::pattern).collect());
    let front = |name, addr, path: &str, expect: Expect| Front {
        name,
        addr,
        path: path.into(),
        expect,
        fresh: Arc::default(),
        slow: Arc::default(),
        resets: Arc::default(),
        bad: Arc::default(),
    };
    let names = if completion {
        ["serve --io completion", "proxy --io completion"]
    } else {
        ["serve", "proxy"]
    };
    let fronts = [
        front(
            names[0],
            serve.addr(),
            "/small",
            Expect::Body(small.clone()),
        ),
        front(names[1], proxy.addr(), "/live", Expect::Echo),
    ];
    let live: Vec<LiveClients> = fronts
        .iter()
        .map(|f| {
            LiveClients::start(&LiveSpec {
                target: f.addr,
                conns: 2,
                path: f.path.clone(),
                expect: f.expect.clone(),
                timeout: Duration::from_secs(10),
                pace: None,
            })
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads: Vec<JoinHandle<()>> = fronts.iter().flat_map(|f| f.spawn(&stop)).collect();

    // evq load: 50 new connections a second of one request each, to serve.
    let load_rate = 50.0;
    let secs = cfg.duration.as_secs_f64();
    let mut load_args: Vec<String> = vec![
        "load".into(),
        "--server".into(),
        "127.0.0.1".into(),
        "--port".into(),
        serve.addr().port().to_string(),
        "--uri".into(),
        "/small".into(),
        "--rate".into(),
        load_rate.to_string(),
        "--num-conns".into(),
        ((load_rate * secs) as u64).to_string(),
        "--timeout".into(),
        "10".into(),
        "--json".into(),
        "--no-progress".into(),
    ];
    if completion {
        load_args.extend(["--io".into(), "completion".into()]);
    }
    let mut load = std::process::Command::new(&cfg.suite.evq)
        .args(&load_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let load_pid = load.id();
    let mut load_out = load.stdout.take().expect("piped");
    let load_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = load_out.read_to_string(&mut s);
        s
    });

    let started = Instant::now();
    let pids = [serve.pid(), proxy.pid(), load_pid];
    // The proxy's pooled origin connections (at most --pool-size, kept on
    // purpose) are left out of its descriptor count, as in the fault table.
    let pool_ports = [None, Some(origin.addr().port()), None];
    let mut samples: [Vec<Sample>; 3] = Default::default();
    let mut next = started;
    while started.elapsed() < cfg.duration {
        let t = started.elapsed().as_secs_f64();
        for (i, pid) in pids.iter().enumerate() {
            if let Ok(u) = usage::usage_apart_from(*pid, pool_ports[i]) {
                samples[i].push(Sample {
                    t,
                    fds: u.fds,
                    anon_rss_kib: u.anon_rss_kib,
                });
            }
        }
        next += cfg.sample_every;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let live_counts: Vec<LiveCount> = live.into_iter().map(LiveClients::stop).collect();
    for t in threads.drain(..) {
        let _ = t.join();
    }
    // evq load ends by itself once its schedule is done (plus its timeouts).
    let load_until = Instant::now() + Duration::from_secs(30);
    let load_status = loop {
        if let Some(s) = load.try_wait()? {
            break Some(s);
        }
        if Instant::now() > load_until {
            let _ = load.kill();
            let _ = load.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let load_json: Option<serde_json::Value> =
        serde_json::from_str(load_reader.join().unwrap_or_default().trim()).ok();

    let mut programs = Vec::new();
    for (i, (f, subject)) in fronts.iter().zip([&mut serve, &mut proxy]).enumerate() {
        let up = subject.alive();
        let s = &samples[i];
        let slope = |y: fn(&Sample) -> f64| {
            slope_per_min(&s.iter().map(|x| (x.t, y(x))).collect::<Vec<_>>())
        };
        let mut hostile: Vec<(String, u64)> =
            vec![("reset mid-request".into(), f.resets.load(Ordering::Relaxed))];
        hostile.extend(
            f.bad
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(k, v)| (k.clone(), *v)),
        );
        programs.push(ProgramSoak {
            program: f.name.into(),
            rss_slope_kib_per_min: slope(|x| x.anon_rss_kib as f64),
            fd_slope_per_min: slope(|x| x.fds as f64),
            peak_rss_kib: s.iter().map(|x| x.anon_rss_kib).max().unwrap_or(0),
            samples: s.clone(),
            valid: vec![
                ("keep-alive".into(), Valid::from_live(&live_counts[i])),
                ("new-connection".into(), f.fresh.valid()),
                ("slow".into(), f.slow.valid()),
            ],
            hostile,
            up,
            exit: String::new(),
        });
    }
    let exits = [
        serve.terminate(Duration::from_secs(10)),
        proxy.terminate(Duration::from_secs(10)),
    ];
    for (p, e) in programs.iter_mut().zip(exits) {
        p.exit = e.describe();
    }
    origin.crash();
    let ls = &samples[2];
    let get = |path: &[&str]| {
        let mut v = load_json.as_ref();
        for p in path {
            v = v.and_then(|x| x.get(p));
        }
        v.and_then(serde_json::Value::as_u64).unwrap_or(0)
    };
    let errors = load_json
        .as_ref()
        .and_then(|j| j.get("errors"))
        .and_then(|e| e.as_object())
        .map(|m| {
            m.iter()
                .filter(|(k, v)| *k != "total" && v.as_u64().unwrap_or(0) > 0)
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    let load = LoadSoak {
        connections: get(&["connections"]),
        replies_2xx: get(&["status", "2xx"]),
        replies_5xx: get(&["status", "5xx"]),
        errors,
        peak_rss_kib: ls.iter().map(|x| x.anon_rss_kib).max().unwrap_or(0),
        rss_slope_kib_per_min: slope_per_min(
            &ls.iter()
                .map(|x| (x.t, x.anon_rss_kib as f64))
                .collect::<Vec<_>>(),
        ),
        exit: match load_status {
            Some(s) => s.to_string(),
            None => "did not end within 30 s of the soak; killed".into(),
        },
        clean: load_status.is_some_and(|s| s.success()) && load_json.is_some(),
    };
    drop(docroot);
    Ok(SoakReport {
        seconds,
        mix: format!(
            "{}per program: 2 keep-alive clients (closed loop), 20/s new connections, 8 slow clients sending a valid request a byte every 50 ms, 20/s resets mid-request, 20/s malformed requests (4 kinds); evq load at 50 connections/s to serve",
            if completion {
                "on io_uring completions (serve, proxy and load with --io completion); "
            } else {
                ""
            }
        ),
        programs,
        load: Some(load),
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_is_per_minute_and_skips_the_warm_up() {
        // 10 KiB a second is 600 KiB a minute; a warm-up jump in the first
        // tenth does not count.
        let mut s: Vec<(f64, f64)> = (0..=100)
            .map(|t| (t as f64, 1000.0 + 10.0 * t as f64))
            .collect();
        s[0].1 = 50_000.0;
        assert!((slope_per_min(&s) - 600.0).abs() < 1e-6);
        let flat: Vec<(f64, f64)> = (0..50).map(|t| (t as f64, 7.0)).collect();
        assert_eq!(slope_per_min(&flat), 0.0);
        assert_eq!(slope_per_min(&[]), 0.0);
    }

    #[test]
    fn dips_of_clients_coming_and_going_are_not_a_slope() {
        // The CI soak's proxy: 22 descriptors, 14 every fourth second for the
        // first 20 s (least squares read +2.71 a minute).
        let dips: Vec<(f64, f64)> = (0..60)
            .map(|t| (t as f64, if t % 4 == 0 && t <= 20 { 14.0 } else { 22.0 }))
            .collect();
        assert_eq!(slope_per_min(&dips), 0.0);
        // A descriptor leaked every 10 s is 6 a minute, dips or not.
        let leak: Vec<(f64, f64)> = (0..120)
            .map(|t| {
                let base = 22.0 + (t / 10) as f64;
                (t as f64, if t % 4 == 0 { base - 8.0 } else { base })
            })
            .collect();
        let s = slope_per_min(&leak);
        assert!((s - 6.0).abs() < 0.5, "{s}");
    }
}
