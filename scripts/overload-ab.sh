#!/usr/bin/env bash
# A benchmark, not a test: evq serve and evq proxy at MULT × their capacity,
# on readiness and on io_uring completions, with --overload none and pulse.
# One thread, --work-us 400 (about 2,400 requests a second here), the server
# (or proxy) pinned to CPU 0, the origin and the load to CPU 1. Capacity is
# probed first with 32 keep-alive connections; then `evq load` opens MULT ×
# capacity new connections a second, one request each, for 3 s; clients give
# up after 0.5 s, and a refusal within 10 ms counts as fast. Prints, for the
# requests due after the 0.75 s warm-up (`steady` in `evq load --json`): served
# in time, refused (fast), timed out (while connecting).
# Usage: scripts/overload-ab.sh [path/to/evq]   (env: MULT, default 3)
set -uo pipefail
B=${1:-target/release/evq}
MULT=${MULT:-3}
PORT=18433
ORIGIN=18440
tmp=$(mktemp -d)
run() { # subject io policy
  local subject=$1 io=$2 pol=$3 op="" sp
  if [ "$subject" = proxy ]; then
    # The origin never refuses (the proxy's control is measured, not the
    # origin's); it shares the load's CPU, where it keeps up easily.
    taskset -c 1 "$B" serve --listen 127.0.0.1:$ORIGIN --reply-size 1024 --overload none >/dev/null 2>&1 &
    op=$!
    taskset -c 0 "$B" proxy --listen 127.0.0.1:$PORT --origin 127.0.0.1:$ORIGIN --work-us 400 \
      --io "$io" --overload "$pol" >"$tmp/out" 2>&1 &
  else
    taskset -c 0 "$B" serve --listen 127.0.0.1:$PORT --reply-size 1024 --work-us 400 \
      --io "$io" --overload "$pol" >"$tmp/out" 2>&1 &
  fi
  sp=$!
  sleep 0.4
  local cap rate
  cap=$(taskset -c 1 "$B" load --server 127.0.0.1 --port $PORT --connections 32 --duration 1 \
    --no-progress 2>&1 | awk '/^Reply rate/{print $7}')
  rate=$(python3 -c "print(int($MULT * ${cap:-0}))")
  taskset -c 1 "$B" load --server 127.0.0.1 --port $PORT --rate "$rate" --num-conns $((rate * 3)) \
    --num-calls 1 --timeout 0.5 --fast-refusal 0.01 --warm-up 0.75 --hog --json \
    >"$tmp/load.json" 2>/dev/null
  kill -INT $sp; wait $sp
  [ -n "$op" ] && { kill -INT "$op"; wait "$op"; }
  python3 - "$subject" "$io" "$pol" "$cap" "$rate" "$tmp/load.json" <<'EOF'
import json, sys
subject, io, pol, cap, rate, path = sys.argv[1:]
o = json.load(open(path))["steady"]["outcomes"]
print(f"{subject:5} {io:10} {pol:5}  capacity {float(cap):7.0f}/s  offered {rate}/s  "
      f"served in time {o['served_in_time']:6}  refused {o['refused']:6} "
      f"(fast {o['refused_fast']:6})  timed out {o['timed_out']:6} "
      f"(connecting {o['timed_out_connecting']})")
EOF
}
for subject in serve proxy; do
  for io in readiness completion; do
    for pol in none pulse; do
      run $subject $io $pol
    done
  done
done
rm -rf "$tmp"
