#!/usr/bin/env bash
# A measurement, not a test: anonymous resident memory per idle connection of
# `evq serve` (or, SUBJECT=proxy, of `evq proxy` in front of an `evq serve`
# origin), with any flags (e.g. --io completion): the subject's Anonymous total
# from /proc/PID/smaps_rollup before and after N idle connections from
# 127.0.0.2 (`evq dead`) are held.
# Usage: [SUBJECT=serve|proxy] scripts/idle-memory.sh N [flags...]
#        (env: EVQ=path/to/evq PORT)
set -uo pipefail
N=${1:?usage: scripts/idle-memory.sh N [serve flags...]}; shift
E=${EVQ:-target/release/evq}; PORT=${PORT:-18123}
O=
if [ "${SUBJECT:-serve}" = proxy ]; then
  "$E" serve --listen 127.0.0.1:$((PORT + 1)) --threads 1 >/dev/null 2>&1 &
  O=$!
  "$E" proxy --listen 127.0.0.1:$PORT --origin 127.0.0.1:$((PORT + 1)) --idle-timeout 600 "$@" >/dev/null 2>&1 &
else
  "$E" serve --listen 127.0.0.1:$PORT --threads 1 --idle-timeout 600 --header-timeout 600 "$@" >/dev/null 2>&1 &
fi
S=$!
trap 'kill -INT $S ${O:-} 2>/dev/null; [ -n "${D:-}" ] && kill $D 2>/dev/null' EXIT
sleep 0.5
curl -s -o /dev/null "http://127.0.0.1:$PORT/" || true
anon() { awk '/^Anonymous/{print $2}' "/proc/$S/smaps_rollup"; }
before=$(anon)
"$E" dead --server 127.0.0.1 --port $PORT --connections "$N" --duration 60 >/dev/null 2>&1 &
D=$!
held=0
for _ in $(seq 200); do
  held=$(ss -tn state established "( sport = :$PORT )" | grep -c 127.0.0.2)
  [ "$held" -ge "$N" ] && break; sleep 0.2
done
sleep 0.5
after=$(anon)
echo "held $held; anonymous ${before} kB -> ${after} kB; $(( (after - before) * 1024 / (held > 0 ? held : 1) )) B per idle connection ($*)"
