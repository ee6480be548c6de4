#!/usr/bin/env bash
# Side-by-side: evq serve --threads 1 vs nginx (worker_processes 1) vs h2o
# (num-threads 1), same 1 KiB reply, wrk -t1 -c64 -d5s, one run after another.
# Writes its configs and the 1 KiB file under /tmp/evqbench.
set -uo pipefail
BIN=${EVQ_BIN:-$(dirname "$0")/../../../target/release/evq}
COMMON=$(cd "$(dirname "$0")" && pwd)/nginx-common.conf
D=${DUR:-5s}
ulimit -n "$(ulimit -Hn)"
mkdir -p /tmp/evqbench/root /tmp/evqbench/nginx
python3 - "$COMMON" <<'PY'
import sys
common = sys.argv[1]
body = "".join(("\n" if i % 64 == 63 else chr(ord('a') + i % 26)) for i in range(1024))
open("/tmp/evqbench/root/1k.txt", "w").write(body)
esc = body.replace("\n", "\\n")
open("/tmp/evqbench/nginx/nginx.conf", "w").write(f"""
worker_processes 1;
daemon off;
pid /tmp/evqbench/nginx/nginx.pid;
error_log /tmp/evqbench/nginx/error.log warn;
events {{ worker_connections 4096; use epoll; }}
http {{
  include {common};
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  default_type text/plain;
  server {{
    listen 127.0.0.1:18290;
    root /tmp/evqbench/root;
    location = / {{ return 200 "{esc}"; }}
  }}
  server {{
    # The same, with the open-file cache evq has (nginx's is off by default).
    listen 127.0.0.1:18291;
    root /tmp/evqbench/root;
    open_file_cache max=64 inactive=20s;
    open_file_cache_valid 1s;
  }}
}}
""")
open("/tmp/evqbench/h2o.conf", "w").write("""num-threads: 1
error-log: /tmp/evqbench/h2o-error.log
listen:
  host: 127.0.0.1
  port: 18292
hosts:
  default:
    paths:
      /:
        file.dir: /tmp/evqbench/root
""")
PY
"$BIN" serve --listen 127.0.0.1:18280 --threads 1 --reply-size 1024 >/dev/null 2>&1 & E1=$!
"$BIN" serve --listen 127.0.0.1:18281 --threads 1 --root /tmp/evqbench/root >/dev/null 2>&1 & E2=$!
nginx -c /tmp/evqbench/nginx/nginx.conf & N=$!
h2o -c /tmp/evqbench/h2o.conf >/dev/null 2>&1 & H=$!
trap 'kill -INT $E1 $E2 2>/dev/null; kill -QUIT $N 2>/dev/null; kill -TERM $H 2>/dev/null' EXIT
sleep 1
run() {
  local name=$1 url=$2
  curl -s -o /dev/null "$url"
  local out
  out=$(wrk -t1 -c64 -d"$D" --latency "$url")
  printf '%-28s %12s req/s   p50 %8s   p99 %8s   bytes/resp %s\n' "$name" \
    "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
    "$(awk '$1=="50%" {print $2}' <<<"$out")" \
    "$(awk '$1=="99%" {print $2}' <<<"$out")" \
    "$(curl -s "$url" | wc -c)"
}
for round in 1 2; do
  echo "round $round"
  run "evq fixed 1KiB"        http://127.0.0.1:18280/
  run "nginx return 1KiB"     http://127.0.0.1:18290/
  run "evq --root 1k.txt"     http://127.0.0.1:18281/1k.txt
  run "nginx static 1k.txt"   http://127.0.0.1:18290/1k.txt
  run "nginx static+ofc 1k.txt" http://127.0.0.1:18291/1k.txt
  run "h2o static 1k.txt"     http://127.0.0.1:18292/1k.txt
done
