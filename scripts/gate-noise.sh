#!/usr/bin/env bash
# The nightly gate against its own noise: one baseline of the quickstart plan shrunk to
# 24 prompts a case, then RUNS unchanged reruns and PLANTED reruns with the simulator's
# ITL raised 20% (2 ms -> 2.4 ms: TPOT +20%), each compared with the pinned baseline.
# Prints one row per rerun: its exit code and the regressions it reported, then how many
# unchanged reruns exited 4 and how many planted ones did. BUSY busy loops run beside
# it (0 for a quiet machine; 2 keeps both cores of a 2-core machine busy). MEASURE says
# what the gate compares (report.measure: steady, the default, or whole).
#
#   scripts/gate-noise.sh                      # 20 unchanged + 5 planted, one core busy
#   BUSY=0 RUNS=40 MEASURE=whole scripts/gate-noise.sh
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
shrink=(--set defaults.num_prompts=24 --set "report.measure=${MEASURE:-steady}" --no-charts --quiet ${GATE_EXTRA:-})
"$BIN" run plans/quickstart.toml "${shrink[@]}" --results-dir "$work/base" >/dev/null 2>&1 || true
base=$(ls -d "$work"/base/batch/batch_* | head -1)
echo "baseline: $base"
printf '%-9s %-4s %-6s %s\n' run kind exit "regressions (case metric delta p)"
false_alarms=0; detected=0; exits_same=0; exits_slow=0
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
  if [ "$code" = 4 ] && [ "$kind" = same ]; then exits_same=$((exits_same + 1)); fi
  if [ "$code" = 4 ] && [ "$kind" = slow ]; then exits_slow=$((exits_slow + 1)); fi
  if [ "$kind" = slow ] && grep 'REGRESSION |' "$dir/report.md" | grep -q 'tpot'; then detected=$((detected + 1)); fi
}
for i in $(seq 1 "$RUNS"); do one "same-$i" same; done
for i in $(seq 1 "$PLANTED"); do one "slow-$i" slow --set services.sim.sim.itl=2.4ms; done
echo "measure=${MEASURE:-steady} busy=${BUSY:-1}"
echo "false regressions in $RUNS unchanged reruns: $false_alarms (runs that exited 4: $exits_same)"
echo "planted TPOT regression reported in $detected of $PLANTED reruns (exited 4: $exits_slow)"
