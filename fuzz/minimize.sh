#!/usr/bin/env bash
# Shrinks fuzz/corpus/TARGET to what the repository keeps: the seed-* files
# (the tests' inputs, written by `cargo run -p evq-fuzz --bin evq-fuzz-seeds`)
# plus a greedy set cover of the rest over *edges* (-use_counters=0: hit
# counts are not features here), so a campaign's thousands of inputs become a
# few hundred that reach every edge the campaign reached. Prints the counts.
#
#   cargo +nightly fuzz build -O            # once, from the repository root
#   fuzz/minimize.sh model
#
# `cargo +nightly fuzz cmin TARGET` keeps every input with a new counter
# bucket, which is more thorough and several times larger; use it for a corpus
# you keep outside the repository.
set -euo pipefail
cd "$(dirname "$0")"
target=$1
bin=target/x86_64-unknown-linux-gnu/release/$target
[ -x "$bin" ] || { echo "no $bin: run 'cargo +nightly fuzz build -O' first" >&2; exit 2; }
case $target in
  request | load_framing) len=(-max_len=1048576) ;;
  *) len=(-max_len=4096) ;;
esac
corpus=corpus/$target
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/kept" "$work/rest"
before=$(ls "$corpus" | wc -l)
for f in "$corpus"/*; do
  case $(basename "$f") in
    seed-*) cp "$f" "$work/kept/" ;;
    *) cp "$f" "$work/rest/" ;;
  esac
done
nice -n 15 "$bin" -merge=1 -set_cover_merge=1 -use_counters=0 "${len[@]}" -timeout=30 \
  -rss_limit_mb=4096 "$work/kept" "$work/rest" >"$work/log" 2>&1 ||
  { tail -20 "$work/log" >&2; exit 1; }
rm -rf "$corpus"
cp -r "$work/kept" "$corpus"
echo "$target: $before inputs -> $(ls "$corpus" | wc -l)"
