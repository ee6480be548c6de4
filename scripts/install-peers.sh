#!/usr/bin/env bash
# Installs every package of scripts/peer-packages.txt from Debian's packages: the
# peers the lab compares evq against (servers, load tools, event libraries, the
# tools to build against them) and what the tests need (valgrind, iproute2,
# chromium). `evq lab` installs the peer rows itself when they are missing.
# Idempotent; needs root (apt). Usage: scripts/install-peers.sh [--quiet]
set -euo pipefail
here=$(dirname "$0")
mapfile -t packages < <(grep -v '^#' "$here/peer-packages.txt" | cut -d'|' -f1 | tr -d ' ' | grep -v '^$')
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
