"""What a failover loses, Jepsen-style (docs/operations/failover.md; docs/architecture.md#replication).

    python -m bench.failover                 # 10 SIGKILLs of the Sentinel master, without and with wait_replicas=1
    python -m bench.failover --target cluster   # the same on a Redis Cluster: its namespace's master killed
    python -m bench.failover --target cluster-other   # another master killed: the cluster is down meanwhile
    python -m bench.failover --target cluster --layout queue   # the queue layout: the job queue's shard's master killed
    python -m bench.failover --rounds 3 --modes 0

Two deployments on loopback (bench/failover_targets.py): ``sentinel``, a master, a replica
and 3 sentinels with down-after 600 ms (cogworker.testing.sentinel), on its redis+sentinel://
URL; ``cluster``, 3 masters and 3 replicas with cluster-node-timeout 1000 ms
(cogworker.testing.cluster), the namespace ``{cogworker}`` one hash tag, so one master
owns it all (``--layout queue``: producer and worker in the queue layout, the job queue
``default`` a shard of its own, ``{cogworker:default}``, in a slot of its own; the master
serving that slot is the one killed, the fleet's keys wherever ``{cogworker}`` is). A
``cogworker-prefork --procs 2`` worker, and a producer thread enqueueing as fast as the
rate allows. Every acknowledged enqueue (the call returned a jid) is logged by the producer; every job's
start and end by the job itself (bench/apps/failover_app.py, an O_APPEND file: nothing of
the log is in Redis). Each round: load for ``--load`` seconds (with ``--replica-pause S``
the replica is then SIGSTOPped for S seconds, as a replica falling behind, and resumed
right after the kill; with ``--link-break S`` the master drops its replica's link S
seconds before the kill, as a network blip would, and the replica reconnects within about
a second; with ``--payload-kb K`` each job carries K KB, so a paused replica's socket
buffers fill and the rest of the stream waits in the master's memory, lost with it), SIGKILL the master
(on the cluster: the master serving the namespace's slot, or the shard's), wait
for its replica to be promoted, restart the killed node (empty) as a replica of
the new one, so the next round has a replica again. Then the producer stops, the worker
drains, and the logs are compared:

- lost: acknowledged enqueues that never started;
- twice: jobs that started more than once;
- twice at once: jobs whose runs overlapped in time (two processes at once).

Each is also counted per kill (a lost enqueue against the first kill after it was
acknowledged, a job run twice against the first kill after its first start): the report
gives totals and the median per kill.

With ``wait_replicas=1`` (producer and worker) an enqueue returns only once the replica
holds it, and a fetch's, ack's or filing's move is replicated before the worker acts on
it; a write without a replica in time raises NotReplicated (not acknowledged, so not
counted: the producer retries with a new job). Results: bench/results/failover-<time>.json
and failover-latest.md (``--target cluster``: failover-cluster-*; ``--layout queue``:
failover-cluster-queue-*).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.failover_targets import TARGETS, Target

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _producer(
    stop: threading.Event, rate: float, acked: list[tuple[str, float]], refused: Counter[str], padding: str = ""
) -> None:
    import cogworker
    from bench.apps import failover_app

    interval = 1.0 / rate
    next_at = time.monotonic()
    while not stop.is_set():
        tag = uuid.uuid4().hex[:16]
        try:
            if failover_app.work.enqueue(tag, padding):
                acked.append((tag, time.time()))
        except cogworker.NotReplicated:
            refused["not_replicated"] += 1
            time.sleep(0.02)
        except Exception as exc:  # Redis away during the failover: not acknowledged, not counted
            refused[type(exc).__name__] += 1
            time.sleep(0.05)
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_at = time.monotonic()


def _runs(log: Path) -> dict[str, list[tuple[str, int, float]]]:
    found: dict[str, list[tuple[str, int, float]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        event, tag, pid, at = line.split()
        found[tag].append((event, int(pid), float(at)))
    return found


def _overlapping(events: list[tuple[str, int, float]]) -> bool:
    """Two runs of one job at once: a start while another run (another pid's) had not ended."""
    open_runs: dict[int, float] = {}
    for event, pid, _at in sorted(events, key=lambda e: e[2]):
        if event == "start":
            if open_runs:
                return True
            open_runs[pid] = _at
        else:
            open_runs.pop(pid, None)
    return False


def analyse(acked: list[tuple[str, float]], log: Path, kills: list[float] | None = None) -> dict[str, Any]:
    """The counts over the whole run, and per kill (``kills``: when each SIGKILL was sent):
    a lost enqueue is counted against the first kill after its acknowledgement, a job run
    twice against the first kill after its first start."""
    runs = _runs(log)
    starts = {tag: sum(1 for e in events if e[0] == "start") for tag, events in runs.items()}
    acked_at = dict(acked)
    lost = [tag for tag in acked_at if not starts.get(tag)]
    twice = [tag for tag, n in starts.items() if n > 1]
    at_once = [tag for tag, events in runs.items() if _overlapping(events)]
    figures: dict[str, Any] = {
        "acknowledged": len(acked_at),
        "lost": len(lost),
        "ran": sum(1 for tag in acked_at if starts.get(tag)),
        "twice": len(twice),
        "twice_at_once": len(at_once),
        "unacknowledged_ran": sum(1 for tag in starts if tag not in acked_at),
    }
    if kills is not None:
        first = {
            tag: min(at for event, _pid, at in events if event == "start")
            for tag, events in runs.items()
            if any(e[0] == "start" for e in events)
        }
        figures["lost_per_kill"] = _per_kill([acked_at[tag] for tag in lost], kills)
        figures["twice_per_kill"] = _per_kill([first[tag] for tag in twice], kills)
        figures["twice_at_once_per_kill"] = _per_kill([first[tag] for tag in at_once], kills)
    return figures


# A reply the killed master sent just before it died may be read, and a job it handed
# out started, a moment after the kill is logged; nothing new is acknowledged or fetched
# for a second after a kill (a promotion takes about 2 s), so that moment counts as before.
KILL_GRACE = 1.0


def _per_kill(times: list[float], kills: list[float]) -> list[int]:
    """How many of ``times`` fall before each kill (and after the one before it); the
    last entry: after the last kill (none is expected there)."""
    counts = [0] * (len(kills) + 1)
    edges = [kill + KILL_GRACE for kill in kills]
    for at in times:
        counts[bisect.bisect_right(edges, at)] += 1
    return counts


QUEUE = "default"  # the job's queue (in the queue layout: its shard, {cogworker:default})


def drained_within(deadline: float) -> bool:
    """Until no job waits on a queue, in retry or on an in-progress list, for 3 s: in the
    keys of the job queue's shard (the namespace, in the namespace layout), on the client
    of the master serving them."""
    import cogworker
    from cogworker.testing.servers import PreforkWorker

    quiet = 0
    while time.monotonic() < deadline:
        try:
            shard = cogworker.get_config().shard(QUEUE)
            client, namespace = shard.redis(), shard.keys.namespace
            busy = PreforkWorker._busy(client, namespace) or client.zcard(shard.keys.retry) > 0
        except Exception:
            busy = True
        quiet = 0 if busy else quiet + 1
        if quiet >= 6:  # 3 s quiet: reconcile has had its two passes over any stray
            return True
        time.sleep(0.5)
    return False


@dataclass
class Run:
    """One mode's moving parts: the deployment, the worker, the producer and its log."""

    target: Target
    worker: Any
    log: Path
    acked: list[tuple[str, float]] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)
    failovers: list[float] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)


