"""`python -m bench.results_cost`: what keeping results costs (docs/architecture.md#workflows).

- no-op throughput of a job with ``results=True`` against the same job without, single-process
  (the worker loop) and prefork ``--procs 2``, alternating, ``--reps`` times each, every
  measurement against a fresh private redis-server: medians and the cost (1 - kept/plain);
- ``result()`` latency: enqueue, then ``cogworker.result(jid)`` on an idle single-process
  worker (the whole round trip a caller sees), against the same job's pickup alone (enqueue ->
  its body starts, measured by the body) in the same run: medians and p95.

Run from the repo root: `.venv/bin/python -m bench.results_cost`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

from bench.checkout import app_dir
from bench.drain import drain_rate
from bench.redis_server import RedisServer

APP = textwrap.dedent("""
    import time
    import cogworker
    from cogworker.config import get_config

    @cogworker.job
    def plain(i):
        pass

    @cogworker.job(results=True)
    def kept(i):
        return i

    @cogworker.job(results=True)
    def probe(t_enqueued):
        get_config().redis().rpush("bench:probe", repr(time.time() - t_enqueued))
        return 1
""")


APP_PATH = app_dir("results_app", APP)


class Env:
    def __enter__(self) -> Env:
        self.server = RedisServer().start()
        import cogworker

        self.config = cogworker.configure(redis_url=self.server.url)
        if APP_PATH not in sys.path:
            sys.path.insert(0, APP_PATH)
        import results_app

        self.app: Any = results_app
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def single(kind: str, n: int) -> float:
    from cogworker.engine.loop import Worker

    with Env() as env:
        getattr(env.app, kind).enqueue_many([(i,) for i in range(n)])
        worker = Worker([("default", None)], block_timeout=0.05, max_jobs=n, lookahead=False)
        started = time.perf_counter()
        worker.run()
        return n / (time.perf_counter() - started)


def prefork(kind: str, n: int, procs: int = 2) -> float:
    """Steady state: from 5% done to the queue drained."""
    import signal

    with Env() as env:
        getattr(env.app, kind).enqueue_many([(i,) for i in range(n)])
        r = env.config.redis()
        queue = env.config.keys.queue("default")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cogworker.prefork.cli",
                "--procs",
                str(procs),
                "--redis-url",
                env.server.url,
                "results_app",
            ],
            env={**os.environ, "PYTHONPATH": APP_PATH},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            return drain_rate(r, queue, n)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


def latency(n: int) -> tuple[list[float], list[float]]:
    """(enqueue -> result() returned, enqueue -> the body started), seconds, per job."""
    import cogworker
    from cogworker.engine.loop import Worker

    with Env() as env:
        worker = Worker([("default", None)], lookahead=False)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        r = env.config.redis()
        whole = []
        try:
            for _ in range(n):
                started = time.time()
                jid = env.app.probe.enqueue(started)
                assert cogworker.result(jid, timeout=10) == 1
                whole.append(time.time() - started)
                time.sleep(0.005)
        finally:
            worker.stop()
            thread.join(10)
        pickup = [float(x) for x in r.lrange("bench:probe", 0, -1)]
        return whole, pickup


def p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.results_cost")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--latency-jobs", type=int, default=300)
    args = ap.parse_args()
    figures: dict[tuple[str, str], list[float]] = {}
    for rep in range(args.reps):
        for where, measure in (("single", single), ("prefork2", prefork)):
            for kind in ("plain", "kept"):
                # A fresh interpreter each: one measurement's imports and caches don't help the next.
                code = f"from bench.results_cost import {measure.__name__} as f; print(f({kind!r}, {args.jobs}))"
                out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
                value = float(out.strip().splitlines()[-1])
                figures.setdefault((where, kind), []).append(value)
                print(
                    f"rep {rep + 1} {where:8} results {'on ' if kind == 'kept' else 'off'} {value:,.0f} jobs/s",
                    flush=True,
                )
    for where in ("single", "prefork2"):
        on, off = statistics.median(figures[where, "kept"]), statistics.median(figures[where, "plain"])
        print(f"{where:8} median results=True {on:,.0f}  off {off:,.0f} jobs/s  cost {100 * (1 - on / off):.1f}%")
    whole, pickup = latency(args.latency_jobs)
    print(
        f"result() round trip (enqueue -> value in hand): median {statistics.median(whole) * 1000:.2f} ms, "
        f"p95 {p95(whole) * 1000:.2f} ms; the same jobs' pickup alone (enqueue -> start): median "
        f"{statistics.median(pickup) * 1000:.2f} ms, p95 {p95(pickup) * 1000:.2f} ms ({len(whole)} jobs)"
    )


if __name__ == "__main__":
    main()
