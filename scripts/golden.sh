#!/usr/bin/env bash
# Writes the outputs of every scenario in scenarios/ (events and snapshots) and of
# `fairsched hdrf check` on the examples and the conformance vectors into DIR, one file each,
# so that a refactoring can show them byte-identical: run it before and after, then
# `diff -r BEFORE AFTER`. Usage: scripts/golden.sh DIR [path/to/fairsched]
set -euo pipefail
out=${1:?usage: scripts/golden.sh DIR [fairsched binary]}
bin=${2:-target/debug/fairsched}
mkdir -p "$out"
for f in scenarios/*.json scenarios/yt/*.json; do
  name=$(echo "$f" | tr / _)
  "$bin" scenario "$f" > "$out/$name.out" 2>&1 || echo "exit $?" >> "$out/$name.out"
done
for f in examples/hdrf/*.json ../shared/conformance/vector_hdrf_cases.json; do
  [ -e "$f" ] || continue
  name=$(echo "$f" | tr / _)
  "$bin" hdrf check "$f" > "$out/hdrf_$name.out" 2>&1 || echo "exit $?" >> "$out/hdrf_$name.out"
done
echo "$(ls "$out" | wc -l) outputs in $out"
