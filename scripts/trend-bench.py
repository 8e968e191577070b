#!/usr/bin/env python3
"""Times `benchplan trend` over a large history: RUNS runs x CASES cases x the 8
compared metrics (default 10,000 x 20 x 8 = 1.6 million points in 200,000 lines),
noise of 2% with a 10% step in every case at a different run. Prints the history's
size and the wall time and peak memory of the trend (median of 3).

usage: scripts/trend-bench.py [RUNS] [CASES]   (BENCHPLAN: default target/release/benchplan)
"""
import json, os, random, resource, statistics, subprocess, sys, tempfile, time

BENCHPLAN = os.environ.get("BENCHPLAN", "target/release/benchplan")
METRICS = ["p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p99_itl_ms",
           "p99_e2el_ms", "output_throughput", "success_rate"]


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    rng = random.Random(1)
    d = tempfile.mkdtemp()
    path = os.path.join(d, "history.jsonl")
    with open(path, "w") as f:
        for r in range(runs):
            when = f"2026-01-01T00:00:00Z+{r:06d}"
            for c in range(cases):
                step = 1.1 if r >= (c + 1) * runs // (cases + 1) else 1.0
                m = {k: {"value": 100.0 * step * (1 + 0.02 * rng.gauss(0, 1)), "n": 100} for k in METRICS}
                f.write(json.dumps({"v": 1, "when": when, "run": f"r{r:06d}", "plan": "bench",
                                    "case": f"case-{c:02d}", "metrics": m}) + "\n")
    size = os.path.getsize(path)
    times, peaks = [], []
    for _ in range(3):
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", BENCHPLAN, "trend", path, "--format", "json"],
                           capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        peaks.append(int(p.stderr.strip().splitlines()[-1]) / 1024)
        if p.returncode not in (0, 4):
            sys.exit(p.stderr)
    t = json.loads(p.stdout)
    found = sum(len(s["changes"]) for s in t["series"])
    print(f"history: {runs} runs x {cases} cases x {len(METRICS)} metrics = {runs * cases * len(METRICS):,} points, "
          f"{runs * cases:,} lines, {size / 1e6:.0f} MB")
    print(f"trend: {statistics.median(times):.2f} s wall (runs: {', '.join(f'{x:.2f}' for x in times)}), "
          f"peak RSS {max(peaks):.0f} MiB; {len(t['series'])} series, {found} change points")


if __name__ == "__main__":
    main()
