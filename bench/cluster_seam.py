"""Which client the cluster seam should use (docs/architecture.md#cluster, store/cluster.py):
per command, the client cost of redis-py's ``RedisCluster`` against cogworker's slot
client (a plain ``redis.Redis`` whose connections go to the master serving the
namespace's slot), and a plain ``redis.Redis`` on a lone Redis as the baseline; then a
single enqueue of a no-op job through each config (plain Redis, cluster).

    python -m bench.cluster_seam            # 5 repetitions, alternating, medians
    python -m bench.cluster_seam --ops 5000 --reps 3

A cluster of 3 masters + 3 replicas and one lone Redis on loopback, nothing else on them.
Each repetition times ``--ops`` round trips of ``LPUSH k v`` + ``RPOP k`` (two commands, one
key of the namespace's slot) per client, in turn. Latency is mostly loopback and Redis; the
difference between clients is what each adds in Python. Writes
bench/results/cluster-seam-latest.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
KEY = "{cwbench}:queue:default"


def _time(ops: int, push: Callable[..., Any], pop: Callable[..., Any]) -> float:
    started = time.perf_counter()
    for _ in range(ops):
        push(KEY, b"x")
        pop(KEY)
    return (time.perf_counter() - started) / ops * 1e6  # µs per push+pop


def _enqueue(ops: int, config: Any) -> float:
    import cogworker
    from bench.apps import failover_app

    cogworker.config._config = config
    started = time.perf_counter()
    for i in range(ops):
        failover_app.noop.enqueue(i)
    config.redis().delete(config.keys.queue("default"))
    return (time.perf_counter() - started) / ops * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster_seam")
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    from redis.cluster import RedisCluster

    import cogworker
    from cogworker.testing.cluster import Cluster
    from cogworker.testing.servers import RedisServer

    cluster, lone = Cluster().start(), RedisServer().start()
    try:
        slot_config = cogworker.Config(redis_url=cluster.url, namespace="{cwbench}")
        plain_config = cogworker.Config(redis_url=lone.url, namespace="cwbench")
        clients = {
            "plain Redis (lone server)": lone.client(),
            "slot client (cogworker, cluster)": slot_config.redis(),
            "RedisCluster (redis-py)": RedisCluster.from_url(cluster.url),
        }
        rows: dict[str, list[float]] = {name: [] for name in [*clients, "enqueue: plain", "enqueue: cluster"]}
        for _ in range(args.reps):
            for name, client in clients.items():
                rows[name].append(_time(args.ops, client.lpush, client.rpop))
            rows["enqueue: plain"].append(_enqueue(args.ops, plain_config))
            rows["enqueue: cluster"].append(_enqueue(args.ops, slot_config))
    finally:
        cluster.cleanup()
        lone.cleanup()
    base = statistics.median(rows["plain Redis (lone server)"])
    lines = [
        f"# Cluster seam: client cost per operation ({args.ops} ops x {args.reps} reps, medians)",
        "",
        "| client | µs per op | ratio to plain |",
        "| --- | ---: | ---: |",
    ]
    for name, values in rows.items():
        ref = base if not name.startswith("enqueue") else statistics.median(rows["enqueue: plain"])
        lines.append(f"| {name} | {statistics.median(values):.1f} | {statistics.median(values) / ref:.2f} |")
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cluster-seam-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
