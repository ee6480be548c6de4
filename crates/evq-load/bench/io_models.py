#!/usr/bin/env python3
"""`evq load --io completion` beside `--io readiness` and wrk, alternating, in one run.

The figures of issue 17 for the load generator: CPU per reply of the completion
loop against the readiness loop (goal <= 0.9x), and closed-loop replies/s against
wrk at the same connections and threads (goal >= 1.0x). One `evq serve` (1 KiB
fixed reply, keep-alive) pinned to one CPU, every client pinned to another; each
client's CPU is taken from wait4 (start-up and exit included, as the lab does),
its replies from its own report. Not a test: it asserts nothing.

    python3 crates/evq-load/bench/io_models.py [--connections 100] [--seconds 5]
        [--rounds 4] [--threads 1] [--server-cpu 0] [--client-cpus 1]
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EVQ = os.path.join(ROOT, "target", "release", "evq")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(argv):
    """Runs argv; returns (stdout, cpu seconds from wait4, wall seconds)."""
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {err.decode(errors='replace')}")
    return out.decode(), ru.ru_utime + ru.ru_stime, time.monotonic() - t


def wrk_replies(text):
    m = re.search(r"(\d+) requests in", text)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--port", type=int, default=18090)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--server-io", default="readiness")
    a = ap.parse_args()
    print(f"load before: {loadavg()}")
    server = subprocess.Popen(
        ["taskset", "-c", a.server_cpu, EVQ, "serve", "--threads", "1", "--io", a.server_io,
         "--listen", f"127.0.0.1:{a.port}", "--reply-size", "1024"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    pin = ["taskset", "-c", a.client_cpus]
    evq = pin + [EVQ, "load", "--server", "127.0.0.1", "--port", str(a.port),
                 "--connections", str(a.connections), "--threads", str(a.threads),
                 "--duration", str(a.seconds), "--json", "--no-progress"]
    clients = {
        "readiness": evq + ["--io", "readiness"],
        "completion": evq + ["--io", "completion"],
        "wrk": pin + ["wrk", "-t", str(a.threads), "-c", str(a.connections),
                      "-d", f"{a.seconds}s", f"http://127.0.0.1:{a.port}/"],
    }
    rows = {k: [] for k in clients}
    try:
        for r in range(a.rounds):
            order = list(clients) if r % 2 == 0 else list(reversed(clients))
            for name in order:
                out, cpu, wall = run(clients[name])
                if name == "wrk":
                    replies, rate, enters = wrk_replies(out), wrk_replies(out) / a.seconds, None
                else:
                    v = json.loads(out)
                    replies, rate, enters = v["replies"], v["reply_rate_avg"], v["io_uring_enters"]
                rows[name].append((rate, cpu * 1e6 / max(replies, 1), enters, replies))
                extra = f" enters/reply {enters / replies:.3f}" if enters else ""
                print(f"round {r + 1} {name:10} {rate:10.0f} replies/s  {cpu * 1e6 / max(replies, 1):6.2f} us CPU/reply{extra}")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
    print(f"load after: {loadavg()}")
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in rows.items()}
    for k, (rate, cpu) in med.items():
        print(f"median {k:10} {rate:10.0f} replies/s  {cpu:6.2f} us CPU/reply")
    # Ratios per round (the A/B pairs ran next to each other), then their median.
    cpu_ratio = [c[1] / r[1] for c, r in zip(rows["completion"], rows["readiness"])]
    wrk_ratio = [c[0] / w[0] for c, w in zip(rows["completion"], rows["wrk"])]
    rd_wrk = [r[0] / w[0] for r, w in zip(rows["readiness"], rows["wrk"])]
    fmt = lambda xs: " ".join(f"{x:.3f}" for x in xs)
    print(f"CPU/reply completion/readiness per round: {fmt(cpu_ratio)}  median {statistics.median(cpu_ratio):.3f}  (goal <= 0.9)")
    print(f"replies/s completion/wrk per round:      {fmt(wrk_ratio)}  median {statistics.median(wrk_ratio):.3f}  (goal >= 1.0)")
    print(f"replies/s readiness/wrk per round:       {fmt(rd_wrk)}  median {statistics.median(rd_wrk):.3f}")


if __name__ == "__main__":
    main()
