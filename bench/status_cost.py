"""`python -m bench.status_cost`: the no-op throughput cost of job status/history.

Runs `bench.core`'s single-process and prefork (`--procs 2`) throughput with status and
history on, then off (`COGWORKER_BENCH_STATUS=0`), alternating, `--reps` times each; every
measurement is a fresh interpreter (the bench app reads the switch at import). Prints every
figure, the medians and the cost (1 - on/off).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

MEASURE = {
    "single": "from bench.core import single_process_throughput as f; print(f({n}))",
    "prefork2": "from bench.core import prefork_throughput as f; print(f(2, {n}))",
}


def measure(kind: str, on: bool, n: int) -> float:
    env = {**os.environ, "COGWORKER_BENCH_STATUS": "1" if on else "0"}
    out = subprocess.run(
        [sys.executable, "-c", MEASURE[kind].format(n=n)], env=env, check=True, capture_output=True, text=True
    ).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.status_cost")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=10_000)
    args = ap.parse_args()
    figures: dict[tuple[str, bool], list[float]] = {(k, on): [] for k in MEASURE for on in (True, False)}
    for rep in range(args.reps):
        for kind in MEASURE:
            for on in (True, False):
                value = measure(kind, on, args.jobs)
                figures[kind, on].append(value)
                print(f"rep {rep + 1} {kind:8} status/history {'on ' if on else 'off'} {value:,.0f} jobs/s", flush=True)
    for kind in MEASURE:
        on, off = statistics.median(figures[kind, True]), statistics.median(figures[kind, False])
        print(f"{kind:8} median on {on:,.0f}  off {off:,.0f}  cost {100 * (1 - on / off):.1f}%")


if __name__ == "__main__":
    main()
