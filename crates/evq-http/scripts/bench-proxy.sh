#!/usr/bin/env bash
# SEEDS 000's shape on one box: wrk → proxy → origin (evq serve, 1 KiB fixed
# reply, one thread). evq proxy vs nginx (worker_processes 1, upstream keepalive
# 64), wrk -t1 -c64 -d5s, alternating, two rounds.
set -uo pipefail
BIN=${EVQ_BIN:-$(dirname "$0")/../../../target/release/evq}
COMMON=$(cd "$(dirname "$0")" && pwd)/nginx-common.conf
D=${DUR:-5s}
mkdir -p /tmp/evqbench/nginx
cat > /tmp/evqbench/nginx-proxy.conf <<NGX
worker_processes 1;
daemon off;
pid /tmp/evqbench/nginx/nginx-proxy.pid;
error_log /tmp/evqbench/nginx/error-proxy.log warn;
events { worker_connections 4096; use epoll; }
http {
  include $COMMON;
  upstream origin { server 127.0.0.1:18310; keepalive 64; }
  server {
    listen 127.0.0.1:18312;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGX
"$BIN" serve --listen 127.0.0.1:18310 --threads 1 >/dev/null 2>&1 & O=$!
"$BIN" proxy --listen 127.0.0.1:18311 --origin 127.0.0.1:18310 >/dev/null 2>&1 & P=$!
nginx -c /tmp/evqbench/nginx-proxy.conf & N=$!
trap 'kill -INT $P $O 2>/dev/null; kill -QUIT $N 2>/dev/null' EXIT
sleep 1
for round in 1 2; do
  for pair in "evq proxy:18311" "nginx proxy:18312"; do
    out=$(wrk -t1 -c64 -d"$D" --latency "http://127.0.0.1:${pair##*:}/")
    printf 'round %s %-12s %12s req/s   p50 %8s   p99 %8s\n' "$round" "${pair%%:*}" \
      "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
      "$(awk '$1=="50%" {print $2}' <<<"$out")" "$(awk '$1=="99%" {print $2}' <<<"$out")"
  done
done
