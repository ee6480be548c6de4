//! hyper and echo on evq-async against tokio (current-thread, multi-thread) and
//! smol, in one run, contenders interleaved round by round, server and client on
//! different CPUs.
//!
//! ```console
//! $ cargo run --release -p evq-async --example bench_async -- run
//! $ cargo run --release -p evq-async --example bench_async -- run --rounds 5 --seconds 5 \
//!       --workloads hyper --json target/bench-async.jsonl
//! $ cargo run --release -p evq-async --example bench_async -- callgrind --runtime evq-async
//! ```
//!
//! Workloads: `hyper` (HTTP/1.1 keep-alive, `--body` bytes, `--connections`
//! connections, load from wrk), `echo1` and `echo1000` (64-byte ping-pong on 1 and
//! 1,000 connections, from the closed-loop client in `clients.rs`). Every round
//! runs every workload on every contender, in an order that rotates per round; a
//! server is started fresh for each measurement, warmed up for `--warmup` seconds,
//! then measured for `--seconds`.
//!
//! Output: a table per workload (every round, then the median and the ratios of
//! evq-async to each tokio flavour), and one JSON record per contender × workload ×
//! round on stdout (lines starting with `{`) and in `--json FILE` (JSON lines):
//! `{"bench":"evq-async","workload":"hyper","runtime":"tokio-ct","round":1,
//! "connections":100,"body":1024,"requests":…,"seconds":…,"req_per_s":…,
//! "p50_us":…,"p99_us":…,"max_us":…,"errors":…,"client":"wrk","server_cpu":0,
//! "client_cpu":1,"backend":"epoll"}`.
//!
//! `callgrind` runs one contender's server under `valgrind --tool=callgrind` twice,
//! with two request counts from the closed-loop client, and prints the server's
//! instructions per request (the difference of the two runs over the difference of
//! the counts, so start-up cancels out): a figure that holds on a noisy machine.

mod clients;
mod servers;

use clap::{Parser, Subcommand};
use clients::{closed_loop, pinned, wrk, Load, Protocol, Until};
use serde::Serialize;
use servers::{Workload, RUNTIMES};
use std::io::{self, BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[derive(Parser)]
#[command(about = "hyper and echo on evq-async vs tokio and smol")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The comparison: every workload × every contender × rounds.
    Run(RunArgs),
    /// One server (the `run` command starts these).
    Serve {
        #[arg(long)]
        runtime: String,
        /// `hyper` or `echo`.
        #[arg(long)]
        workload: String,
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(0..=16 << 20))]
        body: u32,
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
    },
    /// The closed-loop client alone (prints one JSON line).
    Client {
        #[arg(long)]
        addr: SocketAddr,
        /// `http` or `echo`.
        #[arg(long, default_value = "echo")]
        protocol: String,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20_000))]
        connections: u32,
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
        seconds: u64,
    },
    /// Server instructions per request under callgrind.
    Callgrind {
        #[arg(long, default_value = "evq-async")]
        runtime: String,
        /// `hyper` or `echo`.
        #[arg(long, default_value = "hyper")]
        workload: String,
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        connections: u32,
        /// The two request counts whose difference is measured.
        #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        requests: u64,
    },
}

#[derive(Parser)]
struct RunArgs {
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Measured seconds per contender per round.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    seconds: u64,
    /// Warm-up seconds before each measurement (not recorded).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=60))]
    warmup: u64,
    /// HTTP connections (the echo workloads fix theirs at 1 and 1,000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    connections: u32,
    /// HTTP response body, bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(0..=16 << 20))]
    body: u32,
    /// Comma-separated contenders.
    #[arg(long, default_value = "evq-async,tokio-ct,tokio-mt,smol")]
    runtimes: String,
    /// Comma-separated workloads: hyper, echo1, echo1000.
    #[arg(long, default_value = "hyper,echo1,echo1000")]
    workloads: String,
    #[arg(long, default_value_t = 0)]
    server_cpu: usize,
    #[arg(long, default_value_t = 1)]
    client_cpu: usize,
    /// Run without taskset even where two CPUs are allowed.
    #[arg(long)]
    no_pin: bool,
    /// Also append the JSON records to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct Record<'a> {
    bench: &'a str,
    workload: &'a str,
    runtime: &'a str,
    round: u32,
    connections: u32,
    body: u32,
    client: &'a str,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
    backend: &'a str,
    /// Server CPU time (all threads, user + system) per reply, nanoseconds: the
    /// cost of a request, much less sensitive than req/s to a shared machine.
    server_cpu_ns_per_request: f64,
    #[serde(flatten)]
    load: Load,
}

