"""The same work on one Redis and on a Redis Cluster of 3 masters (docs/operations/cluster.md).

    python -m bench.cluster                    # 3 rounds of each layout, medians
    python -m bench.cluster --rounds 1 --jobs 1000
    python -m bench.cluster --rounds 1 --jobs 50 --layouts queue   # one layout (keys below)

The work: 6 busy queues of no-op jobs (``--jobs`` each, filled while paused), worked by 3
``cogworker-prefork`` masters, each on 2 of the queues (``--procs`` children each, 2 by
default: the queue layout needs a child per queue). The queues are resumed together; the
run ends when every queue and in-progress list is empty. Four layouts (``--layouts`` keys
in brackets), the same processes and queues in each:

- ``1 master`` [single]: one plain Redis (and its replica, as each cluster master has one); the 3
  prefork masters in 3 namespaces (``{cw-a}``, ...).
- ``3 masters`` [spread]: a cluster of 3 masters + 3 replicas (cogworker.testing.cluster); 3
  namespaces whose hash tags fall on 3 different masters (picked from the cluster's own
  slot map), one per prefork master: each master carries one namespace.
- ``3 masters, one namespace`` [one]: the same cluster, the 3 prefork masters all in one
  namespace (``{cogworker}``): its one slot is on one master, which carries it all.
- ``3 masters, one namespace, queue layout`` [queue]: the same, with the prefork masters
  started with ``COGWORKER_CLUSTER_LAYOUT=queue``: each queue is a shard of its own
  (``{cogworker:q1}``, ...), in a slot of its own; q1..q6 land 2/2/2 on the 3 masters.
  Filled, paused and resumed through the client and the API, which route each queue to
  its shard; the busy check reads each shard (bench/cluster_layouts.py).

Per layout and round: jobs/s, and for each master its share of the keys (DBSIZE after the
fill), of the Redis CPU (INFO cpu used_cpu_user + used_cpu_sys, deltas over the run) and
of the commands (INFO stats total_commands_processed deltas). Medians of ``--rounds``.
Writes bench/results/cluster-<time>.json and cluster-latest.md (``--results``: elsewhere).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import cluster_layouts

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
QUEUES_PER_WORKER = 2
WORKERS = 3


@dataclass
class Layout:
    """Where the work runs: the URL, the masters (RedisServer each) and each prefork
    master's namespace (repeated: several in one namespace); ``key``: its --layouts name."""

    name: str
    url: str
    masters: list[Any]
    namespaces: list[str]
    key: str = ""
    sharded: bool = False  # the queue layout (COGWORKER_CLUSTER_LAYOUT=queue)


def tags_on_masters(cluster: Any) -> list[str]:
    """One namespace (a hash tag, ``{cw-a}``, ``{cw-b}``, ...) per master of ``cluster``,
    each served by a different master: the first names whose slot falls on each."""
    from cogworker.testing.cluster import key_slot

    masters = cluster.masters()
    chosen: dict[str, str] = {}
    for letter in "abcdefghijklmnopqrstuvwxyz":
        tag = f"{{cw-{letter}}}"
        slot = key_slot(tag)
        owner = next(m for m in masters if any(low <= slot <= high for low, high in m.slots))
        chosen.setdefault(owner.node_id, tag)
        if len(chosen) == len(masters):
            return list(chosen.values())
    raise RuntimeError("no tag found for every master")


def _cpu_and_commands(server: Any) -> tuple[float, int]:
    client = server.client()
    cpu, stats = client.info("cpu"), client.info("stats")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), int(stats["total_commands_processed"])


def _configure(url: str, namespace: str, sharded: bool = False) -> Any:
    import cogworker

    cogworker.config._config = None
    return cogworker.configure(redis_url=url, namespace=namespace, cluster_layout="queue" if sharded else "namespace")


def _queues(index: int) -> list[str]:
    return [f"q{index * QUEUES_PER_WORKER + n + 1}" for n in range(QUEUES_PER_WORKER)]


def _fill(layout: Layout, jobs: int) -> None:
    """Every master emptied, every queue paused and filled with ``jobs`` no-op jobs."""
    from bench.apps import failover_app
    from cogworker import api

    for server in layout.masters:
        server.client().flushall()
    for index, namespace in enumerate(layout.namespaces):
        _configure(layout.url, namespace, layout.sharded)  # the queue layout: each queue to its own shard
        for queue in _queues(index):
            api.Queue(queue).pause()
            bound = failover_app.noop.options(queue=queue)
            for start in range(0, jobs, 500):
                bound.enqueue_many([(i,) for i in range(start, min(jobs, start + 500))])


def _resume(layout: Layout, clients: dict[str, Any]) -> None:
    from cogworker import api

    for index, namespace in enumerate(layout.namespaces):
        _configure(layout.url, namespace, layout.sharded)
        for queue in _queues(index):
            api.Queue(queue).resume()


