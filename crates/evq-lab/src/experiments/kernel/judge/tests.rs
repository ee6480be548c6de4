//! Each kernel-module rule on the recorded VM run, moved to hold, to differ and
//! to have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, the, verdict};
use crate::experiment::Outcome;
use crate::experiments::kernel::{Kernel, Suite};
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Records {
    recorded("kernel")
}

fn vm(r: &mut Records) -> &mut VmRun {
    match &mut r.vm {
        Outcome::Measured(v) => v,
        Outcome::Failed(why) => panic!("the recorded run failed: {why}"),
    }
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&Kernel.judge(r), claim)
}

/// `claim` on the recorded run with `change` applied.
fn after(claim: &str, change: impl FnOnce(&mut VmRun)) -> Verdict {
    let mut r = records();
    change(vm(&mut r));
    judged(&r, claim)
}

fn fig1<'a>(v: &'a mut VmRun, method: &str, fds: u64) -> &'a mut Figure1Point {
    the(&mut v.figure1, &format!("{method} at {fds}"), |p| {
        p.method == method && p.fds == fds
    })
}

/// The recorded run (`scripts/vm-test` with the lab's quick suites, Figure 8
/// included, on the 2-core machine under a load average of about 3) as it was
/// judged: every suite that ran passed and the kernel log is clean, but the
/// model test never ran in the VM (it moved to `crates/evq-fuzz`, which
/// `scripts/vm-test` does not build), and the ioctl path costs 1.34× epoll's
/// wait; Figure 8 holds (kmod 101%, kmod-ring 100%, select 93% at 900 cold).
#[test]
fn the_recorded_run_is_judged_claim_by_claim() {
    let r = records();
    let want = [
        (CONFORMANCE, Differs),
        (MODULE_SUITES, Holds),
        (CLEAN_KERNEL, Holds),
        (RING_VS_EPOLL, Holds),
        (IOCTL_VS_EPOLL, Differs),
        (FLAT, Holds),
        (DEVPOLL_VS_POLL, Holds),
        (WAKE_ONE, Holds),
        (FIGURE8, Holds),
    ];
    assert_eq!(want.len(), CLAIMS.len());
    for (claim, verdict) in want {
        assert_eq!(judged(&r, claim), verdict, "{claim}");
    }
}

/// `claim` after `change`, on the recorded run with clean torture ledgers and
/// the model test in place: the recorded run has none, because the model moved
/// from `crates/evq/tests` to `crates/evq-fuzz` and `scripts/vm-test` builds
/// only evq's and evq-compat's tests.
fn after_clean_torture(claim: &str, change: impl FnOnce(&mut VmRun)) -> Verdict {
    after(claim, |v| {
        if !v.suites.iter().any(|s| s.name == "rust_evq-model") {
            v.suites.push(Suite {
                name: "rust_evq-model".into(),
                rc: Some(0),
                seconds: Some(1),
            });
        }
        for c in &mut v.torture {
            c.lost = 0;
            c.wakeups_lost = 0;
            c.failures.clear();
        }
        the(&mut v.suites, "torture", |s| s.name == "evq_torture").rc = Some(0);
        change(v);
    })
}

/// `claim` after `change`, on the recorded run as if its benchmark boot had
/// ended in time.
fn after_bench_boot_ended(claim: &str, change: impl FnOnce(&mut VmRun)) -> Verdict {
    after(claim, |v| {
        v.problems
            .retain(|p| !p.starts_with("console-bench.log") && !p.starts_with("figure8"));
        change(v);
    })
}

#[test]
fn no_vm_run_measures_nothing() {
    let mut r = records();
    r.vm = Outcome::Failed("qemu-system-x86_64 not found".into());
    for claim in CLAIMS {
        assert_eq!(judged(&r, claim), NotMeasured, "{claim}");
    }
}

