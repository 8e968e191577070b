#!/usr/bin/env bash
# Builds the `pip install benchplan` wheel for this machine (linux x86_64 here) with
# maturin, installs it into a fresh venv with no Rust on PATH, and runs it: --version,
# then the quickstart (a starter plan against the embedded simulator). Prints the
# wheel's path and size. Needs network access to PyPI for maturin.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="${WHEEL_WORK:-$(mktemp -d)}"
python3 -m venv "$WORK/build"
"$WORK/build/bin/pip" install -q 'maturin>=1.5,<2'
rm -rf target/wheels
"$WORK/build/bin/maturin" build --release --locked --out target/wheels
WHEEL=$(ls target/wheels/benchplan-*.whl)
echo "wheel: $WHEEL ($(du -h "$WHEEL" | cut -f1))"

# A venv and a PATH without cargo or rustc: the wheel must carry everything.
python3 -m venv "$WORK/try"
"$WORK/try/bin/pip" install -q "$WHEEL"
CLEAN_PATH="$WORK/try/bin:/usr/bin:/bin"
if env PATH="$CLEAN_PATH" sh -c 'command -v cargo || command -v rustc' >/dev/null; then
  echo "error: Rust is still on the clean PATH" >&2
  exit 1
fi
cd "$WORK"
env -i HOME="$HOME" PATH="$CLEAN_PATH" benchplan --version
env -i HOME="$HOME" PATH="$CLEAN_PATH" benchplan init quick.toml
env -i HOME="$HOME" PATH="$CLEAN_PATH" benchplan run quick.toml --results-dir "$WORK/results" | head -20
echo "the wheel ran the quickstart from $WORK/try (no Rust on PATH)"
