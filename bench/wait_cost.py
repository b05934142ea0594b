"""What wait_replicas=1 costs per job (docs/operations/failover.md; docs/architecture.md#replication).

    python -m bench.wait_cost            # 3 repetitions of each, alternating, medians
    python -m bench.wait_cost --jobs 2000 --reps 1

A master and a real replica on loopback (redis-server --replicaof), nothing else on them.
Each repetition, for wait_replicas 0 and 1 in turn, on the same Redis pair, emptied:

- enqueue: ``--jobs`` single enqueues of a no-op job from one thread (the client's
  wait_replicas set), as enqueues/s and the master's CPU (INFO used_cpu_user + sys) per enqueue;
- work: the same jobs consumed by ``cogworker-prefork --procs 2`` (COGWORKER_WAIT_REPLICAS
  set): the queue is paused while filled, then resumed; jobs/s from the resume until
  the queue and every in-progress list are empty, and the master's CPU per job.

Writes bench/results/wait-cost-<time>.json and wait-cost-latest.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _enqueue(jobs: int, master: Any) -> tuple[float, float]:
    from bench.apps import failover_app

    cpu, started = _cpu(master), time.perf_counter()
    for i in range(jobs):
        failover_app.noop.enqueue(i)
    elapsed = time.perf_counter() - started
    return jobs / elapsed, (_cpu(master) - cpu) / jobs * 1e6


def _work(jobs: int, master: Any, worker: Any) -> tuple[float, float]:
    from cogworker import api

    queue = api.Queue("default")
    cpu, started = _cpu(master), time.perf_counter()
    queue.resume()
    while master.llen("cogworker:queue:default"):  # one cheap command a poll: its CPU is counted too
        time.sleep(0.01)
    while worker._busy(master, "cogworker"):  # the last jobs still on in-progress lists
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    return jobs / elapsed, (_cpu(master) - cpu) / jobs * 1e6


def one(wait: int, jobs: int, url: str, master: Any) -> dict[str, float]:
    import cogworker

    master.flushall()
    cogworker.config._config = None
    cogworker.configure(redis_url=url, wait_replicas=wait, wait_timeout=2.0, status=False, history=False)
    env = {"COGWORKER_WAIT_REPLICAS": str(wait), "COGWORKER_WAIT_TIMEOUT": "2.0", "PYTHONPATH": str(ROOT)}
    return measure(jobs, master, env)


def measure(jobs: int, master: Any, env: dict[str, str]) -> dict[str, float]:
    """Enqueue and drain as configured (the worker gets ``env``; bench/durability_crash.py
    measures durability="aof" with it too)."""
    from cogworker import api, get_config
    from cogworker.testing.servers import PreforkWorker

    api.Queue("default").pause()
    enqueue_rate, enqueue_cpu = _enqueue(jobs, master)
    env = {**env, "BENCH_FAILOVER_LOG": "/dev/null"}
    worker = PreforkWorker(get_config().redis_url, "bench.apps.failover_app", procs=2, env=env)
    try:
        worker.wait_ready()
        work_rate, work_cpu = _work(jobs, master, worker)
    finally:
        worker.stop()
    return {
        "enqueue_per_s": enqueue_rate,
        "enqueue_cpu_us": enqueue_cpu,
        "jobs_per_s": work_rate,
        "work_cpu_us": work_cpu,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.wait_cost")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from cogworker.testing.servers import RedisServer

    primary = RedisServer().start()
    replica = RedisServer(args=("--replicaof", "127.0.0.1", str(primary.port)))
    try:
        replica.start()
        while primary.client().info("replication").get("slave0", {}).get("state") != "online":
            time.sleep(0.05)  # counted as connected while it still syncs: WAIT would wait on it
        url = primary.url
        rows: dict[int, list[dict[str, float]]] = {0: [], 1: []}
        for rep in range(args.reps):
            for wait in (0, 1):
                rows[wait].append(one(wait, args.jobs, url, primary.client()))
                print(f"rep {rep + 1} wait_replicas={wait}: {rows[wait][-1]}", flush=True)
    finally:
        replica.cleanup()
        primary.cleanup()
    medians = {wait: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for wait, runs in rows.items()}
    command = "python -m bench.wait_cost " + " ".join(argv if argv is not None else sys.argv[1:])
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"wait-cost-{stamp}.json").write_text(
        json.dumps({"command": command.strip(), "jobs": args.jobs, "reps": rows, "medians": medians}, indent=1) + "\n"
    )
    text = report(medians, command.strip(), args)
    (RESULTS / "wait-cost-latest.md").write_text(text)
    print(text)


def report(medians: dict[int, dict[str, float]], command: str, args: argparse.Namespace) -> str:
    off, on = medians[0], medians[1]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"# What wait_replicas=1 costs (medians of {args.reps}, {args.jobs:,} no-op jobs each)",
        "",
        f"`{command}` ({when}); a master and one replica on loopback, 2 cores.",
        "",
        "| | wait_replicas=0 | wait_replicas=1 | ratio |",
        "|---|---|---|---|",
    ]
    for key, label, fmt in (
        ("enqueue_per_s", "single enqueues/s (one thread)", "{:,.0f}"),
        ("enqueue_cpu_us", "master CPU per enqueue (µs)", "{:.1f}"),
        ("jobs_per_s", "jobs/s (prefork --procs 2)", "{:,.0f}"),
        ("work_cpu_us", "master CPU per job consumed (µs)", "{:.1f}"),
    ):
        lines.append(f"| {label} | {fmt.format(off[key])} | {fmt.format(on[key])} | {on[key] / off[key]:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