def start_run(target_name: str, wait: int, procs: int, job_seconds: float, layout: str = "namespace") -> Run:
    import cogworker
    from cogworker.testing.servers import PreforkWorker

    work_dir = Path(tempfile.mkdtemp(prefix="cogworker-failover-"))
    log = work_dir / "runs.log"
    log.touch()
    os.environ["BENCH_FAILOVER_LOG"] = str(log)
    target: Target = TARGETS[target_name](layout=layout)
    url = target.url()
    cogworker.config._config = None
    cogworker.configure(
        redis_url=url,
        namespace=target.namespace,
        wait_replicas=wait,
        wait_timeout=0.5,
        socket_timeout=2.0,
        cluster_layout=layout,
    )
    env = {
        "BENCH_FAILOVER_LOG": str(log),
        "COGWORKER_WAIT_REPLICAS": str(wait),
        "COGWORKER_WAIT_TIMEOUT": "0.5",
        "PYTHONPATH": str(ROOT),
        "BENCH_FAILOVER_JOB_SECONDS": str(job_seconds),
        "COGWORKER_CLUSTER_LAYOUT": layout,
    }
    try:
        worker = PreforkWorker(url, "bench.apps.failover_app", procs=procs, env=env, namespace=target.namespace)
    except BaseException:
        target.cleanup()
        raise
    return Run(target, worker, log)


