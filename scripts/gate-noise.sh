#!/usr/bin/env bash
# The nightly gate against its own noise: one baseline of the quickstart plan shrunk to
# 24 prompts a case, then RUNS unchanged reruns and PLANTED reruns with the simulator's
# ITL raised 30% (2 ms -> 2.6 ms: TPOT +30%), each compared with the pinned baseline.
# Prints one row per rerun: its verdict and the regressions it reported. While it runs,
# one busy loop keeps a core occupied, as other work on a shared machine would.
#
#   scripts/gate-noise.sh                      # 20 unchanged + 5 planted
#   RUNS=5 PLANTED=2 BENCHPLAN=target/debug/benchplan scripts/gate-noise.sh
#   BUSY=2 GATE_EXTRA="--set execution.repeats=3" scripts/gate-noise.sh   # runs as samples
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BENCHPLAN:-target/release/benchplan}
RUNS=${RUNS:-20}
PLANTED=${PLANTED:-5}
[ -x "$BIN" ] || cargo build --release --quiet
work=$(mktemp -d)
trap 'kill $busy 2>/dev/null || true; rm -rf "$work"' EXIT
# BUSY busy loops beside the runs (default 1; 2 keeps both cores of a 2-core machine busy).
busy=""
for _ in $(seq 1 "${BUSY:-1}"); do ( while :; do :; done ) & busy="$busy $!"; done
shrink=(--set defaults.num_prompts=24 --no-charts --quiet ${GATE_EXTRA:-})
"$BIN" run plans/quickstart.toml "${shrink[@]}" --results-dir "$work/base" >/dev/null 2>&1 || true
base=$(ls -d "$work"/base/batch/batch_* | head -1)
echo "baseline: $base"
printf '%-9s %-4s %-6s %s\n' run kind exit "regressions (case metric delta p)"
false_alarms=0; detected=0
one() { # $1 = label, $2 = kind, rest = extra flags
  local label=$1 kind=$2; shift 2
  local out="$work/run-$label"
  set +e
  "$BIN" run plans/quickstart.toml "${shrink[@]}" --results-dir "$out" \
    --set "report.baseline=$base" "$@" >/dev/null 2>"$out.err"
  local code=$?
  set -e
  local dir
  dir=$(ls -d "$out"/batch/batch_* | head -1)
  # The comparison table's REGRESSION rows: case, metric, delta, p.
  local regs
  regs=$(grep 'REGRESSION |' "$dir/report.md" | awk -F'|' '{gsub(/ /,"",$2); gsub(/ /,"",$3); gsub(/ /,"",$6); gsub(/ /,"",$8); printf "%s %s %s p=%s; ", $2, $3, $6, $8}' || true)
  local n
  n=$(grep -c 'REGRESSION |' "$dir/report.md" || true)
  printf '%-9s %-4s %-6s %s\n' "$label" "$kind" "$code" "${regs:--}"
  if [ "$kind" = same ]; then false_alarms=$((false_alarms + n)); fi
  if [ "$kind" = slow ] && grep 'REGRESSION |' "$dir/report.md" | grep -q 'tpot'; then detected=$((detected + 1)); fi
}
for i in $(seq 1 "$RUNS"); do one "same-$i" same; done
for i in $(seq 1 "$PLANTED"); do one "slow-$i" slow --set services.sim.sim.itl=2.6ms; done
echo "false regressions in $RUNS unchanged reruns: $false_alarms"
echo "planted TPOT regression reported in $detected of $PLANTED reruns"
