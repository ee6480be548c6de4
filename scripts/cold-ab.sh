#!/usr/bin/env bash
# A benchmark, not a test: the replies/s of `evq proxy` (or, SUBJECT=serve, of
# `evq serve`, one thread) with no idle clients and with COLD idle clients held
# from 127.0.0.2 (`evq dead`), alternating round by round so both see the same
# machine. The subject on CPU 0; the origin (`evq serve`), the idle clients and
# the closed-loop load (32 connections, 1 KiB) on CPU 1.
# Prints each round, the median of the round pairs' ratios COLD / 0 (the
# figure) and the ratio of the medians.
# ARGS adds flags to the subject (ARGS="--io completion": on io_uring
# completions).
# Usage: [SUBJECT=proxy|serve] [ARGS=...] scripts/cold-ab.sh [ROUNDS] [COLD] [path/to/evq]
set -uo pipefail
ROUNDS=${1:-6}; COLD=${2:-2000}; E=${3:-target/release/evq}
ORIGIN=18500; PROXY=18501
taskset -c 1 "$E" serve --listen 127.0.0.1:$ORIGIN --threads 1 --reply-size 1024 --idle-timeout 600 >/dev/null 2>&1 &
O=$!
trap 'kill $O 2>/dev/null' EXIT
sleep 0.3
out=$(mktemp)
for r in $(seq "$ROUNDS"); do
  for c in 0 "$COLD"; do
    # shellcheck disable=SC2086 # ARGS is a list of flags
    if [ "${SUBJECT:-proxy}" = serve ]; then
      taskset -c 0 "$E" serve ${ARGS:-} --listen 127.0.0.1:$PROXY --threads 1 --reply-size 1024 --idle-timeout 600 >/dev/null 2>&1 &
    else
      taskset -c 0 "$E" proxy ${ARGS:-} --listen 127.0.0.1:$PROXY --origin 127.0.0.1:$ORIGIN --idle-timeout 600 >/dev/null 2>&1 &
    fi
    P=$!; sleep 0.4; D=
    if [ "$c" -gt 0 ]; then
      taskset -c 1 "$E" dead --server 127.0.0.1 --port $PROXY --connections "$c" --duration 60 >/dev/null 2>&1 & D=$!
      for _ in $(seq 100); do
        held=$(ss -tn state established "( sport = :$PROXY )" | grep -c 127.0.0.2)
        [ "$held" -ge "$c" ] && break; sleep 0.1
      done
    fi
    taskset -c 1 "$E" load --server 127.0.0.1 --port $PROXY --connections 32 --duration 1 --no-progress >/dev/null 2>&1
    rate=$(taskset -c 1 "$E" load --server 127.0.0.1 --port $PROXY --connections 32 --duration 4 --no-progress 2>&1 | awk '/^Reply rate/{print $7}')
    echo "round $r cold $c replies/s $rate" | tee -a "$out"
    [ -n "$D" ] && kill "$D"
    kill -INT $P; wait $P 2>/dev/null
  done
done
python3 - "$out" "$COLD" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
rate = lambda c: [float(r[5]) for r in rows if r[3] == c]
a, b = rate("0"), rate(sys.argv[2])
pairs = [y / x for x, y in zip(a, b)]
# The pairs' median is the figure: a round measures both counts back to back,
# while the ratio of the medians mixes rounds the machine ran at other speeds.
print(f"median of round pairs {sys.argv[2]} cold / 0: {statistics.median(pairs):.3f} "
      f"(pairs {min(pairs):.2f}-{max(pairs):.2f}); ratio of medians "
      f"{statistics.median(b) / statistics.median(a):.3f}")
PY
rm -f "$out"
