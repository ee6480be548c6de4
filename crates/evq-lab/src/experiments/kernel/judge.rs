//! The kernel-module verdicts: pure functions of what `scripts/vm-test` wrote.
//!
//! Figure 1's points are guest instructions per event (the benchmark boot runs
//! under `-icount shift=0`); the "wait cost" of a method is its loop minus the
//! same loop with no wait at all (`none`: write a byte, read it back), which is
//! what the mechanism adds per event. The seed's /dev/poll figure compares whole
//! loops, as devpollperf timed them.

use super::{Figure1Point, Figure8Point, Records, VmRun, WakeOnePoint};
use crate::experiment::Judged;
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

const CONFORMANCE: &str = "evq's whole conformance suite, many_connections, the model test, evq torture (0 lost), the C API and the kqueue and /dev/poll personalities pass on kmod and kmod-ring inside the VM (100% of the suite)";
const MODULE_SUITES: &str = "the module's own suites pass (/dev/evq and /dev/poll semantics), and ≥ 10^6 random ioctls from user space get only the documented errors";
const CLEAN_KERNEL: &str = "no kernel warnings in any run (BUG, WARNING, Oops, lockdep, leaked objects, hung tasks); the module loads and unloads cleanly 100 times in a row";
const RING_VS_EPOLL: &str = "kmod's ring path costs ≤ 0.9× epoll's wait cost per event at 1,000 and 10,000 descriptors (same VM, same run)";
const IOCTL_VS_EPOLL: &str =
    "kmod's ioctl path costs ≤ 1.0× epoll's wait cost per event at 1,000 and 10,000 descriptors";
const FLAT: &str = "kmod's cost per event is flat from 1 to 10,000 descriptors (≤ 1.5× growth), ring and ioctl paths";
const DEVPOLL_VS_POLL: &str = "the in-kernel /dev/poll is ≥ 15× faster than poll() at 4,000 descriptors (seed 004's figure; 10,000 shown)";
const WAKE_ONE: &str = "wake-one with rotation in the kernel: ≤ 1.05 wake-ups per connection, and max/min share of connections ≤ 1.2 over 4 queues";
const FIGURE8: &str = "Figure 8's shape (seed 000): an event-driven server on kmod keeps ≥ 85% of its throughput as cold connections grow, as on epoll, while on select it falls further";

/// Every claim, in report order.
pub(super) const CLAIMS: [&str; 9] = [
    CONFORMANCE,
    MODULE_SUITES,
    CLEAN_KERNEL,
    RING_VS_EPOLL,
    IOCTL_VS_EPOLL,
    FLAT,
    DEVPOLL_VS_POLL,
    WAKE_ONE,
    FIGURE8,
];

const CAPTION_FIG1: &str = "devpollperf's loop in the guest: instructions per event (log-log). poll and select climb with the descriptors; epoll, the in-kernel /dev/poll and both kmod paths stay flat. `none` is the loop without any wait: the floor every method pays.";
const CAPTION_WAIT: &str = "What the wait adds per event (the loop minus `none`), in guest instructions: the mechanisms' own cost, where the ring's shortcut shows.";
const CAPTION_FIG8: &str = "evq serve (one thread) on each backend while evq dead holds cold connections: replies per guest second (4 closed-loop clients, all on the guest's one CPU). Flat is the claim; select pays for every cold descriptor on every call.";

/// The kmod paths of Figure 1 (the ring, and the ioctl in level mode).
const RING: &str = "kmod-ring";
const IOCTL: &str = "kmod-ioctl";

pub(super) fn judge(r: &Records) -> Judged {
    let mut judged = r.vm.judge(
        &CLAIMS.map(String::from),
        "scripts/vm-test",
        |vm: &VmRun| Judged {
            checks: vec![
                conformance(vm),
                module_suites(vm),
                clean_kernel(vm),
                versus_epoll(vm, RING_VS_EPOLL, RING, 0.9),
                versus_epoll(vm, IOCTL_VS_EPOLL, IOCTL, 1.0),
                flat(vm),
                devpoll_vs_poll(vm),
                wake_one(vm),
                figure8(vm),
            ],
            figures: figures(vm),
            notes: notes(vm),
            ..Judged::default()
        },
    );
    judged.commands.push(format!(
        "scripts/vm-test --bench {} --out target/vm/out   # builds evq.ko and the static test programs, boots Debian's kernel under qemu (TCG), judges the console",
        r.plan.bench
    ));
    judged.commands.push(
        "EVQ_LAB_VM_RESULTS=target/vm/out evq lab --only kernel   # report that run without booting again".into(),
    );
    judged
}