/// CPU time a process has run so far, all its threads, nanoseconds
/// (`/proc/PID/task/*/schedstat`, first field).
fn process_cpu_ns(pid: u32) -> io::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let text = std::fs::read_to_string(task?.path().join("schedstat"))?;
        total += text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| io::Error::other("unreadable schedstat"))?;
    }
    Ok(total)
}

/// A server process of ours; killed (by its pid) when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(
    runtime: &str,
    workload: &str,
    body: u32,
    cpu: Option<usize>,
    wrapper: &[&str],
) -> io::Result<Server> {
    let exe = std::env::current_exe()?;
    let mut cmd = match (cpu, wrapper.split_first()) {
        (_, Some((first, rest))) => {
            let mut c = pinned(cpu, first);
            c.args(rest).arg(&exe);
            c
        }
        (cpu, None) => pinned(
            cpu,
            exe.to_str()
                .ok_or_else(|| io::Error::other("non-UTF-8 path"))?,
        ),
    };
    cmd.args([
        "serve",
        "--runtime",
        runtime,
        "--workload",
        workload,
        "--body",
    ])
    .arg(body.to_string())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| io::Error::other(format!("{runtime} server did not start: {line:?}")))?;
    Ok(Server { child, addr })
}

fn two_cpus() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
        && Command::new("taskset").arg("--version").output().is_ok()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn run(args: RunArgs) -> io::Result<()> {
    raise_nofile();
    let pin = !args.no_pin && two_cpus();
    let (server_cpu, client_cpu) = if pin {
        (Some(args.server_cpu), Some(args.client_cpu))
    } else {
        (None, None)
    };
    let runtimes: Vec<&str> = args.runtimes.split(',').map(str::trim).collect();
    for r in &runtimes {
        if !RUNTIMES.contains(r) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown runtime {r:?}; known: {}", RUNTIMES.join(", ")),
            ));
        }
    }
    let workloads: Vec<&str> = args.workloads.split(',').map(str::trim).collect();
    for w in &workloads {
        if !["hyper", "echo1", "echo1000"].contains(w) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown workload {w:?}; known: hyper, echo1, echo1000"),
            ));
        }
    }
    let backend = evq::BackendKind::from_env_or_best()?.name();
    eprintln!(
        "bench_async: {} round(s) × {:?} × {:?}, {} s each (+{} s warm-up), {}; evq backend {backend}; \
         the machine may be shared: compare ratios within a round",
        args.rounds,
        workloads,
        runtimes,
        args.seconds,
        args.warmup,
        if pin { format!("server on CPU {}, client on CPU {}", args.server_cpu, args.client_cpu) } else { "not pinned".into() },
    );
    let mut json = match &args.json {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        ),
        None => None,
    };
    // results[workload][runtime] = per-round loads
    let mut results: Vec<Vec<Vec<(Load, f64)>>> =
        vec![vec![Vec::new(); runtimes.len()]; workloads.len()];
    for round in 1..=args.rounds {
        for (wi, workload) in workloads.iter().enumerate() {
            for k in 0..runtimes.len() {
                // Rotate who goes first, so no contender always follows another.
                let ri = (k + round as usize - 1) % runtimes.len();
                let runtime = runtimes[ri];
                let (server_workload, connections, client) = match *workload {
                    "hyper" => ("hyper", args.connections, "wrk"),
                    "echo1" => ("echo", 1, "closed-loop"),
                    _ => ("echo", 1000, "closed-loop"),
                };
                let server = start_server(runtime, server_workload, args.body, server_cpu, &[])?;
                let measure = |secs: u64| -> io::Result<Load> {
                    match *workload {
                        "hyper" => wrk(
                            &format!("http://{}/", server.addr),
                            connections as usize,
                            secs,
                            client_cpu,
                        ),
                        _ => client_process(server.addr, connections, secs, client_cpu),
                    }
                };
                if args.warmup > 0 {
                    measure(args.warmup)?;
                }
                let cpu_before = process_cpu_ns(server.child.id())?;
                let load = measure(args.seconds)?;
                let cpu_ns = process_cpu_ns(server.child.id())?.saturating_sub(cpu_before);
                let cpu_per_request = cpu_ns as f64 / load.requests.max(1) as f64;
                drop(server);
                eprintln!(
                    "round {round} {workload:>8} {runtime:>9}: {:>9.0} req/s  p50 {:>6} µs  p99 {:>6} µs  \
                     server CPU {:>6.2} µs/req  errors {}",
                    load.req_per_s,
                    load.p50_us,
                    load.p99_us,
                    cpu_per_request / 1e3,
                    load.errors
                );
                let record = Record {
                    bench: "evq-async",
                    workload,
                    runtime,
                    round,
                    connections,
                    body: if *workload == "hyper" { args.body } else { 64 },
                    client,
                    server_cpu,
                    client_cpu,
                    backend,
                    server_cpu_ns_per_request: cpu_per_request,
                    load: load.clone(),
                };
                let line = serde_json::to_string(&record).map_err(io::Error::other)?;
                println!("{line}");
                if let Some(f) = &mut json {
                    writeln!(f, "{line}")?;
                }
                results[wi][ri].push((load, cpu_per_request));
            }
        }
    }
    print_table(&workloads, &runtimes, &results);
    Ok(())
}

