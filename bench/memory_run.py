"""Redis memory against finished jobs, with cogworker's default retention (issue #30 part 1).

One fresh private redis-server, one ``cogworker-prefork --procs N`` with the default
configuration, and this process enqueueing a mix of jobs (bench/apps/bench_memory.py),
sampling ``INFO memory`` ``used_memory`` every ``--sample`` seconds. Two modes:

- ``--minutes M`` (default 60): enqueue ``--rate`` jobs/s (default 300) for M minutes:
  89.6 % quick (no-op), 8 % work (2 ms of CPU), 0.4 % slow (1.2 s: its "running" is
  written), 1.5 % fail (dead at once), 0.5 % fail_twice (one retry, then dead). The check:
  ``used_memory`` over the last half of the run stays within 10 % (max/min - 1).
- ``--jobs N`` (with ``--fail-rate``, default 0.05): enqueue N jobs (quick, and fail for
  the failing share) as fast as the worker takes them, wait until all are finished, then
  compare ``used_memory`` with the empty instance's (the check: within 12 MB). Under the
  count bounds (``--jobs 10000 --fail-rate 0``, ``--jobs 2000 --fail-rate 1``) its
  ``bytes_per_job_over_idle`` is what one retained success, or one dead job, costs.

Writes ``bench/results/memory-<UTC time>.json`` (every sample) and, with matplotlib (in
bench/.venv-peers; ``python -m bench.memory_plot FILE``), the plot. Run from the checkout:

    nice -n 10 .venv/bin/python -m bench.memory_run --minutes 60
    .venv/bin/python -m bench.memory_run --jobs 50000 --fail-rate 0.05
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.redis_server import RedisServer, redis_version

HERE = Path(__file__).resolve().parent
APPS = HERE / "apps"
RESULTS = HERE / "results"
MIX = (("quick", 0.896), ("work", 0.08), ("slow", 0.004), ("fail", 0.015), ("fail_twice", 0.005))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--minutes", type=float, default=None, help="timed run at --rate (default: 60)")
    mode.add_argument("--jobs", type=int, default=None, help="a fixed number of jobs, as fast as taken")
    parser.add_argument("--rate", type=float, default=300.0, help="jobs per second in a timed run")
    parser.add_argument("--fail-rate", type=float, default=0.05, help="failing share of --jobs")
    parser.add_argument("--procs", type=int, default=3)
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--out", type=Path, default=None, help="results file (default: bench/results/memory-*.json)")
    args = parser.parse_args(argv)
    if args.jobs is None and args.minutes is None:
        args.minutes = 60.0
    return args


def start_worker(url: str, procs: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ, BENCH_REDIS_URL=url, PYTHONPATH=os.pathsep.join([str(APPS), str(HERE.parent)]))
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cogworker.prefork.cli", "--procs", str(procs), "--redis-url", url, "bench_memory"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(APPS),
            start_new_session=True,
        )


def sample(client, keys, t0: float, enqueued: int) -> dict:
    info = client.info("memory")
    pipe = client.pipeline(transaction=False)
    for name in (keys.stats_processed, keys.stats_failed):
        pipe.get(name)
    for name in (keys.retained_succeeded, keys.retained_failed, keys.dead, keys.retry):
        pipe.zcard(name)
    pipe.dbsize()
    pipe.llen(keys.queue("default"))
    processed, failed, kept_ok, kept_failed, dead, retry, dbsize, queued = pipe.execute()
    return {
        "t": round(time.time() - t0, 1),
        "used_memory": info["used_memory"],
        "used_memory_rss": info.get("used_memory_rss"),
        "enqueued": enqueued,
        "processed": int(processed or 0),
        "failed": int(failed or 0),
        "retained_succeeded": kept_ok,
        "retained_failed": kept_failed,
        "dead": dead,
        "retry": retry,
        "keys": dbsize,
        "queued": queued,
    }


def pick(rng: random.Random, fail_rate: float | None) -> str:
    if fail_rate is not None:
        return "fail" if rng.random() < fail_rate else "quick"
    x, total = rng.random(), 0.0
    for name, share in MIX:
        total += share
        if x < total:
            return name
    return "quick"


def enqueue(app, name: str, n: int) -> None:
    job = getattr(app, name)
    if name == "work":
        job.enqueue(2.0)
    elif name == "slow":
        job.enqueue(1.2)
    else:
        job.enqueue(n)


def run(args: argparse.Namespace) -> dict:
    rng = random.Random(30)
    with RedisServer() as server:
        import redis

        import cogworker

        client = redis.Redis.from_url(server.url)
        empty = client.info("memory")["used_memory"]
        config = cogworker.configure(redis_url=server.url)
        sys.path.insert(0, str(APPS))
        os.environ["BENCH_REDIS_URL"] = server.url
        import bench_memory as app

        log = Path(tempfile.gettempdir()) / f"cogworker-memory-run-{os.getpid()}.log"
        worker = start_worker(server.url, args.procs, log)
        try:
            time.sleep(3)
            idle = client.info("memory")["used_memory"]
            samples, t0, enqueued = drive(args, client, config, app, rng)
            drained = wait_drained(client, config, enqueued, samples, t0, args.sample)
            samples.append(sample(client, config.keys, t0, enqueued))
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        after_stop = client.info("memory")["used_memory"]
        total = args.jobs
        return {
            "mode": "jobs" if total is not None else "minutes",
            "args": {k: str(v) for k, v in vars(args).items()},
            "redis": redis_version(),
            "empty_used_memory": empty,
            "idle_used_memory": idle,
            "after_stop_used_memory": after_stop,
            "enqueued": enqueued,
            "drained": drained,
            "samples": samples,
            "verdict": verdict(samples, empty, total is not None),
            "bytes_per_job_over_idle": round((samples[-1]["used_memory"] - idle) / max(enqueued, 1)),
        }


def drive(args: argparse.Namespace, client, config, app, rng: random.Random) -> tuple[list, float, int]:
    """Enqueues (``--jobs``: as fast as taken; ``--minutes``: at ``--rate``), sampling."""
    samples, t0, enqueued = [], time.time(), 0
    next_sample = t0
    total = args.jobs
    end = None if args.minutes is None else t0 + args.minutes * 60
    while (end is not None and time.time() < end) or (total is not None and enqueued < total):
        now = time.time()
        if now >= next_sample:
            samples.append(sample(client, config.keys, t0, enqueued))
            print(json.dumps(samples[-1]), flush=True)
            next_sample += args.sample
        if total is not None:  # as fast as taken: keep the backlog under 2,000
            if client.llen(config.keys.queue("default")) < 2000:
                for _ in range(min(500, total - enqueued)):
                    enqueue(app, pick(rng, args.fail_rate), enqueued)
                    enqueued += 1
            else:
                time.sleep(0.01)
            continue
        due = int((now - t0) * args.rate) - enqueued
        for _ in range(max(0, due)):
            enqueue(app, pick(rng, None), enqueued)
            enqueued += 1
        time.sleep(0.01)
    return samples, t0, enqueued


def wait_drained(client, config, enqueued: int, samples: list, t0: float, every: float) -> bool:
    """Waits (at most 10 minutes) until every job is finished: queue, retry set and
    in-progress lists empty; the finished count adds up once the stats are flushed."""
    deadline, last = time.time() + 600, time.time()
    while time.time() < deadline:
        pending = client.llen(config.keys.queue("default")) + client.zcard(config.keys.retry)
        busy = sum(client.llen(k) for k in client.scan_iter(match=config.keys.in_progress_prefix + "*", count=1000))
        if pending == 0 and busy == 0:
            time.sleep(3)  # the last status and stats flushes
            return True
        if time.time() - last >= every:
            samples.append(sample(client, config.keys, t0, enqueued))
            last = time.time()
        time.sleep(0.5)
    return False


# What one job waiting in a queue costs (its payload in the list, its enq: field): measured
# by enqueueing 10,000 `quick` jobs with no worker, 337 bytes. A stalled worker (a loaded
# machine) lets a backlog build, which is not retention's: the verdict shows both.
QUEUED_JOB_BYTES = 337


def queued(sample: dict) -> int:
    """The jobs waiting: sampled, or (older results) estimated from the counters (low by
    the retried jobs' extra failures)."""
    if "queued" in sample:
        return int(sample["queued"])
    return max(0, sample["enqueued"] - sample["processed"] - sample["failed"])


def verdict(samples: list, empty: int, fixed: bool) -> dict:
    final = samples[-1]["used_memory"]
    if fixed:
        return {"final_minus_empty_mb": round((final - empty) / 1e6, 2), "within_12mb": final - empty <= 12e6}
    end = samples[-1]["t"]
    half = [s for s in samples if s["t"] >= end / 2]
    tail = [s["used_memory"] for s in half]
    less = [s["used_memory"] - queued(s) * QUEUED_JOB_BYTES for s in half]
    spread, spread_less = max(tail) / min(tail) - 1, max(less) / min(less) - 1
    return {
        "last_half_min_mb": round(min(tail) / 1e6, 2),
        "last_half_max_mb": round(max(tail) / 1e6, 2),
        "last_half_spread": round(spread, 4),
        "flat_within_10pct": spread <= 0.10,
        "last_half_most_queued": max(queued(s) for s in half),
        "less_queued_min_mb": round(min(less) / 1e6, 2),
        "less_queued_max_mb": round(max(less) / 1e6, 2),
        "less_queued_spread": round(spread_less, 4),
        "less_queued_flat_within_10pct": spread_less <= 0.10,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    result = run(args)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    kind = "jobs" if args.jobs is not None else "hour" if args.minutes >= 60 else "minutes"
    out = args.out or RESULTS / f"memory-{kind}-{stamp}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["verdict"]), "->", out)
    plotter = HERE / ".venv-peers" / "bin" / "python"
    if plotter.exists():
        subprocess.run([str(plotter), "-m", "bench.memory_plot", str(out)], cwd=str(HERE.parent), check=False)
    return 0 if all(v for k, v in result["verdict"].items() if isinstance(v, bool)) else 1


if __name__ == "__main__":
    sys.exit(main())
