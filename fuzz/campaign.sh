#!/usr/bin/env bash
# One fuzzing campaign: RUNS executions (default 10^7) of TARGET on
# fuzz/corpus/TARGET, niced (15), one job, one worker; crashes go to
# fuzz/artifacts/TARGET/, the log to fuzz/logs/TARGET.log. Prints one line:
# target, executions, seconds, exec/s, cov, ft, crashes.
#
#   cargo +nightly fuzz build -O            # once, from the repository root
#   fuzz/campaign.sh model                  # 10^7 executions
#   fuzz/campaign.sh capi 2000000 -max_total_time=3600
#
# Extra arguments go to libFuzzer.
set -uo pipefail
cd "$(dirname "$0")"
target=$1
runs=${2:-10000000}
shift $(( $# >= 2 ? 2 : 1 ))
bin=target/x86_64-unknown-linux-gnu/release/$target
[ -x "$bin" ] || { echo "no $bin: run 'cargo +nightly fuzz build -O' first" >&2; exit 2; }
mkdir -p "artifacts/$target" logs
log=logs/$target.log
case $target in
  request | load_framing) len=() ;;          # libFuzzer takes the corpus' longest
  *) len=(-max_len=4096) ;;
esac
before=$(ls "artifacts/$target" | wc -l)
start=$(date +%s)
# libFuzzer's -timeout is wall-clock: at nice 15 on a shared 2-core box (load
# average 41 once) a 3 ms input was starved for 30 s and reported as a hang.
nice -n 15 "$bin" "corpus/$target" -runs="$runs" "${len[@]}" -timeout=120 \
  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="artifacts/$target/" "$@" \
  >"$log" 2>&1
rc=$?
seconds=$(( $(date +%s) - start ))
crashes=$(( $(ls "artifacts/$target" | wc -l) - before ))
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
last=$(grep -E '^#[0-9]+' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*')
ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*')
execs=${execs:-$(grep -o '^#[0-9]*' <<<"$last" | tr -d '#')}
rate=$(( seconds > 0 ? ${execs:-0} / seconds : 0 ))
echo "$target executions=${execs:-?} seconds=$seconds exec/s=$rate cov=${cov:-?} ft=${ft:-?} crashes=$crashes rc=$rc"
