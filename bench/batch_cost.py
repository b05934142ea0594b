"""`python -m bench.batch_cost`: what a batch costs its jobs (docs/architecture.md#batches).

No-op jobs enqueued inside ``with cogworker.batch(on_complete=...)`` against the same jobs
outside, in the same command, alternating, ``--reps`` times each, every measurement against
a fresh private redis-server; medians and the ratio inside/outside of:

- the single-process worker loop draining N jobs (a batch's job settles with
  ``complete.lua`` at once, never riding on the next fetch as a plain ack does);
- a prefork master ``--procs 2`` draining them (steady state: bench.drain's
  drain loop);
- enqueueing them (``enqueue_many``: one pipeline outside; inside, a script per job, since
  each is counted in the script that writes it).

Run from the repo root: `.venv/bin/python -m bench.batch_cost`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench.checkout import app_dir
from bench.drain import drain_rate
from bench.redis_server import RedisServer

APP = textwrap.dedent("""
    import cogworker

    @cogworker.job
    def noop(i):
        pass

    @cogworker.job
    def done():
        pass
""")


APP_PATH = app_dir("batch_app", APP)


@contextlib.contextmanager
def env() -> Iterator[tuple[Any, Any, str]]:
    """A fresh redis-server, cogworker configured on it, the app imported."""
    import cogworker

    server = RedisServer().start()
    try:
        config = cogworker.configure(redis_url=server.url)
        if APP_PATH not in sys.path:
            sys.path.insert(0, APP_PATH)
        import batch_app

        yield config, batch_app, server.url
    finally:
        server.stop()


def enqueue(app: Any, n: int, inside: bool) -> float:
    """Enqueues n no-op jobs (in chunks of 1,000), in a batch or not; returns calls/s."""
    import cogworker

    scope = cogworker.batch(on_complete=app.done.s()) if inside else contextlib.nullcontext()
    started = time.perf_counter()
    with scope:
        for start in range(0, n, 1000):
            app.noop.enqueue_many([(i,) for i in range(start, min(n, start + 1000))])
    return n / (time.perf_counter() - started)


def enqueue_rate(n: int, inside: bool) -> float:
    with env() as (_, app, _url):
        return enqueue(app, n, inside)


def single(n: int, inside: bool) -> float:
    from cogworker.engine.loop import Worker

    with env() as (_, app, _url):
        enqueue(app, n, inside)
        worker = Worker([("default", None)], block_timeout=0.05, max_jobs=n, lookahead=False)
        started = time.perf_counter()
        worker.run()
        return n / (time.perf_counter() - started)


def prefork(n: int, inside: bool) -> float:
    with env() as (config, app, url):
        enqueue(app, n, inside)
        proc = subprocess.Popen(
            [sys.executable, "-m", "cogworker.prefork.cli", "--procs", "2", "--redis-url", url, "batch_app"],
            env={**os.environ, "PYTHONPATH": APP_PATH},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            return drain_rate(config.redis(), config.keys.queue("default"), n)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.batch_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="alternating runs of each (inside, outside)")
    ap.add_argument("--jobs", type=int, default=10_000, help="jobs per run")
    ap.add_argument("--only", default="single,prefork2,enqueue", help="figures to take")
    args = ap.parse_args(argv)
    kinds: dict[str, Callable[[int, bool], float]] = {"single": single, "prefork2": prefork, "enqueue": enqueue_rate}
    chosen = [k for k in args.only.split(",") if k]
    figures: dict[tuple[str, bool], list[float]] = {(k, side): [] for k in chosen for side in (True, False)}
    for rep in range(args.reps):
        for kind in chosen:
            for inside in (True, False) if rep % 2 == 0 else (False, True):
                value = kinds[kind](args.jobs, inside)
                figures[kind, inside].append(value)
                print(f"rep {rep + 1} {kind:8} {'inside' if inside else 'outside'} {value:,.0f}/s", flush=True)
    for kind in chosen if args.reps else []:
        out, inn = statistics.median(figures[kind, False]), statistics.median(figures[kind, True])
        print(f"{kind:8} median outside {out:,.0f}/s  inside a batch {inn:,.0f}/s  inside/outside {inn / out:.3f}")


if __name__ == "__main__":
    main()
