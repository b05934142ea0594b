"""`python -m bench.features`: the feature tax, what a job that uses a feature costs beside
a plain job, in one command and one table.

Each row is a true no-op job (its body appends one byte to a file of its process; no Redis
call, no work: bench/apps/bench_body.py's truenoop) drained by a prefork master
`--procs 2`, the jobs enqueued beforehand, every measurement against a fresh private
redis-server. Rows, all with job status and history off but the last:

- plain: `@job`;
- batch: the same job enqueued inside `with cogworker.batch(on_complete=...)`;
- results: `@job(results=True)`;
- unique: `@job(unique_for=3600)`, every job's arguments distinct;
- concurrency: `@job(limits=[Concurrency("bench", 1000)])`, a limit never reached;
- window: `@job(limits=[Window("bench-window", 10**6, per=60)])`, never reached;
- chain: steps of chains of 10 (`cogworker.chain`);
- group: members of groups of 100 (`cogworker.group`);
- defaults: the plain job with status and history on (the defaults).

Figures, over the steady window (10 % to 90 % of the jobs done): jobs/s, Redis CPU per job
(`INFO cpu`, the whole server) and Redis commands per job (bench/rcpu.py). The rows
alternate, `--reps` rounds; medians, and each row's ratio to the plain row of the same run
(jobs/s times plain, Redis CPU times plain). Measurement only: no figure is asserted.
Run from the repository root: `.venv/bin/python -m bench.features`.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from typing import Any

import redis

from bench import rcpu
from bench.checkout import app_dir
from bench.redis_server import RedisServer

APP = textwrap.dedent("""
    import os

    import cogworker
    from cogworker import Concurrency, Window

    on = os.environ.get("BENCH_STATUS") == "1"
    cogworker.configure(redis_url=os.environ["COGWORKER_REDIS_URL"], status=on, history=on)
    _files = {}


    def _tick():
        # The true no-op body: one write(2) to this process's own file, counted by size.
        pid = os.getpid()
        fd = _files.get(pid)
        if fd is None:
            path = os.path.join(os.environ["BENCH_MARKS_DIR"], str(pid))
            fd = _files[pid] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, b".")


    @cogworker.job
    def plain(i):
        _tick()


    @cogworker.job(results=True)
    def results(i):
        _tick()


    @cogworker.job(unique_for=3600)
    def unique(i):
        _tick()


    @cogworker.job(limits=[Concurrency("bench", 1000)])
    def concurrency(i):
        _tick()


    @cogworker.job(limits=[Window("bench-window", 10**6, per=60)])
    def window(i):
        _tick()


    @cogworker.job
    def done():
        pass
""")
APP_PATH = app_dir("features_app", APP)
ROWS = ["plain", "batch", "results", "unique", "concurrency", "window", "chain", "group", "defaults"]
STALL = 60.0  # seconds without a job done: the run failed


def _app() -> Any:
    if APP_PATH not in sys.path:
        sys.path.insert(0, APP_PATH)
    import features_app

    return features_app


def _enqueue(row: str, n: int) -> int:
    """Enqueues the row's jobs (configured on COGWORKER_REDIS_URL); the jobs that will run."""
    import cogworker

    app = _app()
    on = os.environ.get("BENCH_STATUS") == "1"
    cogworker.configure(redis_url=os.environ["COGWORKER_REDIS_URL"], status=on, history=on)  # this run's server
    chunks = [list(range(s, min(n, s + 1000))) for s in range(0, n, 1000)]
    if row in ("chain", "group"):
        size = 10 if row == "chain" else 100
        for start in range(0, n - n % size, size):
            steps = [app.plain.si(i) for i in range(start, start + size)]  # immutable: no parent value
            (cogworker.chain(*steps) if row == "chain" else cogworker.group(steps)).enqueue()
        return n - n % size
    job = app.plain if row in ("batch", "defaults") else getattr(app, row)
    if row == "batch":
        with cogworker.batch(on_complete=app.done.s()):
            for chunk in chunks:
                job.enqueue_many([(i,) for i in chunk])
    else:
        for chunk in chunks:
            job.enqueue_many([(i,) for i in chunk])
    return n


