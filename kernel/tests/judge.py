#!/usr/bin/env python3
"""judge.py - reads the vm-test serial console log, decides pass or fail, and
writes the results as JSON files for the lab (and people) to read.

Fails on: a suite that did not end with rc=0 (or never ended), a missing
boot/insmod/rmmod/done marker, load/unload short of 100 cycles, and any kernel
log line that says BUG, WARNING, Oops, lockdep, KASAN, UBSAN and the like.
"""
import argparse
import json
import os
import re
import sys

# Kernel log lines that fail a run, wherever they appear.
KERNEL_BAD = re.compile(
    r"BUG[: ]|WARNING:|Oops|lockdep|possible circular locking|possible recursive locking|"
    r"KASAN|UBSAN|general protection fault|Call Trace:|list_add corruption|list_del corruption|"
    r"still has objects|Objects remaining|soft lockup|hard LOCKUP|rcu_sched self-detected stall|"
    r"rcu: INFO|blocked for more than|Kernel panic|refcount_t:|kfence|KFENCE|BUG kmalloc"
)
SUITE_TESTS = {
    "semantics": ["evq_semantics"],
    "devpoll": ["devpoll_semantics"],
    "fuzz": ["evq_fuzz"],
    "bench": ["evq_bench"],
    "loadunload": ["load_unload_100"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--suites", required=True)
    ap.add_argument("--qemu-rc", type=int, default=0)
    ap.add_argument("--kernel", default="")
    ap.add_argument("--elapsed", type=int, default=0)
    a = ap.parse_args()

    # SeaBIOS and the console clear the screen with escape sequences: strip them.
    escapes = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[A-Za-z]")
    with open(a.log, errors="replace") as f:
        lines = [escapes.sub("", l.rstrip("\n")) for l in f]

    problems = []
    markers = {m for l in lines for m in re.findall(r"EVQ-[A-Z0-9-]+", l)}
    for m in ["EVQ-VM-BOOTED", "EVQ-INSMOD-OK", "EVQ-RMMOD-OK", "EVQ-VM-DONE", "EVQ-DMESG-END"]:
        if m not in markers:
            problems.append(f"missing marker {m}")

    begun, ended = [], {}
    for l in lines:
        if l.startswith("EVQ-TEST-BEGIN "):
            begun.append(l.split()[1])
        m = re.match(r"EVQ-TEST-END (\S+) rc=(-?\d+) seconds=(\d+)", l)
        if m:
            ended[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    suites = [s for s in a.suites.split(",") if s]
    expected = [t for s in suites for t in SUITE_TESTS.get(s, [])]
    if "rust" in suites and not any(n.startswith("rust_") for n in begun):
        problems.append("suite rust: no Rust test binary ran")
    for t in expected:
        if t not in begun:
            problems.append(f"{t}: never started")
    results = []
    for t in begun:
        rc, secs = ended.get(t, (None, None))
        ok = rc == 0
        results.append({"name": t, "rc": rc, "seconds": secs, "ok": ok})
        if rc is None:
            problems.append(f"{t}: started but never ended (crash or timeout)")
        elif rc != 0:
            problems.append(f"{t}: exit status {rc}")

    # TAP lines from the C suites and test-harness lines from Rust.
    not_ok = [l for l in lines if l.startswith("not ok ") or re.match(r"^test .* \.\.\. FAILED$", l)]
    problems += [f"failed case: {l}" for l in not_ok]
    rust_counts = [l for l in lines if l.startswith("test result: ")]

    cycles = None
    for l in lines:
        m = re.match(r"EVQ-LOADUNLOAD cycles=(\d+)", l)
        if m:
            cycles = int(m.group(1))
    if "loadunload" in suites and cycles != 100:
        problems.append(f"load/unload: {cycles} of 100 cycles")

    # The kernel log: the dmesg dump, plus anything the console printed outside
    # test output (an oops prints there even when dmesg never gets dumped).
    kernel_lines, in_dmesg = [], False
    for l in lines:
        if l == "EVQ-DMESG-BEGIN":
            in_dmesg = True
            continue
        if l == "EVQ-DMESG-END":
            in_dmesg = False
            continue
        if in_dmesg or re.match(r"^\[\s*\d+\.\d+\]", l):
            kernel_lines.append(l)
    bad = [l for l in kernel_lines if KERNEL_BAD.search(l)]
    problems += [f"kernel log: {l}" for l in bad[:20]]

    records = {}
    for l in lines:
        if l.startswith("EVQ-JSON "):
            try:
                r = json.loads(l[len("EVQ-JSON "):])
            except ValueError:
                problems.append(f"malformed JSON line: {l[:120]}")
                continue
            records.setdefault(r.get("kind", "misc"), []).append(r)

    os.makedirs(a.out, exist_ok=True)
    for kind, recs in records.items():
        with open(os.path.join(a.out, f"{kind}.json"), "w") as f:
            json.dump(recs, f, indent=1)
    summary = {
        "kernel": a.kernel,
        "qemu_exit": a.qemu_rc,
        "elapsed_seconds": a.elapsed,
        "suites": suites,
        "tests": results,
        "rust_results": rust_counts,
        "load_unload_cycles": cycles,
        "kernel_log_problems": bad,
        "kernel_log_lines": len(kernel_lines),
        "problems": problems,
        "passed": not problems,
        "json_files": sorted(f"{k}.json" for k in records),
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)

    print(f"guest kernel {a.kernel}; {a.elapsed} s; qemu exit {a.qemu_rc}")
    for r in results:
        print(f"  {'PASS' if r['ok'] else 'FAIL'}  {r['name']:<28} {r['seconds'] if r['seconds'] is not None else '?':>5} s")
    for l in rust_counts:
        print(f"        {l}")
    if cycles is not None:
        print(f"  load/unload cycles: {cycles}")
    print(f"  kernel log: {len(kernel_lines)} lines, {len(bad)} bad")
    print(f"  JSON: {a.out}/ ({', '.join(summary['json_files']) or 'no records'}, summary.json)")
    if problems:
        print("vm-test FAILED:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("vm-test PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
