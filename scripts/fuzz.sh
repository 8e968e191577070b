#!/usr/bin/env bash
# Runs each cargo-fuzz target for a set time (default 600 s each) where a nightly
# toolchain exists, prints how long each ran and how many inputs it tried, and copies
# any crashing input into tests/fixtures/fuzz-regressions/<target>/, where the test
# suite replays it (`props::the_fuzz_regression_corpus_passes`).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(plan set_override sse http_response slo)

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz.sh: no nightly toolchain here; the property tests (cargo test props) cover these parsers on stable"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz"
  cargo install cargo-fuzz --locked || exit 1
fi
cd fuzz
cargo +nightly fuzz build -O || exit 1
status=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  start=$(date +%s)
  log=$(mktemp)
  cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 >"$log" 2>&1
  code=$?
  took=$(( $(date +%s) - start ))
  runs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+')
  [ -n "$runs" ] || runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  crashes=$(ls "artifacts/$t" 2>/dev/null | wc -l)
  echo "$t: ran ${took} s, ${runs:-?} executions, exit $code, $crashes crash file(s)"
  if [ "$crashes" -gt 0 ]; then
    status=1
    mkdir -p "../tests/fixtures/fuzz-regressions/$t"
    cp "artifacts/$t"/* "../tests/fixtures/fuzz-regressions/$t/"
    tail -40 "$log"
  fi
  rm -f "$log"
done
exit $status