fn notes(vm: &VmRun) -> Vec<String> {
    vec![
        format!(
            "Results from {}; guest kernel {}; {} s in all. Boots: {}.",
            vm.source,
            vm.kernel,
            vm.elapsed_seconds,
            vm.boot_suites
                .iter()
                .map(|s| s.join(","))
                .collect::<Vec<_>>()
                .join(" | ")
        ),
        format!(
            "The benchmark boot's clock is {}: under qemu's -icount shift=0 the guest clock advances 1 ns per executed guest instruction, so its \"ns\" are instructions — repeatable on this shared machine and blind to caches and TLBs. TCG is not real hardware: only ratios between methods of one boot are reported. Wake-one also runs in the test boot, on several CPUs under multi-threaded TCG (real concurrency, real time).",
            if vm.bench_clock.is_empty() { "unknown" } else { &vm.bench_clock }
        ),
        "Figure 8 runs evq's own HTTP server, cold-connection holder and load client on the one CPU of a boot of its own (-icount): the rate counts the client's instructions too, which dilutes the servers' differences compared with the seed's separate client machines.".into(),
    ]
}

fn conformance(vm: &VmRun) -> ClaimCheck {
    let rust: Vec<_> = vm
        .suites
        .iter()
        .filter(|s| {
            s.name.starts_with("rust_") || s.name.starts_with("capi_") || s.name == "evq_torture"
        })
        .collect();
    let required = [
        "rust_evq-conformance",
        "rust_evq-many_connections",
        "rust_evq-model",
        "capi_api_test_kmod",
        "capi_api_test_kmod-ring",
        "rust_evq-compat-kqueue_kmod",
        "rust_evq-compat-kqueue_kmod-ring",
        "rust_evq-compat-devpoll_kmod",
        "rust_evq-compat-devpoll_kmod-ring",
        "evq_torture",
    ];
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|n| !rust.iter().any(|s| s.name == *n))
        .collect();
    let failing: Vec<String> = rust
        .iter()
        .filter(|s| s.rc != Some(0))
        .map(|s| format!("{} (exit {:?})", s.name, s.rc))
        .collect();
    let passed: u64 = vm.harness.iter().map(|h| h.passed).sum();
    let failed: u64 = vm.harness.iter().map(|h| h.failed).sum();
    let ignored: u64 = vm.harness.iter().map(|h| h.ignored).sum();
    let conformance_tests: u64 = vm
        .harness
        .iter()
        .filter(|h| h.suite == "rust_evq-conformance")
        .map(|h| h.passed)
        .sum();
    let t = &vm.torture;
    let lost: u64 = t
        .iter()
        .map(|c| c.lost + c.timers_lost + c.wakeups_lost + c.connections_lost)
        .sum();
    let torture_ok = !t.is_empty() && t.iter().all(|c| c.passed());
    ClaimCheck::judged(
        CONFORMANCE,
        if rust.is_empty() {
            "the Rust suites did not run in the VM".into()
        } else {
            format!(
                "{} suites, {passed} tests passed, {failed} failed, {ignored} ignored (conformance: {conformance_tests} tests × kmod, kmod-ring); evq torture: {} cases, {} events, lost {lost}, duplicated {}, stale {}{}{}",
                rust.len(),
                t.len(),
                t.iter().map(|c| c.events).sum::<u64>(),
                t.iter().map(|c| c.duplicated + c.connections_duplicated).sum::<u64>(),
                t.iter().map(|c| c.stale + c.wrong_state).sum::<u64>(),
                if failing.is_empty() { String::new() } else { format!("; failing: {}", failing.join(", ")) },
                if missing.is_empty() { String::new() } else { format!("; never ran: {}", missing.join(", ")) },
            )
        },
        (!rust.is_empty()).then_some(
            missing.is_empty() && failing.is_empty() && failed == 0 && ignored == 0 && passed > 0 && torture_ok,
        ),
        "holds if every required suite ran in the guest with EVQ_TEST_BACKENDS=kmod,kmod-ring (or EVQ_BACKEND naming each) and exited 0, no test failed or was ignored (a skip fails there: EVQ_REQUIRE_ALL=1), and every torture ledger is clean; not measured when the Rust suites were not part of the run",
    )
}

