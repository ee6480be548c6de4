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
    "figure8": ["figure8"],
    "loadunload": ["load_unload_100"],
    "wakeone": ["evq_bench_wakeone"],
    "rust": ["capi_api_test_kmod", "capi_api_test_kmod-ring", "evq_torture"],
}


def judge_boot(log, suites, qemu_rc):
    """Problems, test results, records and counts of one boot's console log."""
    # SeaBIOS and the console clear the screen with escape sequences: strip them.
    escapes = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[A-Za-z]")
    with open(log, errors="replace") as f:
        lines = [escapes.sub("", l.rstrip("\n")) for l in f]
    name = os.path.basename(log)
    problems = []
    markers = {m for l in lines for m in re.findall(r"EVQ-[A-Z0-9-]+", l)}
    for m in ["EVQ-VM-BOOTED", "EVQ-INSMOD-OK", "EVQ-RMMOD-OK", "EVQ-VM-DONE", "EVQ-DMESG-END"]:
        if m not in markers:
            problems.append(f"{name}: missing marker {m}")
    if qemu_rc != 0:
        problems.append(f"{name}: qemu exit status {qemu_rc} (124: the time limit)")

    begun, ended = [], {}
    for l in lines:
        m = re.search(r"EVQ-TEST-BEGIN (\S+)", l)
        if m:
            begun.append(m.group(1))
        m = re.search(r"EVQ-TEST-END (\S+) rc=(-?\d+) seconds=(\d+)", l)
        if m:
            ended[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    expected = [t for s in suites for t in SUITE_TESTS.get(s, [])]
    if "rust" in suites and not any(n.startswith("rust_") for n in begun):
        problems.append("suite rust: no Rust test binary ran")
    for t in expected:
        if t not in begun:
            problems.append(f"{t}: never started")
    results = []
    for t in begun:
        rc, secs = ended.get(t, (None, None))
        results.append({"name": t, "rc": rc, "seconds": secs, "ok": rc == 0, "boot": name})
        if rc is None:
            problems.append(f"{t}: started but never ended (crash or timeout)")
        elif rc != 0:
            problems.append(f"{t}: exit status {rc}")

    # TAP lines from the C suites and test-harness lines from Rust.
    not_ok = [l for l in lines if l.startswith("not ok ") or re.match(r"^test .* \.\.\. FAILED$", l)]
    problems += [f"failed case: {l}" for l in not_ok]
    rust_counts = [l for l in lines if l.startswith("test result: ")]
    # Each harness summary, attributed to the suite that printed it: the lab's
    # conformance claim counts passed, failed and ignored tests per binary.
    harness, current = [], None
    for l in lines:
        m = re.search(r"EVQ-TEST-BEGIN (\S+)", l)
        if m:
            current = m.group(1)
        m = re.match(r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored", l)
        if m and current:
            harness.append({
                "suite": current, "ok": m.group(1) == "ok", "passed": int(m.group(2)),
                "failed": int(m.group(3)), "ignored": int(m.group(4)),
            })
            if int(m.group(4)):
                problems.append(f"{current}: {m.group(4)} test(s) ignored")

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
    problems += [f"kernel log ({name}): {l}" for l in bad[:20]]

    records = {}
    for l in lines:
        i = l.find("EVQ-JSON ")
        if i >= 0:
            try:
                r = json.loads(l[i + len("EVQ-JSON "):])
            except ValueError:
                problems.append(f"malformed JSON line: {l[:120]}")
                continue
            records.setdefault(r.get("kind", "misc"), []).append(r)
    return {
        "problems": problems, "results": results, "rust": rust_counts, "harness": harness,
        "cycles": cycles,
        "bad": bad, "kernel_lines": len(kernel_lines), "records": records,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--boot", action="append", required=True, help="LOG:SUITES:QEMU_RC")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="")
    ap.add_argument("--elapsed", type=int, default=0)
    a = ap.parse_args()

    problems, results, rust, harness, bad, records = [], [], [], [], [], {}
    cycles, kernel_lines, boots = None, 0, []
    for spec in a.boot:
        log, suites, rc = spec.rsplit(":", 2)
        suites = [s for s in suites.split(",") if s]
        j = judge_boot(log, suites, int(rc))
        boots.append({"log": os.path.basename(log), "suites": suites, "qemu_exit": int(rc)})
        problems += j["problems"]
        results += j["results"]
        rust += j["rust"]
        harness += j["harness"]
        bad += j["bad"]
        kernel_lines += j["kernel_lines"]
        cycles = j["cycles"] if j["cycles"] is not None else cycles
        for k, v in j["records"].items():
            records.setdefault(k, []).extend(v)

    os.makedirs(a.out, exist_ok=True)
    for kind, recs in records.items():
        with open(os.path.join(a.out, f"{kind}.json"), "w") as f:
            json.dump(recs, f, indent=1)
    summary = {
        "kernel": a.kernel,
        "elapsed_seconds": a.elapsed,
        "boots": boots,
        "tests": results,
        "rust_results": rust,
        "rust_harness": harness,
        "load_unload_cycles": cycles,
        "kernel_log_problems": bad,
        "kernel_log_lines": kernel_lines,
        "problems": problems,
        "passed": not problems,
        "json_files": sorted(f"{k}.json" for k in records),
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)

    print(f"guest kernel {a.kernel}; {a.elapsed} s; {len(boots)} boot(s)")
    for r in results:
        secs = r["seconds"] if r["seconds"] is not None else "?"
        print(f"  {'PASS' if r['ok'] else 'FAIL'}  {r['name']:<34} {secs:>5} s")
    for l in rust:
        print(f"        {l}")
    if cycles is not None:
        print(f"  load/unload cycles: {cycles}")
    print(f"  kernel log: {kernel_lines} lines, {len(bad)} bad")
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
