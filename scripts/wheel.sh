#!/usr/bin/env bash
# Builds the Linux x86_64 wheel into target/wheels/ (the benchplan binary, no Python
# code) for glibc 2.17+ (manylinux2014: Ubuntu 18.04+, RHEL/CentOS 7+, the CUDA base
# images), checks its tag and the newest glibc symbol its binary needs, installs it
# into a fresh venv with no Rust on PATH, and runs `benchplan --version` and the
# quickstart plan from it. Exits
# non-zero when any of that fails; .ci/run runs it.
#
# Why maturin with --zig: maturin links against glibc 2.17's symbol versions with zig's
# cc (the `ziglang` package from PyPI, 50 MB, nothing to install system-wide), where a
# plain `cargo build` on this machine links against its own glibc 2.35 and pip refuses
# the wheel on any older system. The manylinux2014 docker image is the other way; it
# needs docker and a network registry, which neither CI nor most laptops here have.
#
# Reuse: maturin and ziglang live in a cached venv ($WHEEL_CACHE, default
# ~/.cache/benchplan-wheel); the build goes to target/x86_64-unknown-linux-gnu/ (or
# $CARGO_TARGET_DIR), so a second run relinks only what changed. zig cross-links with
# an explicit target, so it cannot share `cargo build`'s own target/release.
#
# WHEEL_PROFILE=release (default) or dev (faster to build; the same packaging).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE="${WHEEL_PROFILE:-release}"
CACHE="${WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/benchplan-wheel}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if ! "$CACHE/venv/bin/maturin" --version >/dev/null 2>&1 ||
  ! "$CACHE/venv/bin/python" -m ziglang version >/dev/null 2>&1; then
  rm -rf "$CACHE/venv"
  python3 -m venv "$CACHE/venv"
  "$CACHE/venv/bin/pip" install -q 'maturin>=1.5,<2' 'ziglang>=0.13'
fi
OUT="$PWD/target/wheels"
rm -rf "$OUT"
start=$(date +%s)
PATH="$CACHE/venv/bin:$PATH" maturin build --locked --profile "$PROFILE" \
  --zig --compatibility manylinux2014 --out "$OUT"
echo "built in $(($(date +%s) - start)) s ($PROFILE profile)"
WHEEL=$(ls "$OUT"/benchplan-*.whl)
echo "wheel: $(basename "$WHEEL") ($(du -h "$WHEEL" | cut -f1))"

# The tag pip matches against the system, and what the binary itself asks of glibc
# (its versioned symbols), which is what the tag promises.
case "$(basename "$WHEEL")" in
  *manylinux2014_x86_64*) ;;
  *) echo "error: the wheel is not tagged manylinux2014: $WHEEL" >&2; exit 1 ;;
esac
python3 - "$WHEEL" <<'EOF'
import re, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/benchplan") and ".data/scripts/" in n)
    binary = z.read(name)
versions = sorted({(2, int(m.group(1))) for m in re.finditer(rb"GLIBC_2\.(\d+)", binary)})
newest = versions[-1] if versions else None
print(f"newest glibc symbol the binary needs: {'.'.join(map(str, newest)) if newest else 'none'}")
if newest and newest > (2, 17):
    sys.exit(f"error: the binary needs glibc {newest}, above manylinux2014's 2.17")
EOF

# A venv and a PATH without cargo or rustc: the wheel must carry everything.
python3 -m venv "$WORK/try"
"$WORK/try/bin/pip" install -q "$WHEEL"
CLEAN_PATH="$WORK/try/bin:/usr/bin:/bin"
if env PATH="$CLEAN_PATH" sh -c 'command -v cargo || command -v rustc' >/dev/null; then
  echo "error: Rust is still on the clean PATH" >&2
  exit 1
fi
cp plans/quickstart.toml "$WORK/"
cd "$WORK"
env -i HOME="$HOME" PATH="$CLEAN_PATH" benchplan --version
start=$(date +%s)
env -i HOME="$HOME" PATH="$CLEAN_PATH" benchplan run quickstart.toml --results-dir "$WORK/results" >"$WORK/report.md"
head -5 "$WORK/report.md"
grep -q '^\*\*PASS\*\*' "$WORK/report.md" || {
  echo "error: the quickstart did not print a passing report" >&2
  exit 1
}
echo "the wheel ran the quickstart in $(($(date +%s) - start)) s from a fresh venv (no Rust on PATH)"