#[test]
fn conformance_needs_every_suite_to_run_and_pass() {
    assert_eq!(
        after_clean_torture(CONFORMANCE, |_| {}),
        Holds,
        "clean ledgers"
    );
    assert_eq!(
        after_clean_torture(CONFORMANCE, |v| v
            .suites
            .retain(|s| s.name != "rust_evq-conformance")),
        Differs,
        "conformance never ran"
    );
    assert_eq!(
        after_clean_torture(CONFORMANCE, |v| {
            the(&mut v.suites, "capi kmod-ring", |s| {
                s.name == "capi_api_test_kmod-ring"
            })
            .rc = Some(1)
        }),
        Differs,
        "the C API failed"
    );
    assert_eq!(
        after_clean_torture(CONFORMANCE, |v| v.harness[0].failed = 1),
        Differs,
        "a test failed"
    );
    assert_eq!(
        after_clean_torture(CONFORMANCE, |v| v.harness[0].ignored = 1),
        Differs,
        "a test was ignored"
    );
    assert_eq!(
        after_clean_torture(CONFORMANCE, |v| v.torture[0].lost = 1),
        Differs,
        "torture lost an event"
    );
    assert_eq!(
        after_clean_torture(CONFORMANCE, |v| v.torture.clear()),
        Differs,
        "no torture ledger"
    );
    assert_eq!(
        after_clean_torture(CONFORMANCE, |v| v.suites.retain(|s| !s
            .name
            .starts_with("rust_")
            && !s.name.starts_with("capi_")
            && s.name != "evq_torture")),
        NotMeasured
    );
}

#[test]
fn module_suites_need_a_clean_million_call_fuzz() {
    assert_eq!(
        after(MODULE_SUITES, |v| v.fuzz[0].unexpected_errors = 1),
        Differs
    );
    assert_eq!(after(MODULE_SUITES, |v| v.fuzz[0].calls = 999_999), Differs);
    assert_eq!(
        after(MODULE_SUITES, |v| {
            the(&mut v.suites, "devpoll suite", |s| {
                s.name == "devpoll_semantics"
            })
            .rc = None
        }),
        Differs
    );
    assert_eq!(after(MODULE_SUITES, |v| v.fuzz.clear()), NotMeasured);
}

#[test]
fn one_bad_kernel_line_or_a_short_load_unload_differs() {
    assert_eq!(
        after_bench_boot_ended(CLEAN_KERNEL, |_| {}),
        Holds,
        "ended in time"
    );
    assert_eq!(
        after_bench_boot_ended(CLEAN_KERNEL, |v| v
            .kernel_log_problems
            .push("WARNING: CPU: 0 PID: 1 at kernel/evq".into())),
        Differs
    );
    assert_eq!(
        after_bench_boot_ended(CLEAN_KERNEL, |v| v.load_unload_cycles = Some(99)),
        Differs
    );
    assert_eq!(
        after_bench_boot_ended(CLEAN_KERNEL, |v| v
            .problems
            .push("console-tests.log: missing marker EVQ-RMMOD-OK".into())),
        Differs
    );
    assert_eq!(
        after_bench_boot_ended(CLEAN_KERNEL, |v| v.load_unload_cycles = None),
        NotMeasured
    );
}

/// Sets `method`'s wait cost at `fds` to `factor` × epoll's.
fn wait_at(v: &mut VmRun, method: &str, fds: u64, factor: f64) {
    let none = fig1(v, "none", fds).ns_per_event;
    let epoll = fig1(v, "epoll", fds).ns_per_event - none;
    fig1(v, method, fds).ns_per_event = none + factor * epoll;
}

#[test]
fn the_paths_against_epoll_follow_their_bounds() {
    for (claim, method, bound) in [
        (RING_VS_EPOLL, "kmod-ring", 0.9),
        (IOCTL_VS_EPOLL, "kmod-ioctl", 1.0),
    ] {
        for fds in [1000, 10_000] {
            assert_eq!(
                after(claim, |v| wait_at(v, method, fds, bound + 0.01)),
                Differs,
                "{method} at {fds}"
            );
        }
        assert_eq!(
            after(claim, |v| {
                wait_at(v, method, 1000, bound - 0.01);
                wait_at(v, method, 10_000, bound - 0.01);
            }),
            Holds,
            "{method} just inside"
        );
        assert_eq!(
            after(claim, |v| v.figure1.retain(|p| p.method != "epoll")),
            NotMeasured
        );
    }
}

