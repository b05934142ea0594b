"""`python -m bench` from the repo root: every system, every workload, one run.

This file only uses the standard library: it first makes sure the peers' venv exists
(bench/.venv-peers), and if the launching interpreter cannot import redis and psutil
(the orchestrator's only needs), it re-runs itself with the peers' interpreter.
cogworker itself always runs from the project's interpreter (see bench/run.py).
"""

import argparse
import os
import sys

from bench import env

WORKLOADS = ["throughput", "truenoop", "curves", "cpu", "latency", "enqueue", "memory", "recovery"]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer jobs and one repetition: a 2-3 minute smoke run")
    ap.add_argument(
        "--systems", default="", help="comma-separated system or library names (default: all), e.g. cogworker,celery"
    )
    ap.add_argument("--workloads", default="", help=f"comma-separated, from: {','.join(WORKLOADS)} (default: all)")
    ap.add_argument(
        "--reps", type=int, default=None, help="repetitions per measurement (default: 3, or 1 with --quick)"
    )
    args = ap.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w] or WORKLOADS
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    args.systems = [s for s in args.systems.split(",") if s]
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    env.ensure_peers_venv()
    try:
        import psutil  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        if os.environ.get("BENCH_REEXEC"):
            raise
        os.environ.update(BENCH_REEXEC="1", BENCH_LAUNCHER=os.environ.get("BENCH_LAUNCHER", sys.executable))
        os.chdir(env.REPO)
        os.execv(str(env.PEERS_PYTHON), [str(env.PEERS_PYTHON), "-m", "bench", *argv])
    from bench import run

    try:
        return run.main(args)
    except KeyboardInterrupt:
        print("bench: interrupted; every process it started has been stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
