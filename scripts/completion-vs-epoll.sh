#!/usr/bin/env bash
# A benchmark, not a test: `evq serve` on epoll beside `evq serve --io completion`,
# 1 KiB fixed reply, keep-alive, closed-loop `evq load`, server pinned to CPU 0 and
# load to CPU 1, alternating rounds so both see the same machine; then system calls
# per request from `strace -c -f` on each server under one load run.
# Usage: scripts/completion-vs-epoll.sh [path/to/evq]   (env: ROUNDS DUR CONNS PORT)
set -uo pipefail
B=${1:-target/release/evq}
PORT=${PORT:-18432}; CONNS=${CONNS:-50}; DUR=${DUR:-3}; ROUNDS=${ROUNDS:-5}
tmp=$(mktemp -d)
serve() { exec taskset -c 0 "$B" serve --listen 127.0.0.1:$PORT --backend epoll --reply-size 1024 "$@"; }
load() { taskset -c 1 "$B" load --server 127.0.0.1 --port $PORT --connections $CONNS --duration $DUR --no-progress; }
declare -A sum=([readiness]=0 [completion]=0)
for r in $(seq 1 "$ROUNDS"); do
  for io in readiness completion; do
    serve --io $io >"$tmp/srv" 2>&1 & sp=$!
    sleep 0.5
    rate=$(load 2>&1 | awk '/^Reply rate/{print $7}')
    kill -INT $sp; wait $sp
    echo "round $r  io $io  replies/s $rate"
    sum[$io]=$(echo "${sum[$io]} + ${rate:-0}" | bc)
  done
done
echo "completion / epoll (sum of rounds): $(echo "scale=3; ${sum[completion]} / ${sum[readiness]}" | bc)"
for io in readiness completion; do
  taskset -c 0 strace -c -f -o "$tmp/strace" "$B" serve --listen 127.0.0.1:$PORT --backend epoll --io $io >"$tmp/srv" 2>&1 & sp=$!
  sleep 1
  load >"$tmp/load" 2>&1
  kill -INT "$(pgrep -P $sp)"; wait $sp
  requests=$(awk '/^Total:/{print $5}' "$tmp/load")
  calls=$(awk '$NF=="total"{print $(NF-2)}' "$tmp/strace")
  echo "io $io  requests $requests  system calls $calls  per request $(echo "scale=3; $calls / $requests" | bc)"
done
rm -rf "$tmp"