def _busy(layout: Layout, clients: dict[str, Any]) -> bool:
    """A job still waits on a queue or sits on an in-progress list (``clients``: one per
    namespace, made once: a poll opens no connection; the queue layout: ``"shards"``, each
    queue's shard config)."""
    from cogworker.testing.servers import PreforkWorker

    if layout.sharded:
        return cluster_layouts.busy(clients["shards"])
    for index, namespace in enumerate(layout.namespaces):
        if any(clients[namespace].llen(f"{namespace}:queue:{queue}") for queue in _queues(index)):
            return True
    return any(PreforkWorker._busy(clients[ns], ns) for ns in clients)


def one_round(layout: Layout, jobs: int, procs: int) -> dict[str, Any]:
    from cogworker.testing.servers import PreforkWorker

    _fill(layout, jobs)
    keys = [int(server.client().dbsize()) for server in layout.masters]
    env = {
        "PYTHONPATH": str(ROOT),
        "BENCH_FAILOVER_LOG": "/dev/null",
        "COGWORKER_CLUSTER_LAYOUT": "queue" if layout.sharded else "namespace",
    }
    workers = []
    try:
        for index, namespace in enumerate(layout.namespaces):
            queues = [arg for queue in _queues(index) for arg in ("-q", f"{queue},1")]
            workers.append(
                PreforkWorker(
                    layout.url, "bench.apps.failover_app", procs=procs, env=env, namespace=namespace, args=tuple(queues)
                )
            )
        for worker in workers:
            worker.wait_ready()
        clients = _clients(layout)
        before = [_cpu_and_commands(server) for server in layout.masters]
        started = time.perf_counter()
        _resume(layout, clients)
        while _busy(layout, clients):
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        after = [_cpu_and_commands(server) for server in layout.masters]
    finally:
        for worker in workers:
            worker.stop()
    total = jobs * QUEUES_PER_WORKER * len(layout.namespaces)
    cpu = [a[0] - b[0] for a, b in zip(after, before, strict=True)]
    commands = [a[1] - b[1] for a, b in zip(after, before, strict=True)]
    return {
        "jobs": total,
        "seconds": elapsed,
        "jobs_per_s": total / elapsed,
        "redis_cpu_us_per_job": sum(cpu) / total * 1e6,
        "redis_commands_per_job": sum(commands) / total,
        "cpu_share": _shares(cpu),
        "command_share": _shares(commands),
        "key_share": _shares(keys),
    }


def _clients(layout: Layout) -> dict[str, Any]:
    """What the busy check polls, made before the clock: each namespace's client, or in the
    queue layout each queue's shard (its client made here)."""
    if layout.sharded:
        found = [
            pair
            for index, namespace in enumerate(layout.namespaces)
            for pair in cluster_layouts.shards(layout.url, namespace, _queues(index))
        ]
        for _, shard in found:
            shard.redis().ping()
        return {"shards": found}
    return {namespace: _configure(layout.url, namespace).redis() for namespace in layout.namespaces}


def _shares(values: list[float] | list[int]) -> list[float]:
    total = sum(values)
    return [value / total if total else 0.0 for value in values]


LAYOUT_KEYS = ("single", "spread", "one", "queue")


def _single() -> tuple[Any, Any]:
    """One plain Redis and its replica (each cluster master feeds one, which costs it CPU)."""
    from bench.failover_targets import online_replicas
    from cogworker.testing.servers import RedisServer

    single = RedisServer().start()
    replica = RedisServer(args=("--replicaof", "127.0.0.1", str(single.port))).start()
    while online_replicas(single.client()) < 1:
        time.sleep(0.05)
    return single, replica