fn print_table(workloads: &[&str], runtimes: &[&str], results: &[Vec<Vec<(Load, f64)>>]) {
    for (wi, workload) in workloads.iter().enumerate() {
        println!("\n{workload}: per round, req/s (p99 µs) [server CPU µs/request]");
        for (ri, runtime) in runtimes.iter().enumerate() {
            let rows = &results[wi][ri];
            let rounds: Vec<String> = rows
                .iter()
                .map(|(l, cpu)| format!("{:.0} ({}) [{:.2}]", l.req_per_s, l.p99_us, cpu / 1e3))
                .collect();
            let rps = median(rows.iter().map(|(l, _)| l.req_per_s).collect());
            let p99 = median(rows.iter().map(|(l, _)| l.p99_us as f64).collect());
            let cpu = median(rows.iter().map(|(_, c)| *c / 1e3).collect());
            println!(
                "  {runtime:>9}: {}\n  {:>9}  median {rps:.0} req/s, p99 {p99:.0} µs, {cpu:.2} µs/request",
                rounds.join("  "),
                ""
            );
        }
        let Some(evq) = runtimes.iter().position(|r| *r == "evq-async") else {
            continue;
        };
        for base in ["tokio-ct", "tokio-mt", "smol"] {
            let Some(b) = runtimes.iter().position(|r| *r == base) else {
                continue;
            };
            // Ratios within each round (same machine state), then their median.
            let pairs: Vec<_> = results[wi][evq].iter().zip(&results[wi][b]).collect();
            let ratio = |f: &dyn Fn(&(Load, f64)) -> f64| -> (f64, String) {
                let v: Vec<f64> = pairs.iter().map(|(e, t)| f(e) / f(t).max(1e-9)).collect();
                let each = v
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                (median(v), each)
            };
            let (rps, rps_each) = ratio(&|x| x.0.req_per_s);
            let (p99, p99_each) = ratio(&|x| x.0.p99_us as f64);
            let (cpu, cpu_each) = ratio(&|x| x.1);
            println!(
                "  evq-async / {base}: req/s ×{rps:.3} [{rps_each}]\n  {:>20} p99 ×{p99:.3} [{p99_each}]\n  {:>20} CPU/request ×{cpu:.3} [{cpu_each}]",
                "", ""
            );
        }
    }
}