fn module_suites(vm: &VmRun) -> ClaimCheck {
    let c: Vec<_> = vm
        .suites
        .iter()
        .filter(|s| s.name == "evq_semantics" || s.name == "devpoll_semantics")
        .collect();
    let fuzz = vm.fuzz.first();
    let ok = c.len() == 2 && c.iter().all(|s| s.rc == Some(0));
    ClaimCheck::judged(
        MODULE_SUITES,
        format!(
            "{}; fuzz: {}",
            if c.is_empty() {
                "C suites not run".to_string()
            } else {
                c.iter()
                    .map(|s| format!("{} exit {:?}", s.name, s.rc))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            fuzz.map_or("not run".to_string(), |f| format!(
                "{} calls, {} unexpected errors",
                f.calls, f.unexpected_errors
            ))
        ),
        (c.len() == 2 && fuzz.is_some()).then(|| {
            ok && fuzz.is_some_and(|f| f.calls >= 1_000_000 && f.unexpected_errors == 0)
        }),
        "holds if both C suites exit 0 and the fuzz run made ≥ 10^6 calls with no error outside the documented set (EBADF, EINVAL, EFAULT, EPERM, ENOTTY, …); not measured unless both ran",
    )
}

fn clean_kernel(vm: &VmRun) -> ClaimCheck {
    let markers: Vec<&String> = vm
        .problems
        .iter()
        .filter(|p| p.contains("marker") || p.contains("qemu exit"))
        .collect();
    ClaimCheck::judged(
        CLEAN_KERNEL,
        format!(
            "{} kernel log lines, {} bad{}; load/unload cycles: {}{}",
            vm.kernel_log_lines,
            vm.kernel_log_problems.len(),
            vm.kernel_log_problems
                .first()
                .map_or(String::new(), |l| format!(" (first: {l})")),
            vm.load_unload_cycles
                .map_or("not run".into(), |c| c.to_string()),
            if markers.is_empty() {
                String::new()
            } else {
                format!(
                    "; {}",
                    markers
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        ),
        (vm.kernel_log_lines > 0 && vm.load_unload_cycles.is_some()).then(|| {
            vm.kernel_log_problems.is_empty()
                && markers.is_empty()
                && vm.load_unload_cycles == Some(100)
        }),
        "holds if no kernel log line of any boot matches vm-test's list (BUG, WARNING, Oops, lockdep, KASAN, UBSAN, list corruption, leaked slab objects, hung tasks, stalls), every boot reached insmod, rmmod and its end, and 100 load/use/unload cycles completed; not measured without the kernel log or the load/unload suite",
    )
}

/// The point of `method` at `fds`.
fn point<'a>(vm: &'a VmRun, method: &str, fds: u64) -> Option<&'a Figure1Point> {
    vm.figure1
        .iter()
        .find(|p| p.method == method && p.fds == fds)
}

/// What `method`'s wait adds per event at `fds`: its loop minus the loop without a wait.
fn wait_cost(vm: &VmRun, method: &str, fds: u64) -> Option<f64> {
    Some(point(vm, method, fds)?.ns_per_event - point(vm, "none", fds)?.ns_per_event)
}

fn versus_epoll(vm: &VmRun, claim: &str, method: &str, bound: f64) -> ClaimCheck {
    let rows: Vec<(u64, Option<f64>, Option<f64>)> = [1000, 10_000]
        .into_iter()
        .map(|n| {
            let wait = wait_cost(vm, method, n)
                .zip(wait_cost(vm, "epoll", n))
                .map(|(k, e)| k / e);
            let whole = point(vm, method, n)
                .zip(point(vm, "epoll", n))
                .map(|(k, e)| k.ns_per_event / e.ns_per_event);
            (n, wait, whole)
        })
        .collect();
    let complete = rows.iter().all(|r| r.1.is_some());
    ClaimCheck::judged(
        claim,
        rows.iter()
            .map(|(n, wait, whole)| match (wait, whole) {
                (Some(w), Some(t)) => format!(
                    "{n} fds: {w:.2}× epoll's wait cost ({:.0} vs {:.0} instructions), {t:.2}× its whole loop",
                    wait_cost(vm, method, *n).unwrap_or(f64::NAN),
                    wait_cost(vm, "epoll", *n).unwrap_or(f64::NAN)
                ),
                _ => format!("{n} fds: not measured"),
            })
            .collect::<Vec<_>>()
            .join("; "),
        complete.then(|| rows.iter().all(|r| r.1.is_some_and(|x| x <= bound))),
        &format!(
            "holds if at both sizes {method}'s wait cost (its loop minus the no-wait loop, guest instructions per event, median of the repetitions) is at most {bound}× epoll's in the same boot; the whole-loop ratio is shown beside it"
        ),
    )
}

fn flat(vm: &VmRun) -> ClaimCheck {
    let growth = |m: &str| Some(wait_cost(vm, m, 10_000)? / wait_cost(vm, m, 1)?);
    let g: Vec<(&str, Option<f64>)> = [RING, IOCTL].into_iter().map(|m| (m, growth(m))).collect();
    ClaimCheck::judged(
        FLAT,
        g.iter()
            .map(|(m, x)| match x {
                Some(x) => format!(
                    "{m}: {x:.2}× ({:.0} → {:.0} instructions of wait per event, 1 → 10,000 fds)",
                    wait_cost(vm, m, 1).unwrap_or(f64::NAN),
                    wait_cost(vm, m, 10_000).unwrap_or(f64::NAN)
                ),
                None => format!("{m}: not measured"),
            })
            .collect::<Vec<_>>()
            .join("; "),
        g.iter()
            .all(|(_, x)| x.is_some())
            .then(|| g.iter().all(|(_, x)| x.is_some_and(|x| x <= 1.5))),
        "holds if each path's wait cost at 10,000 descriptors is at most 1.5× its cost at 1 (floor subtracted, so the pipes' own cost, which grows with cache misses on real hardware but not in instructions, does not count)",
    )
}

fn devpoll_vs_poll(vm: &VmRun) -> ClaimCheck {
    let ratio =
        |n: u64| Some(point(vm, "poll", n)?.ns_per_event / point(vm, "devpoll", n)?.ns_per_event);
    let (r4, r10) = (ratio(4000), ratio(10_000));
    ClaimCheck::judged(
        DEVPOLL_VS_POLL,
        format!(
            "poll / /dev/poll per event: {} at 4,000 fds, {} at 10,000 (whole loop; seed: 147,926 / 2,573 ms = 57× at 10,000)",
            r4.map_or("not measured".into(), |r| format!("{r:.1}×")),
            r10.map_or("not measured".into(), |r| format!("{r:.1}×")),
        ),
        r4.map(|r| r >= 15.0),
        "holds if poll's whole loop per event at 4,000 descriptors is at least 15× the in-kernel /dev/poll's (devpollperf times whole loops; so does this)",
    )
}

fn wake_one(vm: &VmRun) -> ClaimCheck {
    let runs: Vec<&WakeOnePoint> = vm
        .wakeone
        .iter()
        .filter(|w| w.method == "kmod-wakeone")
        .collect();
    let others: Vec<String> = vm
        .wakeone
        .iter()
        .filter(|w| w.method != "kmod-wakeone")
        .map(|w| {
            format!(
                "{} ({}): {:.2}/conn, share {}",
                w.method,
                w.clock,
                w.wakeups_per_connection,
                share(w)
            )
        })
        .collect();
    ClaimCheck::judged(
        WAKE_ONE,
        if runs.is_empty() {
            "no kmod wake-one run".into()
        } else {
            format!(
                "{}; for comparison: {}",
                runs.iter()
                    .map(|w| format!(
                        "kmod wake-one ({}, {} CPU(s)): {} connections, {:.3} wake-ups each, accepted {:?}, max/min {}",
                        w.clock, w.cpus, w.connections, w.wakeups_per_connection, w.accepted, share(w)
                    ))
                    .collect::<Vec<_>>()
                    .join("; "),
                others.join("; ")
            )
        },
        (!runs.is_empty()).then(|| {
            runs.iter().all(|w| {
                w.connections > 0
                    && w.queues == 4
                    && w.wakeups_per_connection <= 1.05
                    && !starved(w)
                    && w.max_min_share <= 1.2
            })
        }),
        "holds if every kmod wake-one run (both boots) had ≤ 1.05 wake-ups per connection and its busiest of 4 queues accepted at most 1.2× the connections of its idlest",
    )
}

/// Whether some queue accepted nothing (`evq_bench` writes the share as -1 then).
fn starved(w: &WakeOnePoint) -> bool {
    w.accepted.contains(&0) || w.max_min_share < 0.0
}

/// The max/min share as text: "∞" when a queue accepted nothing.
fn share(w: &WakeOnePoint) -> String {
    if starved(w) {
        "∞ (a queue accepted none)".into()
    } else {
        format!("{:.2}", w.max_min_share)
    }
}

fn figure8(vm: &VmRun) -> ClaimCheck {
    let p = &vm.figure8;
    let max_cold = p.iter().map(|x| x.cold).max().unwrap_or(0);
    let kept = |b: &str| -> Option<f64> {
        let at = |c: u64| p.iter().find(|x| x.backend == b && x.cold == c);
        Some(at(max_cold)?.replies_per_s / at(0)?.replies_per_s)
    };
    let backends = ["kmod", "kmod-ring", "epoll", "select"];
    let kept_all: Vec<(&str, Option<f64>)> = backends.iter().map(|b| (*b, kept(b))).collect();
    let errors: u64 = p.iter().map(|x| x.errors).sum();
    let short: Vec<String> = p
        .iter()
        .filter(|x| x.cold_held < x.cold)
        .map(|x| format!("{} held {}/{}", x.backend, x.cold_held, x.cold))
        .collect();
    let measured = max_cold > 0 && kept_all.iter().all(|(_, k)| k.is_some());
    let fraction = |b: &str| kept_all.iter().find(|k| k.0 == b).and_then(|k| k.1);
    ClaimCheck::judged(
        FIGURE8,
        if max_cold == 0 && !p.is_empty() {
            format!(
                "only {} point(s) without cold connections: the figure8 suite never reached the cold ones (it did not end)",
                p.len()
            )
        } else if p.is_empty() {
            "Figure 8 was not part of this run (its suite, figure8, is off by default in scripts/vm-test: `scripts/vm-test --suites …,figure8`, which the lab's quick and full sizes run)".into()
        } else {
            format!(
                "throughput kept at {max_cold} cold connections (vs 0): {}; load errors {errors}{}",
                kept_all
                    .iter()
                    .map(|(b, k)| match k {
                        Some(k) => format!("{b} {:.0}%", k * 100.0),
                        None => format!("{b} -"),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                if short.is_empty() {
                    String::new()
                } else {
                    format!("; cold connections short: {}", short.join(", "))
                }
            )
        },
        measured.then(|| {
            let kmod_low = fraction("kmod")
                .unwrap_or(0.0)
                .min(fraction("kmod-ring").unwrap_or(0.0));
            kmod_low >= 0.85
                && fraction("select").is_some_and(|s| s < kmod_low)
                && errors == 0
                && short.is_empty()
        }),
        "holds if kmod and kmod-ring each keep ≥ 85% of their no-cold reply rate at the largest cold count, select keeps less than either, the load client saw no errors and every cold connection stayed open; epoll is shown for comparison",
    )
}

fn figures(vm: &VmRun) -> Vec<Figure> {
    let methods = crate::plot::distinct(vm.figure1.iter().map(|p| p.method.as_str()));
    let is_kmod = |n: &str| n.starts_with("kmod");
    let mut out = vec![
        Figure::new(
            "kernel-figure1",
            CAPTION_FIG1,
            Chart {
                log_x: true,
                log_y: true,
                ..Chart::linear(
                    "Figure 1 in the VM: guest instructions per event".into(),
                    "descriptors",
                    "instructions per event",
                    Series::named(
                        &methods,
                        &vm.figure1,
                        |p: &Figure1Point| p.method.as_str(),
                        |p| Some((p.fds as f64, p.ns_per_event)),
                    ),
                )
            }
            .evq_where(is_kmod),
        ),
        Figure::new(
            "kernel-wait-cost",
            CAPTION_WAIT,
            Chart {
                log_x: true,
                ..Chart::linear(
                    "What the wait adds per event (loop minus no-wait loop)".into(),
                    "descriptors",
                    "instructions per event",
                    Series::named(
                        &[
                            "kmod-ring",
                            "kmod-ioctl",
                            "kmod-ioctl-event",
                            "epoll",
                            "devpoll",
                        ],
                        &vm.figure1,
                        |p: &Figure1Point| p.method.as_str(),
                        |p| wait_cost(vm, &p.method, p.fds).map(|w| (p.fds as f64, w)),
                    ),
                )
            }
            .evq_where(is_kmod),
        ),
    ];
    if !vm.figure8.is_empty() {
        out.push(Figure::new(
            "kernel-figure8",
            CAPTION_FIG8,
            Chart::linear(
                "Figure 8 in the VM: evq serve with cold connections".into(),
                "cold connections",
                "replies per guest second",
                Series::grouped(
                    &vm.figure8,
                    |p: &Figure8Point| p.backend.as_str(),
                    |p| Some((p.cold as f64, p.replies_per_s)),
                ),
            )
            .evq_where(is_kmod),
        ));
    }
    out
}

#[cfg(test)]
mod tests;
