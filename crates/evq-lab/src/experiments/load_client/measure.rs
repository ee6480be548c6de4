//! Every client against the same nginx, alternating, each repeated.

use super::parse::{parse_evq, parse_httperf, parse_wrk};
use super::{Client, Plan, Records, Run};
use crate::experiment::Ctx;
use crate::rig::{run_child, Docroot, PeerServer, PeerServerKind};
use crate::tools::Tools;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file every client fetches: 1 KiB, as the seeds' documents.
pub(super) const REPLY_SIZE: usize = 1024;

/// The program a client runs as, or why it cannot run here.
fn program(client: Client, ctx: &Ctx) -> Result<PathBuf, String> {
    match client {
        Client::Httperf => Tools::find("httperf")
            .ok_or("httperf is not installed (scripts/install-peers.sh installs it)".into()),
        Client::Wrk => Tools::find("wrk")
            .ok_or("wrk is not installed (scripts/install-peers.sh installs it)".into()),
        Client::EvqOpen
        | Client::EvqClosed
        | Client::EvqOpenCompletion
        | Client::EvqClosedCompletion => ctx
            .tools
            .evq()
            .map(Path::to_path_buf)
            .map_err(|e| e.to_string()),
    }
}

/// Runs every client `repeats` times against one nginx worker.
pub(super) fn run(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    let uri = Docroot::uri(REPLY_SIZE);
    let not_run: Vec<(String, String)> = Client::ALL
        .iter()
        .filter_map(|&c| program(c, ctx).err().map(|why| (c.name().to_string(), why)))
        .collect();
    let mut records = Records {
        server_missing: PeerServerKind::Nginx.available().err(),
        reply_size: REPLY_SIZE,
        uri: uri.clone(),
        not_run,
        loadavg_before: crate::procinfo::loadavg(),
        loadavg_after: String::new(),
        placement: crate::placement::describe(),
        runs: Vec::new(),
        plan,
    };
    if records.server_missing.is_some() {
        return Ok(records);
    }
    crate::resources::raise_nofile()?;
    let root = Docroot::with_sizes(&[REPLY_SIZE])?;
    let server = PeerServer::start(PeerServerKind::Nginx, &root, 1)?;
    let port = server.addr().port();
    let s = &records.plan;
    ctx.expect(s.repeats * (Client::ALL.len() - records.not_run.len()));
    for repeat in 1..=s.repeats {
        for client in Client::ALL {
            let Ok(prog) = program(client, ctx) else {
                continue;
            };
            ctx.step(&format!(
                "{} ({} loop), run {repeat} of {}",
                client.name(),
                client.mode(),
                s.repeats
            ));
            let args = client_args(client, s, port, &uri);
            records
                .runs
                .push(one_run(client, &prog, &args, &server, repeat, s.limit_s));
        }
    }
    records.loadavg_after = crate::procinfo::loadavg();
    Ok(records)
}

/// The httperf command line both open-loop clients take (after the program).
fn open_args(s: &Plan, port: u16, uri: &str) -> Vec<String> {
    [
        "--server",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--uri",
        uri,
        "--num-conns",
        &s.num_conns.to_string(),
        "--num-calls",
        &s.num_calls.to_string(),
        "--rate",
        &s.rate.to_string(),
        "--hog",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect()
}

pub(super) fn client_args(client: Client, s: &Plan, port: u16, uri: &str) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    match client {
        Client::Httperf => args = open_args(s, port, uri),
        Client::EvqOpen | Client::EvqOpenCompletion => {
            args.push("load".into());
            args.extend(open_args(s, port, uri));
            args.extend(["--json".into(), "--no-progress".into()]);
        }
        Client::Wrk => {
            for a in [
                "-t".to_string(),
                s.threads.to_string(),
                "-c".into(),
                s.connections.to_string(),
                "-d".into(),
                format!("{}s", s.seconds),
                format!("http://127.0.0.1:{port}{uri}"),
            ] {
                args.push(a);
            }
        }
        Client::EvqClosed | Client::EvqClosedCompletion => {
            args.push("load".into());
            for a in [
                "--server".to_string(),
                "127.0.0.1".into(),
                "--port".into(),
                port.to_string(),
                "--uri".into(),
                uri.into(),
                "--connections".into(),
                s.connections.to_string(),
                "--duration".into(),
                s.seconds.to_string(),
                "--threads".into(),
                s.threads.to_string(),
                "--json".into(),
                "--no-progress".into(),
            ] {
                args.push(a);
            }
        }
    }
    if matches!(
        client,
        Client::EvqOpenCompletion | Client::EvqClosedCompletion
    ) {
        args.extend(["--io".into(), "completion".into()]);
    }
    args
}

fn one_run(
    client: Client,
    program: &Path,
    args: &[String],
    server: &PeerServer,
    repeat: usize,
    limit_s: u64,
) -> Run {
    let server_before = server.cpu_time();
    let outcome = run_child(program, args, Duration::from_secs(limit_s));
    let server_cpu_s = server
        .cpu_time()
        .saturating_sub(server_before)
        .as_secs_f64();
    let mut run = Run {
        client: client.name().into(),
        mode: client.mode().into(),
        repeat,
        summary: None,
        cpu_user_s: 0.0,
        cpu_sys_s: 0.0,
        cpu_us_per_reply: None,
        wall_s: 0.0,
        server_cpu_s,
        server_core_share: 0.0,
        exit: None,
        failure: None,
    };
    let o = match outcome {
        Ok(o) => o,
        Err(e) => {
            run.failure = Some(format!("could not run {}: {e}", program.display()));
            return run;
        }
    };
    run.cpu_user_s = o.cpu_user_s;
    run.cpu_sys_s = o.cpu_sys_s;
    run.wall_s = o.wall_s;
    run.server_core_share = if o.wall_s > 0.0 {
        server_cpu_s / o.wall_s
    } else {
        0.0
    };
    run.exit = o.exit;
    run.summary = match client {
        Client::Httperf => parse_httperf(&o.stdout),
        Client::Wrk => parse_wrk(&o.stdout),
        Client::EvqOpen
        | Client::EvqClosed
        | Client::EvqOpenCompletion
        | Client::EvqClosedCompletion => parse_evq(&o.stdout),
    };
    let tail = |s: &str| -> String {
        let t = s.trim();
        let start = t.len().saturating_sub(300);
        let start = (start..=t.len())
            .find(|&i| t.is_char_boundary(i))
            .unwrap_or(t.len());
        t[start..].to_string()
    };
    run.failure = if o.killed {
        Some(format!("killed at the {limit_s} s limit"))
    } else if o.exit != Some(0) {
        Some(format!(
            "exit {:?}: {}",
            o.exit,
            tail(&format!("{}\n{}", o.stdout, o.stderr))
        ))
    } else if run.summary.is_none() {
        Some(format!("output not understood: {}", tail(&o.stdout)))
    } else {
        None
    };
    if let Some(s) = &run.summary {
        if s.replies > 0 {
            run.cpu_us_per_reply = Some((o.cpu_user_s + o.cpu_sys_s) * 1e6 / s.replies as f64);
        }
    }
    run
}