def _ticks(directory: str) -> int:
    with os.scandir(directory) as entries:
        return sum(e.stat().st_size for e in entries)


def measure(row: str, n: int) -> dict[str, float]:
    """One run of ``row``: n jobs enqueued, then drained by ``--procs 2``; its figures."""
    with RedisServer() as server, tempfile.TemporaryDirectory(prefix="bench-features-") as marks:
        env = {
            **os.environ,
            "COGWORKER_REDIS_URL": server.url,
            "BENCH_MARKS_DIR": marks,
            "BENCH_STATUS": "1" if row == "defaults" else "0",
            "PYTHONPATH": APP_PATH,
        }
        os.environ.update({k: env[k] for k in ("COGWORKER_REDIS_URL", "BENCH_STATUS")})
        jobs = _enqueue(row, n)
        proc = subprocess.Popen(
            [sys.executable, "-m", "cogworker.prefork.cli", "--procs", "2", "features_app"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            return _window(redis.Redis.from_url(server.url), marks, jobs)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


def _window(r: Any, marks: str, jobs: int) -> dict[str, float]:
    lo = hi = None
    last, last_change = 0, time.monotonic()
    while hi is None:
        time.sleep(0.002)
        done, now = _ticks(marks), time.monotonic()
        if lo is None and done >= 0.1 * jobs:
            lo = (now, done, rcpu.snapshot(r))
        elif lo is not None and done >= 0.9 * jobs:
            hi = (now, done, rcpu.snapshot(r))
        if done != last:
            last, last_change = done, now
        elif now - last_change > STALL:
            raise RuntimeError(f"stalled: {done} of {jobs} jobs done, none for {STALL:.0f} s")
    per = rcpu.per_job(lo[2], hi[2], hi[1] - lo[1])
    return {"rate": (hi[1] - lo[1]) / (hi[0] - lo[0]), "redis_us": per["redis_us"], "cmds": per["redis_cmds"]}


def table(figures: dict[str, list[dict[str, float]]]) -> list[str]:
    """The medians, each row against plain's."""
    med: dict[str, dict[str, float]] = {
        row: {k: statistics.median(run[k] for run in runs) for k in ("rate", "redis_us", "cmds")}
        for row, runs in figures.items()
        if runs
    }
    base = med["plain"]
    lines = [
        "| job | jobs/s | times plain | Redis CPU µs/job | times plain | Redis commands/job |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row, m in med.items():
        lines.append(
            f"| {row} | {m['rate']:,.0f} | {m['rate'] / base['rate']:.2f} | {m['redis_us']:.1f} "
            f"| {m['redis_us'] / base['redis_us']:.1f} | {m['cmds']:.1f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.features", description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="rounds of every row (medians)")
    ap.add_argument("--jobs", type=int, default=20_000, help="jobs per run")
    ap.add_argument("--only", default=",".join(ROWS), help=f"rows, of {','.join(ROWS)} (plain always)")
    args = ap.parse_args(argv)
    rows = ["plain", *[r for r in args.only.split(",") if r and r != "plain"]]
    unknown = set(rows) - set(ROWS)
    if unknown:
        ap.error(f"unknown rows: {', '.join(sorted(unknown))}")
    run: Callable[[str, int], dict[str, float]] = measure
    figures: dict[str, list[dict[str, float]]] = {row: [] for row in rows}
    for rep in range(args.reps):
        for row in rows if rep % 2 == 0 else list(reversed(rows)):
            got = run(row, args.jobs)
            figures[row].append(got)
            print(
                f"round {rep + 1} {row:12} {got['rate']:9,.0f} jobs/s {got['redis_us']:6.1f} µs "
                f"{got['cmds']:5.1f} cmds/job",
                flush=True,
            )
    print("\n".join(["", *table(figures)]))


if __name__ == "__main__":
    main()
