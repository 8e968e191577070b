#!/usr/bin/env python3
"""Before/after figures for the client benchmark: runs chosen rows of
`benches/client_overhead.rs` several times with each of several bench binaries and
prints the median client CPU per chunk (total and user) and peak RSS of each.

Build a binary per variant first (`cargo bench --bench client_overhead --no-run`, then
copy `target/release/deps/client_overhead-*` away), then:

    scripts/client-overhead-ab.py --runs 5 base=/tmp/base new=/tmp/new \
        --rows paced-100,paced-1000,paced-1000-floor --gap paced-1000:paced-1000-floor

Rows alternate between binaries, so a change in the host's load touches both alike.
"""

import argparse
import os
import re
import statistics
import subprocess

ROW = re.compile(
    r"CPU (?P<cpu>[0-9.]+) us/chunk \((?P<user>[0-9.]+) user\)(?:; peak RSS (?P<rss>[0-9.]+) MiB)?.*steal (?P<steal>[0-9.]+)%"
)


def run(binary, row, output):
    env = dict(os.environ, BENCH_SCENARIO=row)
    if output:
        env["BENCH_OUTPUT"] = str(output)
    out = subprocess.run(
        [binary], env=env, capture_output=True, text=True, check=True
    ).stdout
    m = ROW.search(out)
    if not m:
        raise SystemExit(f"{binary} {row}: no figures in {out!r}")
    return {k: float(v) if v is not None else None for k, v in m.groupdict().items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+", help="name=path of a bench binary")
    ap.add_argument("--rows", required=True, help="comma-separated row names")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--output", type=int, help="BENCH_OUTPUT for every row")
    ap.add_argument(
        "--gap",
        action="append",
        default=[],
        metavar="ROW:BASE",
        help="also print ROW's CPU minus BASE's run by run (the two run back to back, so a"
        " drift of the host's load cancels) and the median of those gaps; repeatable,"
        " e.g. --gap paced-100:paced-100-floor",
    )
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants]
    rows = a.rows.split(",")
    figures = {(r, n): [] for r in rows for n, _ in variants}
    for _ in range(a.runs):
        for r in rows:
            for n, path in variants:
                figures[(r, n)].append(run(path, r, a.output))
    print(f"median of {a.runs} runs; us/chunk total (user); peak RSS MiB; max steal %")
    for r in rows:
        cells = []
        for n, _ in variants:
            f = figures[(r, n)]
            med = lambda k: statistics.median(x[k] for x in f)
            rss = f"{med('rss'):.0f} MiB" if f[0]["rss"] is not None else "-"
            steal = max(x["steal"] for x in f)
            cells.append(f"{n}: {med('cpu'):.2f} ({med('user'):.2f}) {rss} steal {steal:.0f}%")
        print(f"{r:<18} " + " | ".join(cells))
    for g in a.gap:
        row, base = g.split(":", 1)
        cells = []
        for n, _ in variants:
            gaps = [x["cpu"] - y["cpu"] for x, y in zip(figures[(row, n)], figures[(base, n)])]
            runs = " ".join(f"{d:.2f}" for d in gaps)
            cells.append(f"{n}: median {statistics.median(gaps):.2f} [{runs}]")
        print(f"{row} - {base}: " + " | ".join(cells))


if __name__ == "__main__":
    main()
