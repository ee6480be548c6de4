//! Smoke tests: a quick run of three designs returns sane records, the command line
//! parses, and no server process outlives a run.

use clap::Parser;
use evq_herd::{jain_index, run, Design, HerdArgs, HerdConfig};
use std::time::Duration;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    herd: HerdArgs,
}

/// Tests that fork servers run one at a time, so that "no children left" means
/// this test's children.
static FORKING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn no_children_left() -> bool {
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG on any child; writes into a live int.
    let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
}

#[test]
fn quick_run_of_three_designs_returns_sane_records() {
    let _serial = FORKING.lock().unwrap_or_else(|p| p.into_inner());
    let cfg = HerdConfig {
        designs: vec![Design::Serv02, Design::Serv02lKoneR1, Design::Serv05],
        workers: 3,
        concurrency: vec![4],
        requests_per_run: 300,
        requests_per_client: None,
        run_timeout: Duration::from_secs(60),
    };
    let records = run(&cfg).expect("herd run");
    assert_eq!(records.len(), 3);
    for r in &records {
        eprintln!("{r:?}");
        assert_eq!(r.workers, 3);
        assert_eq!(r.concurrency, 4);
        assert_eq!(r.errors, 0, "{}", r.design);
        assert_eq!(r.requests, 300, "{}", r.design);
        assert!(!r.timed_out);
        assert_eq!(
            r.killed, 0,
            "{}: server did not shut down cleanly",
            r.design
        );
        assert_eq!(r.accepted, r.requests, "{}", r.design);
        assert_eq!(r.per_worker.len(), 3);
        assert_eq!(r.per_worker.iter().sum::<u64>(), r.accepted);
        assert!(r.requests_per_s > 0.0 && r.total_ms > 0.0);
        assert!(r.jain > 0.0 && r.jain <= 1.0 + 1e-9);
        if let Some(s) = r.share_max_over_min {
            assert!(s >= 1.0);
        }
        assert!(r.sleeps_per_conn > 0.0);
    }
    // Blocking accept and wake-one: one wake-up per connection (a collision adds
    // one); descriptor passing: the acceptor's and the worker's.
    assert!((1.0..1.5).contains(&records[0].wakeups_per_conn));
    assert_eq!(records[0].accept_collisions, 0);
    assert!((1.0..1.5).contains(&records[1].wakeups_per_conn));
    assert!((1.9..2.5).contains(&records[2].wakeups_per_conn));
    let json = serde_json::to_value(&records).unwrap();
    for key in [
        "design",
        "workers",
        "concurrency",
        "requests_per_s",
        "wakeups_per_conn",
        "accept_collisions",
        "share_max_over_min",
        "jain",
    ] {
        assert!(json[0].get(key).is_some(), "JSON record lacks {key}");
    }
    assert!(no_children_left(), "a server process outlived its run");
}

#[test]
fn command_line_parses_and_validates() {
    let cli = Cli::parse_from([
        "herd",
        "--design",
        "serv02",
        "--design",
        "serv02l-kone-kq",
        "--quick",
        "--concurrency",
        "8,32",
        "--json",
    ]);
    let cfg = HerdConfig::from_args(&cli.herd).unwrap();
    assert_eq!(cfg.designs, [Design::Serv02, Design::Serv02lKoneKq]);
    assert_eq!(cfg.concurrency, [8, 32]);
    assert_eq!(cfg.workers, 4);
    assert!(cli.herd.json);

    let all = Cli::parse_from(["herd"]);
    let cfg = HerdConfig::from_args(&all.herd).unwrap();
    assert_eq!(cfg.designs.len(), Design::ALL.len());
    assert_eq!(cfg.concurrency, [8, 32, 128]);

    let bad = Cli::parse_from(["herd", "--design", "serv99"]);
    let err = HerdConfig::from_args(&bad.herd).unwrap_err();
    assert!(err.to_string().contains("serv99"));
    let zero = Cli::parse_from(["herd", "--workers", "0"]);
    assert!(HerdConfig::from_args(&zero.herd).is_err());
}

#[test]
fn design_names_round_trip() {
    for &d in Design::ALL {
        assert_eq!(d.name().parse::<Design>().unwrap(), d);
    }
}

#[test]
fn jain_index_bounds() {
    assert!((jain_index(&[5, 5, 5, 5]) - 1.0).abs() < 1e-12);
    assert!((jain_index(&[8, 0, 0, 0]) - 0.25).abs() < 1e-12);
    assert_eq!(jain_index(&[]), 1.0);
}

/// The herd, counted: at one client (idle workers), plain epoll registrations wake
/// every worker per connection, wake-one wakes one. Compared as voluntary context
/// switches per connection (the kernel absorbs the losers' wake-ups, so returns
/// from `epoll_wait` cannot show them), with a wide margin: 4 workers put the
/// expected gap near 3.
#[test]
fn herd_is_visible_and_wake_one_removes_it() {
    let _serial = FORKING.lock().unwrap_or_else(|p| p.into_inner());
    let cfg = HerdConfig {
        designs: vec![Design::Serv02lK, Design::Serv02lKoneR1],
        workers: 4,
        concurrency: vec![1],
        requests_per_run: 300,
        requests_per_client: None,
        run_timeout: Duration::from_secs(60),
    };
    let records = run(&cfg).expect("herd run");
    let (herd, one) = (&records[0], &records[1]);
    eprintln!(
        "sleeps/conn: serv02l-k {:.2}, serv02l-kone-r1 {:.2}; per worker {:?} vs {:?}",
        herd.sleeps_per_conn, one.sleeps_per_conn, herd.per_worker, one.per_worker
    );
    assert_eq!(herd.errors + one.errors, 0);
    assert!(
        herd.sleeps_per_conn > one.sleeps_per_conn + 1.0,
        "no herd visible: {:.2} vs {:.2}",
        herd.sleeps_per_conn,
        one.sleeps_per_conn
    );
    // Rotation at light load: every worker gets a share.
    assert!(
        one.per_worker.iter().all(|&n| n > 0),
        "{:?}",
        one.per_worker
    );
}

/// evq's default wake-one (rotation in a fair-share group) with every worker busy:
/// 32 clients on 4 workers keep the backlog full, so whoever asks finds the
/// listener ready and shares would follow CPU time; the ledger holds each worker
/// within its lead of the others. The bound is the goal of issue 17 (max/min ≤
/// 1.2), far above the lead of 8 over 256 connections each, so that a worker the
/// machine stops for longer than the patience (passed over, its share forfeited)
/// does not fail the test on a loaded box.
#[test]
fn default_wake_one_is_even_while_workers_are_busy() {
    let _serial = FORKING.lock().unwrap_or_else(|p| p.into_inner());
    let cfg = HerdConfig {
        designs: vec![Design::Serv02lKoneFair],
        workers: 4,
        concurrency: vec![32],
        requests_per_run: 1024,
        requests_per_client: None,
        run_timeout: Duration::from_secs(60),
    };
    let records = run(&cfg).expect("herd run");
    let r = &records[0];
    eprintln!("{}: per worker {:?}", r.design, r.per_worker);
    assert_eq!(r.errors, 0);
    assert_eq!(r.accepted, 1024);
    let share = r.share_max_over_min.expect("every worker served some");
    assert!(share <= 1.2, "max/min {share:.2}: {:?}", r.per_worker);
    assert!(no_children_left(), "a server process outlived its run");
}