#[test]
fn growth_beyond_one_and_a_half_is_not_flat() {
    for method in ["kmod-ring", "kmod-ioctl"] {
        assert_eq!(
            after(FLAT, |v| {
                let none = fig1(v, "none", 10_000).ns_per_event;
                let base = fig1(v, method, 1).ns_per_event - fig1(v, "none", 1).ns_per_event;
                fig1(v, method, 10_000).ns_per_event = none + 1.6 * base;
            }),
            Differs,
            "{method}"
        );
    }
    assert_eq!(
        after(FLAT, |v| v.figure1.retain(|p| p.fds != 1)),
        NotMeasured
    );
}

#[test]
fn devpoll_must_beat_poll_fifteen_times_at_4000() {
    assert_eq!(
        after(DEVPOLL_VS_POLL, |v| {
            let d = fig1(v, "devpoll", 4000).ns_per_event;
            fig1(v, "poll", 4000).ns_per_event = 14.9 * d;
        }),
        Differs
    );
    assert_eq!(
        after(DEVPOLL_VS_POLL, |v| v.figure1.retain(|p| p.fds != 4000)),
        NotMeasured
    );
}

#[test]
fn wake_one_needs_one_wakeup_and_an_even_spread_in_every_run() {
    fn kmod(v: &mut VmRun) -> &mut WakeOnePoint {
        the(&mut v.wakeone, "kmod wake-one run", |w| {
            w.method == "kmod-wakeone"
        })
    }
    assert_eq!(
        after(WAKE_ONE, |v| kmod(v).wakeups_per_connection = 1.06),
        Differs
    );
    assert_eq!(after(WAKE_ONE, |v| kmod(v).max_min_share = 1.21), Differs);
    assert_eq!(
        after(WAKE_ONE, |v| {
            // evq_bench writes -1 when a queue accepted none: not an even spread.
            kmod(v).accepted[3] = 0;
            kmod(v).max_min_share = -1.0;
        }),
        Differs,
        "a starved queue"
    );
    assert_eq!(
        after(WAKE_ONE, |v| v
            .wakeone
            .retain(|w| w.method != "kmod-wakeone")),
        NotMeasured
    );
}

/// A whole figure built from the recorded run's first point, kmod and epoll
/// keeping 95% at 900 cold connections and select 60%, every cold connection
/// held.
fn after_figure8(change: impl FnOnce(&mut VmRun)) -> Verdict {
    after(FIGURE8, |v| {
        let template = v.figure8[0].clone();
        v.figure8 = ["kmod", "kmod-ring", "epoll", "select"]
            .into_iter()
            .flat_map(|b| {
                let kept = if b == "select" { 0.6 } else { 0.95 };
                [(0, 1.0), (900, kept)].map(|(cold, f)| Figure8Point {
                    backend: b.into(),
                    cold,
                    cold_held: cold,
                    replies_per_s: f * template.replies_per_s,
                    ..template.clone()
                })
            })
            .collect();
        change(v);
    })
}

fn fig8<'a>(v: &'a mut VmRun, backend: &str, cold: u64) -> &'a mut Figure8Point {
    the(&mut v.figure8, backend, |p| {
        p.backend == backend && p.cold == cold
    })
}

#[test]
fn figure8_needs_kmod_flat_and_select_below_it() {
    assert_eq!(after_figure8(|_| {}), Holds, "the built figure");
    for b in ["kmod", "kmod-ring"] {
        assert_eq!(
            after_figure8(|v| {
                let base = fig8(v, b, 0).replies_per_s;
                fig8(v, b, 900).replies_per_s = 0.84 * base;
            }),
            Differs,
            "{b} fell"
        );
    }
    assert_eq!(
        after_figure8(|v| {
            let base = fig8(v, "select", 0).replies_per_s;
            fig8(v, "select", 900).replies_per_s = base;
        }),
        Differs,
        "select kept everything"
    );
    assert_eq!(after_figure8(|v| v.figure8[0].errors = 1), Differs);
    assert_eq!(
        after_figure8(|v| fig8(v, "epoll", 900).cold_held = 899),
        Differs
    );
    assert_eq!(
        after_figure8(|v| v.figure8.retain(|p| p.backend != "select")),
        NotMeasured
    );
    assert_eq!(after_figure8(|v| v.figure8.clear()), NotMeasured);
}