/// The closed-loop client in a process of its own, pinned to the client CPU.
fn client_process(
    addr: SocketAddr,
    connections: u32,
    seconds: u64,
    cpu: Option<usize>,
) -> io::Result<Load> {
    let exe = std::env::current_exe()?;
    let out = pinned(
        cpu,
        exe.to_str()
            .ok_or_else(|| io::Error::other("non-UTF-8 path"))?,
    )
    .args(["client", "--protocol", "echo", "--addr"])
    .arg(addr.to_string())
    .arg("--connections")
    .arg(connections.to_string())
    .arg("--seconds")
    .arg(seconds.to_string())
    .stderr(Stdio::inherit())
    .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("client failed: {}", out.status)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).map_err(io::Error::other)?;
    let get = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(Load {
        requests: get("requests"),
        seconds: v["seconds"].as_f64().unwrap_or(0.0),
        req_per_s: v["req_per_s"].as_f64().unwrap_or(0.0),
        p50_us: get("p50_us"),
        p99_us: get("p99_us"),
        max_us: get("max_us"),
        errors: get("errors"),
    })
}

fn callgrind(runtime: &str, workload: &str, connections: u32, requests: u64) -> io::Result<()> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Err(io::Error::other(
            "valgrind is not installed (apt-get install -y valgrind)",
        ));
    }
    let protocol = match workload {
        "hyper" => Protocol::Http,
        "echo" => Protocol::Echo { size: 64 },
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown workload {other:?}"),
            ))
        }
    };
    let mut totals = Vec::new();
    for n in [requests, 2 * requests] {
        let out = std::env::temp_dir().join(format!(
            "evq-async-callgrind-{}-{n}.out",
            std::process::id()
        ));
        let out_arg = format!("--callgrind-out-file={}", out.display());
        // One CPU, as in `run`: every contender runs its one-worker configuration.
        let server = start_server(
            runtime,
            workload,
            1024,
            Some(0),
            &["valgrind", "--tool=callgrind", "-q", &out_arg],
        )?;
        let load = closed_loop(
            server.addr,
            connections as usize,
            protocol,
            Until::Replies(n),
        )?;
        // SIGKILL would lose callgrind's dump: ask politely and wait.
        // SAFETY: kill(2) on our own child's pid with SIGTERM; no pointers.
        unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
        let mut server = server;
        let _ = server.child.wait();
        let text = std::fs::read_to_string(&out)?;
        let _ = std::fs::remove_file(&out);
        let total: u64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("summary: ")
                    .or_else(|| l.strip_prefix("totals: "))
            })
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| io::Error::other("no totals in callgrind's output"))?;
        eprintln!(
            "{runtime} {workload}: {} replies, {total} instructions",
            load.requests
        );
        totals.push((load.requests, total));
    }
    let (n1, i1) = totals[0];
    let (n2, i2) = totals[1];
    let per = (i2 as f64 - i1 as f64) / (n2 as f64 - n1 as f64);
    println!(
        "{{\"bench\":\"evq-async-callgrind\",\"runtime\":\"{runtime}\",\"workload\":\"{workload}\",\"connections\":{connections},\"instructions_per_request\":{per:.0}}}"
    );
    Ok(())
}

fn raise_nofile() {
    // A benchmark with the default soft limit still runs, only with fewer connections.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
}

fn main() -> io::Result<()> {
    match Cli::parse().command {
        Cmd::Run(args) => run(args),
        Cmd::Serve {
            runtime,
            workload,
            body,
            addr,
        } => {
            raise_nofile();
            let workload = match workload.as_str() {
                "hyper" => Workload::Hyper {
                    body: body as usize,
                },
                "echo" => Workload::Echo,
                other => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("unknown workload {other:?}; known: hyper, echo"),
                    ))
                }
            };
            servers::serve(&runtime, workload, addr)
        }
        Cmd::Client {
            addr,
            protocol,
            connections,
            seconds,
        } => {
            raise_nofile();
            let protocol = match protocol.as_str() {
                "echo" => Protocol::Echo { size: 64 },
                "http" => Protocol::Http,
                other => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("unknown protocol {other:?}; known: echo, http"),
                    ))
                }
            };
            let load = closed_loop(
                addr,
                connections as usize,
                protocol,
                Until::Elapsed(Duration::from_secs(seconds)),
            )?;
            println!(
                "{}",
                serde_json::to_string(&load).map_err(io::Error::other)?
            );
            Ok(())
        }
        Cmd::Callgrind {
            runtime,
            workload,
            connections,
            requests,
        } => callgrind(&runtime, &workload, connections, requests),
    }
}
