#!/usr/bin/env bash
# Installs the peers the lab compares evq against, from Debian's packages:
# servers (nginx, h2o, lighttpd), load tools (httperf, wrk), event libraries
# (libev, libevent, libuv, liburing), the tools to build against them, and
# chromium (headless) for the test that opens the lab's report in a browser.
# Idempotent; needs root (apt). Usage: scripts/install-peers.sh [--quiet]
set -euo pipefail
packages=(pkg-config build-essential valgrind fonts-dejavu-core iproute2
          nginx-light h2o lighttpd httperf wrk
          libev-dev libevent-dev libuv1-dev liburing-dev chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-peers: all present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-peers: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-peers: installing ${missing[*]}"
apt-get update -qq
# Servers must not start on install (policy-rc.d 101 = "don't"): the lab starts
# them itself on loopback ports with its own configs.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for svc in nginx h2o lighttpd; do
  command -v systemctl >/dev/null 2>&1 && systemctl disable --now "$svc" >/dev/null 2>&1 || true
  pkill -x "$svc" 2>/dev/null || true
done
echo "install-peers: done"
