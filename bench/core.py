"""`python -m bench.core`: cogworker's own figures, without the peers (seconds, not minutes).

- single-process no-op throughput: the core worker loop (`cogworker.engine.loop.Worker`, the
  loop `python -m cogworker.worker` and every prefork child run), jobs enqueued first;
- enqueue rate from one producer: single `enqueue` calls and `enqueue_many`;
- idle pickup latency: one job at a time at random intervals, enqueue -> start;
- prefork no-op throughput with `--procs 1` and `--procs 2`;
- SIGKILL of a child mid-job -> the job running again (median of 10).

Every number is the median of `--reps` runs (min-max shown), each against a fresh
private redis-server on a free port. Run from the repo root with the project's
interpreter: `.venv/bin/python -m bench.core`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from bench.checkout import app_dir
from bench.drain import drain_rate
from bench.redis_server import RedisServer, redis_version

APP = textwrap.dedent("""
    import os, time
    import cogworker
    from cogworker.config import get_config

    # Job status and history (on by default): 1 turns both on, 0 both off, to measure their cost.
    if os.environ.get("COGWORKER_BENCH_STATUS") in ("0", "1"):
        on = os.environ["COGWORKER_BENCH_STATUS"] == "1"
        cogworker.configure(status=on, history=on)

    @cogworker.job
    def noop(i):
        pass

    @cogworker.job
    def probe(t_enqueued):
        get_config().redis().rpush("bench:probe", repr(time.time() - t_enqueued))

    @cogworker.job
    def slow(token, seconds):
        get_config().redis().rpush("bench:slow", f"{token} {os.getpid()} {time.time()!r}")
        time.sleep(seconds)
