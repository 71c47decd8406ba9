#!/usr/bin/env bash
# Checks make demo's refusal excerpt (issue 13): the old pipeline
# `grep | grep -E | head -8` under pipefail died with SIGPIPE (exit 141) in
# about one run in six once grep's output passed 4 KiB; demo.sh --refusals
# must print the same eight lines and succeed every time. Runs on the real
# replay output, repeated to make the old race likelier.
# usage: scripts/demo_test.sh [RUNS]   (default 20; needs bin/warden: make build)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The spec's fixtures, Warden's corrected copies (test/conformance) in place
# of the ones that disagree with the runtime, as make test and the demo do.
fixtures=()
for f in testdata/macp/conformance/*.json; do
  if [ -f "test/conformance/$(basename "$f")" ]; then fixtures+=("test/conformance/$(basename "$f")"); else fixtures+=("$f"); fi
done
bin/warden replay "${fixtures[@]}" test/attacks/macp/*.json >"$tmp/one.txt"
for _ in 1 2 3 4; do cat "$tmp/one.txt"; done >"$tmp/replay.txt"

old_failures=0
for _ in $(seq "$RUNS"); do
  if ! (grep ' reject ' "$tmp/replay.txt" | grep -E 'forged|hijack|spoof|reoffer|positive_commit' | head -8 | sed 's/^/    /') >"$tmp/old.txt"; then
    old_failures=$((old_failures + 1))
  fi
done
want=$(grep ' reject ' "$tmp/replay.txt" | grep -E 'forged|hijack|spoof|reoffer|positive_commit' | sed -n '1,8s/^/    /p')
new_failures=0
for _ in $(seq "$RUNS"); do
  if ! got=$(bash scripts/demo.sh --refusals "$tmp/replay.txt"); then
    new_failures=$((new_failures + 1))
  elif [ "$got" != "$want" ]; then
    echo "demo_test: demo.sh --refusals printed something else:"; echo "$got"; exit 1
  fi
done
echo "demo_test: old pipeline failed $old_failures of $RUNS runs; demo.sh --refusals failed $new_failures of $RUNS (8 lines each)"
[ "$new_failures" -eq 0 ] && [ "$(printf '%s\n' "$want" | wc -l)" -eq 8 ]
