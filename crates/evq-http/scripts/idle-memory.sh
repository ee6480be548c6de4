#!/usr/bin/env bash
# User-space memory per idle connection of `evq serve`: RSS of the server
# process before and after N idle connections (opened from 127.0.0.2 by a
# separate Python process, so client memory is not counted), divided by N.
#   usage: idle-memory.sh [N] [backend] [extra serve flags...]
set -euo pipefail
N=${1:-10000}
BACKEND=${2:-epoll}
shift $(( $# > 2 ? 2 : $# )) || true
BIN=${EVQ_BIN:-$(dirname "$0")/../../../target/release/evq}
PORT=${PORT:-18181}
ulimit -n "$(ulimit -Hn)"
"$BIN" serve --listen 127.0.0.1:$PORT --backend "$BACKEND" "$@" >/tmp/idle-memory-serve.$$ 2>&1 &
SERVER=$!
trap 'kill -INT $SERVER 2>/dev/null || true; [ -n "${CLIENT:-}" ] && kill $CLIENT 2>/dev/null || true' EXIT
sleep 0.5
rss() { awk '/VmRSS/ {print $2}' /proc/$SERVER/status; }
curl -s -o /dev/null http://127.0.0.1:$PORT/ || true
BEFORE=$(rss)
python3 - "$N" "$PORT" <<'PY' &
import socket, sys, time
n, port = int(sys.argv[1]), int(sys.argv[2])
socks = []
for i in range(n):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", port))
    socks.append(s)
print("opened", len(socks), flush=True)
time.sleep(600)
PY
CLIENT=$!
for _ in $(seq 1 120); do
  OPEN=$(curl -s http://127.0.0.1:$PORT/.evq/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["open_conns"])' 2>/dev/null || echo 0)
  [ "$OPEN" -ge "$N" ] && break
  sleep 0.5
done
sleep 1
AFTER=$(rss)
echo "backend=$BACKEND conns=$OPEN rss_before_kib=$BEFORE rss_after_kib=$AFTER bytes_per_conn=$(( (AFTER - BEFORE) * 1024 / N ))"