def start_producer(run: Run, rate: float, payload_kb: int = 0) -> threading.Thread:
    """The producer, enqueueing into ``run.acked`` until ``run.stop`` is set."""
    producer = threading.Thread(
        target=_producer, args=(run.stop, rate, run.acked, run.refused, "x" * (payload_kb * 1024)), daemon=True
    )
    producer.start()
    return producer


def one_kill(run: Run, pause: float, link_break: float) -> None:
    """The nemesis once: the replica paused or its link dropped if asked, the master of
    the namespace (the job queue's shard) SIGKILLed, its replica promoted, the killed node back as a replica."""
    lagging = run.target.lagging_replica() if pause else None
    if lagging is not None:  # the replica falls behind (a GC pause, a network hiccup)
        lagging.pause()
        time.sleep(pause)
    if link_break:  # the replica's link drops (a network blip): it reconnects within ~1 s
        run.target.master_client().client_kill_filter(_type="replica")
        time.sleep(link_break)
    run.kills.append(time.time())
    killed = run.target.kill_master()
    if lagging is not None:
        lagging.resume()
    started = time.monotonic()
    run.target.wait_failover(killed, 60)
    run.failovers.append(time.monotonic() - started)
    time.sleep(0.5)  # load on the promoted master while it has no replica
    run.target.rejoin(killed, 60)


def _not_drained(run: Run) -> None:
    """Says where the jobs are, and what the worker said."""
    import cogworker

    client = cogworker.get_config().shard(QUEUE).redis()
    where = {
        key.decode(): client.llen(key)
        for key in client.scan_iter(match=f"{run.target.jobs_namespace}:*")
        if client.type(key) == b"list"
    }
    print(f"  not drained: {where}\n{run.worker.output()[-6000:]}", flush=True)


def one_mode(
    wait: int,
    rounds: int,
    load: float,
    rate: float,
    procs: int,
    pause: float,
    link_break: float,
    job_seconds: float,
    payload_kb: int = 0,
    target: str = "sentinel",
    layout: str = "namespace",
) -> dict[str, object]:
    run = start_run(target, wait, procs, job_seconds, layout)
    try:
        run.worker.wait_ready()
        producer = start_producer(run, rate, payload_kb)
        for number in range(rounds):
            time.sleep(load)
            one_kill(run, pause, link_break)
            print(
                f"  {run.target.name} wait_replicas={wait} round {number + 1}/{rounds}: promoted in "
                f"{run.failovers[-1]:.1f}s, {len(run.acked)} acknowledged so far",
                flush=True,
            )
        time.sleep(load)
        run.stop.set()
        producer.join(30)
        drained = drained_within(time.monotonic() + float(os.environ.get("BENCH_FAILOVER_DRAIN", "180")))
        if not drained:
            _not_drained(run)
        run.worker.stop()
        figures = analyse(run.acked, run.log, run.kills)
    finally:
        run.stop.set()
        if run.worker.stopped is None:
            run.worker.stop()
        run.target.cleanup()
    return {
        "target": run.target.name,
        "layout": layout,
        "wait_replicas": wait,
        "rounds": rounds,
        "drained": drained,
        **figures,
        "refused": dict(run.refused),
        "failover_seconds": [round(s, 2) for s in run.failovers],
        "enqueue_rate": rate,
        "procs": procs,
        "load_seconds": load,
        "replica_paused_before_kill": pause,
        "replica_link_broken_before_kill": link_break,
        "job_seconds": job_seconds,
        "payload_kb": payload_kb,
    }


def _median(values: list[float] | list[int]) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2]) if ordered else 0.0


