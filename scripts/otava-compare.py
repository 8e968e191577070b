#!/usr/bin/env python3
"""Compares benchplan's change points with Apache Otava's on planted series.

Needs `apache-otava` (pip install apache-otava; never a test dependency) and a built
benchplan (BENCHPLAN, default target/release/benchplan). Each series is written as a
one-case history and judged by `benchplan trend --format json`; Otava's
`compute_change_points` runs on the same numbers with the same settings. Prints one
row per series: the planted changes, each tool's change points and their p-values.
"""
import json, os, subprocess, sys, tempfile

import numpy as np
from otava.analysis import compute_change_points

BENCHPLAN = os.environ.get("BENCHPLAN", "target/release/benchplan")
WINDOW, PVALUE, MAGNITUDE = 50, 0.001, 0.0


def planted(seed):
    rng = np.random.default_rng(seed)
    noise = lambda n, mean, sigma: list(mean * (1 + sigma * rng.standard_normal(n)))
    out = []
    out.append(("step 5% in 2% noise", noise(30, 100, 0.02) + noise(30, 105, 0.02), [30]))
    out.append(("step 20%", noise(25, 50, 0.02) + noise(25, 60, 0.02), [25]))
    out.append(("two steps (+15%, -17%)", noise(20, 100, 0.02) + noise(20, 115, 0.02) + noise(20, 95, 0.02), [20, 40]))
    drift = noise(30, 100, 0.01) + [100 * (1 + 0.01 * i) * (1 + 0.01 * rng.standard_normal()) for i in range(1, 21)]
    out.append(("drift 1% a run from 30", drift, [30]))
    v = noise(60, 100, 0.02)
    for i in (12, 33, 47):
        v[i] *= 1.6
    out.append(("isolated outliers (x1.6)", v, []))
    out.append(("stationary, 100 points", noise(100, 100, 0.02), []))
    return out


def benchplan_cps(values):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "h.jsonl")
        with open(path, "w") as f:
            for i, x in enumerate(values):
                f.write(json.dumps({"v": 1, "when": f"2026-01-01T00:00:{i:02d}Z" if i < 60 else f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
                                    "run": f"run{i:03d}", "plan": "p", "case": "c",
                                    "metrics": {"p99_ttft_ms": {"value": x, "n": 100}}}) + "\n")
        out = subprocess.run([BENCHPLAN, "trend", path, "--format", "json", "--window", str(WINDOW),
                              "--max-pvalue", str(PVALUE), "--min-magnitude", str(MAGNITUDE)],
                             capture_output=True, text=True)
        t = json.loads(out.stdout)
        return [(c["index"], c["pvalue"]) for c in t["series"][0]["changes"]]


def otava_cps(values):
    cps, _ = compute_change_points([float(x) for x in values], window_len=WINDOW,
                                   max_pvalue=PVALUE, min_magnitude=MAGNITUDE)
    return [(c.index, float(c.stats.pvalue)) for c in cps]


def fmt(cps):
    return ", ".join(f"{i} (p={p:.1e})" for i, p in cps) or "none"


def main():
    seeds = [int(s) for s in sys.argv[1:]] or [1, 2, 3]
    print("| Seed | Series | Planted | benchplan | Otava | Same indices | Max p-value difference |")
    print("|---|---|---|---|---|---|---|")
    same = total = 0
    for seed in seeds:
        for name, values, changes in planted(seed):
            b, o = benchplan_cps(values), otava_cps(values)
            eq = [i for i, _ in b] == [i for i, _ in o]
            dp = max((abs(x[1] - y[1]) for x, y in zip(b, o)), default=0.0) if eq else float("nan")
            same += eq
            total += 1
            print(f"| {seed} | {name} | {changes or 'none'} | {fmt(b)} | {fmt(o)} | {'yes' if eq else 'NO'} | {dp:.1e} |")
    print(f"\nsame change points on {same} of {total} series")


if __name__ == "__main__":
    main()