def layouts(wanted: tuple[str, ...] = LAYOUT_KEYS) -> tuple[list[Layout], list[Any]]:
    """The layouts named in ``wanted`` (LAYOUT_KEYS), and what to clean up after them (only
    the servers they need are started)."""
    from cogworker.testing.cluster import Cluster

    found: list[Layout] = []
    owned: list[Any] = []
    cluster = Cluster().start() if set(wanted) - {"single"} else None
    if cluster is not None:
        owned.append(cluster)
        masters = cluster.masters()
        tags = tags_on_masters(cluster)
        # The masters in a fixed order, for every cluster row: the one of {cw-a}'s slot first, ...
        by_tag = [next(m for m in masters if m.node_id == cluster.owner(f"{tag}:x").node_id).server for tag in tags]
        url = f"redis://127.0.0.1:{masters[0].port}/0"
    if "single" in wanted:
        single, replica = _single()
        owned[:0] = [replica, single]
        names = tags if cluster is not None else [f"{{cw-{letter}}}" for letter in "abc"]
        found.append(Layout("1 master", single.url, [single], names, "single"))
    if cluster is not None:
        one = ["{cogworker}"] * WORKERS
        rows = [
            Layout("3 masters", url, by_tag, tags, "spread"),
            Layout("3 masters, one namespace", url, by_tag, one, "one"),
            Layout("3 masters, one namespace, queue layout", url, by_tag, one, "queue", sharded=True),
        ]
        found += [row for row in rows if row.key in wanted]
    return found, owned


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds; each master's shares in the same order (by namespace)."""
    masters = len(rounds[0]["cpu_share"])
    return {
        "jobs_per_s": statistics.median(r["jobs_per_s"] for r in rounds),
        "redis_cpu_us_per_job": statistics.median(r["redis_cpu_us_per_job"] for r in rounds),
        "redis_commands_per_job": statistics.median(r["redis_commands_per_job"] for r in rounds),
        **{
            name: [statistics.median(r[name][i] for r in rounds) for i in range(masters)]
            for name in ("cpu_share", "command_share", "key_share")
        },
        "max_cpu_share": statistics.median(max(r["cpu_share"]) for r in rounds),
    }


def report(results: dict[str, dict[str, Any]], command: str, args: argparse.Namespace) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"# The same work on 1 and on 3 Redis masters (medians of {args.rounds})",
        "",
        f"`{command}` ({when}); {WORKERS * QUEUES_PER_WORKER} busy queues of {args.jobs:,} no-op jobs each, "
        f"{WORKERS} `cogworker-prefork --procs {args.procs}` masters (2 queues each); 2 cores, shared.",
        "",
        "| layout | jobs/s | Redis CPU per job | commands per job | each master's share of the Redis CPU "
        "| of the commands | of the keys | busiest master ≤ 50 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = (results.get("1 master") or next(iter(results.values())))["jobs_per_s"]
    for name, row in results.items():
        shares = {
            key: " / ".join(f"{s * 100:.0f} %" for s in row[key]) for key in ("cpu_share", "command_share", "key_share")
        }
        meets = "yes" if row["max_cpu_share"] <= 0.5 else "no"
        lines.append(
            f"| {name} | {row['jobs_per_s']:,.0f} ({row['jobs_per_s'] / base:.2f}x) | "
            f"{row['redis_cpu_us_per_job']:.1f} µs | {row['redis_commands_per_job']:.2f} | "
            f"{shares['cpu_share']} | {shares['command_share']} | "
            f"{shares['key_share']} | {meets} ({row['max_cpu_share'] * 100:.0f} %) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10000, help="jobs per queue (6 queues)")
    parser.add_argument(
        "--procs",
        type=int,
        default=2,
        help="children of each of the 3 prefork masters (the queue layout needs 2 or more)",
    )
    parser.add_argument(
        "--layouts", default=",".join(LAYOUT_KEYS), help=f"which layouts, comma-separated, of {','.join(LAYOUT_KEYS)}"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the results go (default: bench/results)")
    args = parser.parse_args(argv)
    wanted = tuple(key.strip() for key in args.layouts.split(",") if key.strip())
    if not wanted or set(wanted) - set(LAYOUT_KEYS):
        parser.error(f"--layouts: choose from {','.join(LAYOUT_KEYS)}")
    if "queue" in wanted and args.procs < QUEUES_PER_WORKER:
        parser.error(f"--procs {args.procs}: the queue layout needs a child per queue (--procs {QUEUES_PER_WORKER})")
    sys.path.insert(0, str(ROOT))
    found, owned = layouts(wanted)
    runs: dict[str, list[dict[str, Any]]] = {layout.name: [] for layout in found}
    try:
        for number in range(args.rounds):  # the layouts alternate, so the machine's noise hits each alike
            for layout in found:
                runs[layout.name].append(one_round(layout, args.jobs, args.procs))
                row = runs[layout.name][-1]
                print(
                    f"round {number + 1} {layout.name}: {row['jobs_per_s']:,.0f} jobs/s, CPU shares "
                    f"{[round(s, 2) for s in row['cpu_share']]}",
                    flush=True,
                )
    finally:
        for thing in owned:
            thing.cleanup()
    write(runs, args, argv)


def write(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace, argv: list[str] | None) -> None:
    """The medians: printed, and with every round in ``--results`` (cluster-<time>.json,
    cluster-latest.md)."""
    results = {name: summary(rows) for name, rows in runs.items()}
    command = ("python -m bench.cluster " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    args.results.mkdir(parents=True, exist_ok=True)
    shown = {**vars(args), "results": str(args.results)}
    (args.results / f"cluster-{stamp}.json").write_text(
        json.dumps({"command": command, "args": shown, "rounds": runs, "medians": results}, indent=1) + "\n"
    )
    text = report(results, command, args)
    (args.results / "cluster-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
