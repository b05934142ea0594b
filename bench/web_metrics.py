"""What the Metrics tab costs: the stats flush that feeds it (commands and wall time of one
flush of 1,000 jobs of 10 classes, in one minute), and its pages over each window with 72
hours of data for ``--classes`` job classes (every minute of the last 72 hours has runs of
every class), each page requested over HTTP from a uvicorn in this process: the median and
slowest of several requests, and the Redis time per request (SLOWLOG, every command logged).
Never asserted: the numbers are for the closing note. Run it on another checkout (with
PYTHONPATH at that checkout) for the flush's figures before a change.

    .venv/bin/python -m bench.web_metrics [--classes N] [--runs N] [--flush-only]
"""

from __future__ import annotations

import argparse
import http.client
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from redis_server import RedisServer, free_port  # noqa: E402
from web_harness import ServerThread  # noqa: E402

import cogworker  # noqa: E402
from cogworker.lifecycle import stats  # noqa: E402


def flush_cost(config: cogworker.Config, runs: int) -> None:
    rng = random.Random(1)
    commands, times, redis_us = [], [], []
    config.redis().config_set("slowlog-log-slower-than", 0)
    config.redis().config_set("slowlog-max-len", 100_000)
    for _ in range(runs):
        buffer = stats.StatsBuffer()
        now = time.time()
        for i in range(1000):
            buffer.record(f"app.jobs.Job{i % 10}", i % 50 != 0, rng.lognormvariate(2, 1), now=now)
        snap = buffer.take()
        client = config.redis()
        client.slowlog_reset()
        started = time.perf_counter()
        stats.flush(config, snap)
        times.append((time.perf_counter() - started) * 1000)
        log = [e for e in client.slowlog_get(100_000) if e["command"].split()[0] != b"SLOWLOG"]
        commands.append(len(log))
        redis_us.append(sum(e["duration"] for e in log))
    config.redis().config_set("slowlog-log-slower-than", 10_000)  # the default again: the fill isn't logged
    config.redis().slowlog_reset()
    print(
        f"flush of 1,000 jobs of 10 classes: {statistics.median(commands):.0f} commands, "
        f"{statistics.median(redis_us):.0f} µs of Redis; wall time median {statistics.median(times):.2f} ms, "
        f"slowest {max(times):.2f} ms ({runs} flushes)"
    )


def fill(config: cogworker.Config, classes: int, hours: int = 72) -> None:
    """A run of every class in every minute of the last ``hours`` hours, 1-4 each."""
    rng = random.Random(2)
    now = time.time()
    started = time.perf_counter()
    for hour in range(hours):
        buffer = stats.StatsBuffer()
        for minute in range(60):
            at = now - (hour * 60 + minute) * 60
            for c in range(classes):
                for _ in range(1 + (c + minute) % 4):
                    buffer.record(f"app.jobs.Job{c}", rng.random() > 0.02, rng.lognormvariate(1 + c % 5, 1), now=at)
        stats.flush(config, buffer.take())
    r = config.redis()
    memory = r.info("memory")["used_memory_human"]
    hourly = [
        k
        for prefix in (config.keys.throughput_hour_prefix, config.keys.durations_hour_prefix)
        for k in r.scan_iter(f"{prefix}*", count=1000)
    ]
    hourly_mb = sum(r.memory_usage(k) or 0 for k in hourly) / 2**20
    print(
        f"filled {hours} h x {classes} classes in {time.perf_counter() - started:.1f} s; Redis {memory}, "
        f"of which the {len(hourly)} per-hour hashes {hourly_mb:.1f} MB"
    )


def get(port: int, path: str, redis_client) -> tuple[float, int]:
    redis_client.slowlog_reset()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    response.read()
    elapsed = (time.perf_counter() - started) * 1000
    conn.close()
    if response.status != 200:
        raise SystemExit(f"{path}: HTTP {response.status}")
    log = redis_client.slowlog_get(1_000_000)
    return elapsed, sum(e["duration"] for e in log if e["command"].split()[0] != b"SLOWLOG")


def pages(config: cogworker.Config, runs: int) -> None:
    from cogworker.web import create_app

    r = config.redis()
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 1_000_000)
    web = ServerThread(create_app(config=config), free_port()).start()
    try:
        print("\n| page | median ms | slowest ms | Redis µs |\n|---|---:|---:|---:|")
        for window in ("1h", "8h", "24h", "72h"):
            for path in (f"/metrics?window={window}", f"/metrics/app.jobs.Job3?window={window}"):
                get(web.port, path, r)  # warm-up
                results = [get(web.port, path, r) for _ in range(runs)]
                times = [t for t, _ in results]
                print(
                    f"| `{path}` | {statistics.median(times):.1f} | {max(times):.1f} | "
                    f"{statistics.median([us for _, us in results]):,.0f} |"
                )
    finally:
        web.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--classes", type=int, default=50)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--flush-only", action="store_true", help="only the flush's cost (works on older checkouts)")
    args = parser.parse_args()
    server = RedisServer().start()
    try:
        config = cogworker.Config(redis_url=server.url)
        flush_cost(config, 50)
        if not args.flush_only:
            config.redis().flushall()
            fill(config, args.classes)
            pages(config, args.runs)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
