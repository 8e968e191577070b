#!/usr/bin/env bash
# Regenerates the charts the README shows, by running the quickstart itself:
#   scripts/readme-charts.sh
# They land in examples/quickstart/ (the run folder's charts/, copied).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
cargo run --quiet -- run plans/quickstart.toml --results-dir "$out" --quiet >/dev/null
run=$(ls -d "$out"/batch/batch_* | tail -1)
mkdir -p examples/quickstart
for f in throughput_vs_ttft.svg ttft_cdf_sim.svg; do
  cp "$run/charts/$f" "examples/quickstart/$f"
done
ls -l examples/quickstart
rm -rf "$out"
