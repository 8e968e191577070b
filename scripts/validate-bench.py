#!/usr/bin/env python3
"""Times `benchplan validate` on plans of many services (one simulator service a case,
the shape that used to take quadratic time): 1,000, 10,000 and 100,000 services by
default. Prints the plan's size, and the wall time and peak memory of `validate`
(median of 3), and the time per service, which stays flat when validation is linear.

usage: scripts/validate-bench.py [N ...]   (BENCHPLAN: default target/release/benchplan)
"""
import os, resource, statistics, subprocess, sys, tempfile, time

BENCHPLAN = os.environ.get("BENCHPLAN", "target/release/benchplan")


def plan(n):
    lines = ['name = "many"', "[defaults]", "num_prompts = 4", ""]
    for i in range(n):
        lines += [f"[services.s{i}]", 'sim = { preset = "tiny" }', ""]
    return "\n".join(lines)


def one(path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    out = subprocess.run([BENCHPLAN, "validate", path], capture_output=True, text=True)
    took = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"validate failed: {out.stderr[-2000:]}")
    # ru_maxrss of the children is the largest so far: run the sizes smallest first.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return took, max(peak, before)


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1_000, 10_000, 100_000]
    d = tempfile.mkdtemp()
    print(f"{'services':>9} {'plan KB':>8} {'validate s':>11} {'us/service':>11} {'peak MB':>8}")
    for n in sorted(sizes):
        path = os.path.join(d, f"p{n}.toml")
        with open(path, "w") as f:
            f.write(plan(n))
        runs = [one(path) for _ in range(3)]
        took = statistics.median(r[0] for r in runs)
        peak = max(r[1] for r in runs) / 1024
        print(f"{n:>9} {os.path.getsize(path) / 1024:>8.0f} {took:>11.3f} {took / n * 1e6:>11.1f} {peak:>8.0f}")


if __name__ == "__main__":
    main()