def report(rows: list[dict[str, Any]], command: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    first = rows[0] if rows else {}
    paused, broken = first.get("replica_paused_before_kill", 0), first.get("replica_link_broken_before_kill", 0)
    title = f", the replica SIGSTOPped {paused:g} s before each kill" if paused else ""
    title += f", the replica's link dropped {broken:g} s before each kill" if broken else ""
    job, rate, size = first.get("job_seconds", 0.002), first.get("enqueue_rate", 0), first.get("payload_kb", 0)
    title += f" ({job:g} s jobs{f' of {size} KB' if size else ''} at up to {rate:g} enqueues/s)"
    target = str(first.get("target", "Sentinel"))
    what = (
        "a Sentinel failover"
        if target == "Sentinel"
        else "a Redis Cluster master's failover"
        if target == "Cluster"
        else f"a Redis Cluster master's failover ({target.split(', ', 1)[1]})"
    )
    lines = [
        f"# What {what} loses{title}",
        "",
        f"`{command}` ({when})",
        "",
        "| wait_replicas | master SIGKILLs | acknowledged enqueues | lost (median per kill) "
        "| ran twice (median per kill) | twice at once | enqueues refused | failover (median s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        kills = int(row["rounds"])
        lost = _median(row.get("lost_per_kill", [0])[:kills])
        twice = _median(row.get("twice_per_kill", [0])[:kills])
        refused = sum(row["refused"].values())
        lines.append(
            f"| {row['wait_replicas']} | {kills} | {row['acknowledged']:,} | {row['lost']:,} ({lost:g}) | "
            f"{row['twice']:,} ({twice:g}) | {row['twice_at_once']:,} | {refused:,} | "
            f"{_median(row['failover_seconds']):.1f} |"
        )
    return "\n".join(lines) + "\n"


def _prefix(args: argparse.Namespace) -> str:
    """failover (Sentinel), failover-cluster, failover-cluster-queue (the queue layout), ..."""
    base = "failover" if args.target == "sentinel" else f"failover-{args.target}"
    return base if args.layout == "namespace" else f"{base}-{args.layout}"


def _result_name(args: argparse.Namespace) -> str:
    base = _prefix(args)
    nemesis = (
        "-large"
        if args.payload_kb
        else "-backlog"
        if args.link_break and args.job_seconds > 0.002
        else "-link-break"
        if args.link_break
        else "-paused"
        if args.replica_pause
        else ""
    )
    return f"{base}{nemesis}-latest.md"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="sentinel",
        help="sentinel: a master, a replica, 3 sentinels; cluster: 3 masters + 3 replicas, "
        "the master of the namespace's slot killed; cluster-other: another master killed "
        "(the cluster is down meanwhile)",
    )
    parser.add_argument(
        "--layout",
        choices=("namespace", "queue"),
        default="namespace",
        help="on a cluster: namespace (all in one slot) or queue (the job queue's shard a slot "
        "of its own, its master the one killed)",
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--load", type=float, default=2.0, help="seconds of load before each kill")
    parser.add_argument("--rate", type=float, default=500.0, help="enqueues per second (at most)")
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--modes", default="0,1", help="wait_replicas values to run, in order")
    parser.add_argument(
        "--replica-pause",
        type=float,
        default=0.0,
        help="SIGSTOP the replica this many seconds before each kill (SIGCONT just after)",
    )
    parser.add_argument(
        "--job-seconds",
        type=float,
        default=0.002,
        help="how long each job sleeps (longer than procs/rate: a backlog builds up)",
    )
    parser.add_argument(
        "--payload-kb",
        type=int,
        default=0,
        help="pad each job to about this many KB (large jobs outrun the socket buffers)",
    )
    parser.add_argument(
        "--link-break",
        type=float,
        default=0.0,
        help="drop the replica's link (CLIENT KILL TYPE replica) this many seconds before each kill",
    )
    args = parser.parse_args(argv)
    if args.layout == "queue" and args.target == "sentinel":
        parser.error("--layout queue is a Redis Cluster's: give --target cluster or cluster-other")
    sys.path.insert(0, str(ROOT))
    rows = []
    for wait in (int(w) for w in args.modes.split(",")):
        print(
            f"{args.target} ({args.layout} layout), wait_replicas={wait}: {args.rounds} SIGKILLs of the master",
            flush=True,
        )
        rows.append(
            one_mode(
                wait,
                args.rounds,
                args.load,
                args.rate,
                args.procs,
                args.replica_pause,
                args.link_break,
                args.job_seconds,
                args.payload_kb,
                args.target,
                args.layout,
            )
        )
        print(json.dumps(rows[-1]), flush=True)
    command = "python -m bench.failover " + " ".join(argv if argv is not None else sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    prefix = _prefix(args)
    (RESULTS / f"{prefix}-{stamp}.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    text = report(rows, command.strip())
    (RESULTS / _result_name(args)).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