""")


class Env:
    """A private Redis with cogworker configured against it, and the app importable."""

    def __enter__(self) -> Env:
        self.server = RedisServer().start()
        os.environ["COGWORKER_REDIS_URL"] = self.server.url
        import cogworker

        self.config = cogworker.configure(redis_url=self.server.url)
        self.app_path = APP_PATH
        if APP_PATH not in sys.path:
            sys.path.insert(0, APP_PATH)
        import core_app

        self.app = core_app
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def prefork(self, procs: int, extra: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": self.app_path, "COGWORKER_REDIS_URL": self.server.url}
        return subprocess.Popen(
            [sys.executable, "-m", "cogworker.prefork.cli", "--procs", str(procs), *extra, "core_app"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def single_process_throughput(n: int) -> float:
    from cogworker.engine.loop import Worker

    with Env() as env:
        env.app.noop.enqueue_many([(i,) for i in range(n)])
        # As `python -m cogworker.worker` runs it: no look-ahead (no siblings to hand a job to).
        worker = Worker([("default", None)], block_timeout=0.05, max_jobs=n, **plain_fetch(Worker))
        started = time.perf_counter()
        worker.run()
        return n / (time.perf_counter() - started)


def plain_fetch(worker_class) -> dict:
    """``lookahead=False`` where the Worker has the switch (older checkouts looked ahead
    only when their owner allowed it, which a bare Worker's never did)."""
    import inspect

    return {"lookahead": False} if "lookahead" in inspect.signature(worker_class).parameters else {}


def enqueue_rates(n: int) -> tuple[float, float]:
    with Env() as env:
        started = time.perf_counter()
        for i in range(n):
            env.app.noop.enqueue(i)
        single = n / (time.perf_counter() - started)
        started = time.perf_counter()
        for chunk in range(0, n * 10, 1000):
            env.app.noop.enqueue_many([(i,) for i in range(chunk, chunk + 1000)])
        bulk = n * 10 / (time.perf_counter() - started)
        return single, bulk


def pickup_latency(n: int) -> list[float]:
    """Enqueue -> start on an idle single-process worker (the job body measures it)."""
    from cogworker.engine.loop import Worker

    with Env() as env:
        worker = Worker([("default", None)])
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        time.sleep(0.3)
        for _ in range(n):
            env.app.probe.enqueue(time.time())
            time.sleep(random.uniform(0.005, 0.03))
        r = env.config.redis()
        deadline = time.time() + 10
        while r.llen("bench:probe") < n and time.time() < deadline:
            time.sleep(0.01)
        worker.stop()
        thread.join(5)
        return sorted(float(x) * 1000 for x in r.lrange("bench:probe", 0, -1))


def prefork_throughput(procs: int, n: int) -> float:
    """Steady state: from 5% done to the queue drained."""
    with Env() as env:
        env.app.noop.enqueue_many([(i,) for i in range(n)])
        r = env.config.redis()
        queue = env.config.keys.queue("default")
        proc = env.prefork(procs)
        try:
            return drain_rate(r, queue, n)
        finally:
            stop(proc)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU of the master, and of its live children."""
    import psutil

    def of(proc: psutil.Process) -> float:
        try:
            times = proc.cpu_times()
            return times.user + times.system
        except psutil.Error:
            return 0.0

    master = psutil.Process(pid)
    return of(master), sum(of(child) for child in master.children())


def exporter_run(procs: int, n: int, metrics: bool) -> tuple[float, float, float]:
    """prefork no-op throughput (jobs/s, steady state as above) and CPU microseconds per
    job of the master and of its children over the same stretch; ``metrics``: with
    --metrics-port, scraped once a second meanwhile (as a Prometheus would, only faster)."""
    import urllib.request

    from bench.redis_server import free_port

    port = free_port()
    with Env() as env:
        env.app.noop.enqueue_many([(i,) for i in range(n)])
        r = env.config.redis()
        queue = env.config.keys.queue("default")
        proc = env.prefork(procs, ("--metrics-port", str(port)) if metrics else ())
        try:
            while r.llen(queue) > n * 0.95:
                time.sleep(0.001)
            start_left, started, (master0, children0) = r.llen(queue), time.perf_counter(), cpu_seconds(proc.pid)
            next_scrape = started
            while r.llen(queue) > 0:
                if metrics and time.perf_counter() >= next_scrape:
                    next_scrape += 1.0
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
                time.sleep(0.002)
            elapsed, (master1, children1) = time.perf_counter() - started, cpu_seconds(proc.pid)
            per_job = 1e6 / start_left
            return start_left / elapsed, (master1 - master0) * per_job, (children1 - children0) * per_job
        finally:
            stop(proc)


def loop_cpu(n: int, counting: bool) -> float:
    """CPU microseconds per no-op job of the worker loop in this process (what a prefork
    child runs), with the job-metrics hook subscribed or not: the exporter's only per-job
    cost. Redis runs in its own process, so it is not in this figure (it is unchanged:
    the exporter adds no Redis call per job)."""
    from cogworker.core import hooks
    from cogworker.engine.loop import Worker
    from cogworker.metrics import jobcounts as jobmetrics

    jobmetrics.enable()
    names = ("succeeded", "retrying", "dead")
    if counting:
        hooks.subscribe(names, jobmetrics._on_run)
    else:
        hooks.unsubscribe(names, jobmetrics._on_run)
    with Env() as env:
        env.app.noop.enqueue_many([(i,) for i in range(n)])
        worker = Worker([("default", None)], block_timeout=0.05, max_jobs=n, **plain_fetch(Worker))
        started = time.process_time()
        worker.run()
        return (time.process_time() - started) / n * 1e6


def exporter_cost(reps: int, n: int) -> None:
    """``--exporter``: --metrics-port on vs off, alternating runs (off, on, off, on, ...)."""
    off_cpu, on_cpu = [], []
    for _ in range(reps * 2):
        off_cpu.append(loop_cpu(n // 2, False))
        on_cpu.append(loop_cpu(n // 2, True))
    print(f"worker loop (a child's), {reps * 2} alternating runs of {n // 2} no-op jobs, CPU us/job of the loop:")
    print(
        f"  job metrics off: {summary(off_cpu)}; on: {summary(on_cpu)}; "
        f"on/off {statistics.median(on_cpu) / statistics.median(off_cpu):.3f}"
    )
    for procs in (1, 2):
        off: list[tuple[float, float, float]] = []
        on: list[tuple[float, float, float]] = []
        for _ in range(reps):
            off.append(exporter_run(procs, n, False))
            on.append(exporter_run(procs, n, True))
        print(f"prefork --procs {procs}, {reps} alternating runs of {n} no-op jobs, median [min-max]:")
        for name, runs in (("off", off), ("on ", on)):
            print(
                f"  exporter {name}: {summary([x[0] for x in runs])} jobs/s; CPU us/job: master "
                f"{summary([x[1] for x in runs])}, children {summary([x[2] for x in runs])}"
            )
        # The master's CPU per job is near psutil's 10 ms resolution over a run: a ratio only if it shows.
        ratio = [
            f"{statistics.median(x[i] for x in on) / base:.3f}"
            if (base := statistics.median(x[i] for x in off))
            else "n/a"
            for i in range(3)
        ]
        print(f"  on/off: throughput {ratio[0]}, master CPU/job {ratio[1]}, children CPU/job {ratio[2]}")


def recovery(reps: int) -> list[float]:
    """SIGKILL the child running a 1 s job; milliseconds until the job starts again."""
    results = []
    with Env() as env:
        r = env.config.redis()
        proc = env.prefork(2)
        try:
            time.sleep(1.5)
            for rep in range(reps):
                r.delete("bench:slow")
                env.app.slow.enqueue(f"t{rep}", 1.0)
                while r.llen("bench:slow") < 1:
                    time.sleep(0.001)
                _, pid, _ = r.lindex("bench:slow", 0).decode().split()
                killed = time.time()
                os.kill(int(pid), signal.SIGKILL)
                deadline = killed + 20
                while r.llen("bench:slow") < 2 and time.time() < deadline:
                    time.sleep(0.001)
                again = r.lindex("bench:slow", 1)
                results.append((float(again.decode().split()[2]) - killed) * 1000 if again else float("inf"))
                time.sleep(1.5)  # the rerun finishes; the replacement child is up
        finally:
            stop(proc)
    return results


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} [{min(values):,.1f}-{max(values):,.1f}]"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


APP_PATH = app_dir("core_app", APP)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument(
        "--exporter",
        action="store_true",
        help="only the cost of --metrics-port: prefork no-op throughput and CPU per job, on vs off",
    )
    args = ap.parse_args(argv)
    if args.exporter:
        exporter_cost(args.reps, args.jobs)
        return
    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpus": os.cpu_count(),
        "redis": redis_version(),
        "python": sys.version.split()[0],
        "reps": args.reps,
    }
    rows = []
    single = [single_process_throughput(args.jobs) for _ in range(args.reps)]
    rows.append(("single-process no-op throughput, jobs/s", summary(single)))
    rates = [enqueue_rates(2000) for _ in range(args.reps)]
    rows.append(("enqueue, single calls, jobs/s", summary([s for s, _ in rates])))
    rows.append(("enqueue, enqueue_many (1,000 a call), jobs/s", summary([b for _, b in rates])))
    lat = [pickup_latency(300) for _ in range(args.reps)]
    rows.append(("idle pickup p50, ms", summary([percentile(x, 50) for x in lat])))
    rows.append(("idle pickup p99, ms", summary([percentile(x, 99) for x in lat])))
    for procs in (1, 2):
        tp = [prefork_throughput(procs, args.jobs) for _ in range(args.reps)]
        rows.append((f"prefork --procs {procs} no-op throughput, jobs/s", summary(tp)))
        results[f"prefork_{procs}"] = tp
    rec = recovery(10)
    rows.append(("SIGKILL child mid-job -> job running again, ms (10 kills)", summary(rec)))
    results.update(single=single, enqueue=rates, pickup_ms=lat, recovery_ms=rec)
    width = max(len(k) for k, _ in rows)
    print(
        f"cogworker core figures: {results['date']}, {results['cpus']} CPUs, redis {results['redis']}, "
        f"median [min-max] of {args.reps} runs"
    )
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    out = Path(__file__).parent / "results" / "core-latest.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
