"""What a Sentinel failover loses, Jepsen-style (README "Past one Redis"; docs/architecture.md#replication).

    python -m bench.failover                 # 10 SIGKILLs of the master, without and with wait_replicas=1
    python -m bench.failover --rounds 3 --modes 0

A Sentinel deployment on loopback (cogworker.testing.sentinel: a master, a replica, 3
sentinels with down-after 600 ms), a ``cogworker-prefork --procs 2`` worker on its
redis+sentinel:// URL, and a producer thread enqueueing as fast as the rate allows. Every
acknowledged enqueue (the call returned a jid) is logged by the producer; every job's
start and end by the job itself (bench/apps/failover_app.py, an O_APPEND file: nothing of
the log is in Redis). Each round: load for ``--load`` seconds (with ``--replica-pause S``
the replica is then SIGSTOPped for S seconds, as a replica falling behind, and resumed
right after the kill; with ``--link-break S`` the master drops its replica's link S
seconds before the kill, as a network blip would, and the replica reconnects within about
a second; with ``--payload-kb K`` each job carries K KB, so a paused replica's socket
buffers fill and the rest of the stream waits in the master's memory, lost with it), SIGKILL the master, wait
for the sentinels to promote the replica, restart the killed node (empty) as a replica of
the new one, so the next round has a replica again. Then the producer stops, the worker
drains, and the logs are compared:

- lost: acknowledged enqueues that never started;
- twice: jobs that started more than once;
- twice at once: jobs whose runs overlapped in time (two processes at once).

With ``wait_replicas=1`` (producer and worker) an enqueue returns only once the replica
holds it, and a fetch's, ack's or filing's move is replicated before the worker acts on
it; a write without a replica in time raises NotReplicated (not acknowledged, so not
counted: the producer retries with a new job). Results: bench/results/failover-<time>.json
and failover-latest.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _producer(stop: threading.Event, rate: float, acked: list[tuple[str, float]], refused: Counter[str],
              padding: str = "") -> None:
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


def analyse(acked: list[tuple[str, float]], log: Path) -> dict[str, int]:
    runs = _runs(log)
    starts = {tag: sum(1 for e in events if e[0] == "start") for tag, events in runs.items()}
    acked_tags = {tag for tag, _ in acked}
    return {
        "acknowledged": len(acked_tags),
        "lost": sum(1 for tag in acked_tags if not starts.get(tag)),
        "ran": sum(1 for tag in acked_tags if starts.get(tag)),
        "twice": sum(1 for n in starts.values() if n > 1),
        "twice_at_once": sum(1 for events in runs.values() if _overlapping(events)),
        "unacknowledged_ran": sum(1 for tag in starts if tag not in acked_tags),
    }


def _drained(deadline: float) -> bool:
    """Until no job waits on a queue, in retry or on an in-progress list, for 3 s."""
    import cogworker
    from cogworker.testing.servers import PreforkWorker
    quiet = 0
    while time.monotonic() < deadline:
        try:
            client = cogworker.get_config().redis()
            busy = PreforkWorker._busy(client, "cogworker") or client.zcard("cogworker:retry") > 0
        except Exception:
            busy = True
        quiet = 0 if busy else quiet + 1
        if quiet >= 6:  # 3 s quiet: reconcile has had its two passes over any stray
            return True
        time.sleep(0.5)
    return False


def one_mode(wait: int, rounds: int, load: float, rate: float, procs: int, pause: float,
             link_break: float, job_seconds: float, payload_kb: int = 0) -> dict[str, object]:
    import cogworker
    from cogworker.testing.sentinel import Sentinels
    from cogworker.testing.servers import PreforkWorker

    work_dir = Path(tempfile.mkdtemp(prefix="cogworker-failover-"))
    log = work_dir / "runs.log"
    log.touch()
    os.environ["BENCH_FAILOVER_LOG"] = str(log)
    deployment = Sentinels().start()
    url = deployment.url()
    cogworker.config._config = None
    cogworker.configure(redis_url=url, wait_replicas=wait, wait_timeout=0.5, socket_timeout=2.0)
    env = {"BENCH_FAILOVER_LOG": str(log), "COGWORKER_WAIT_REPLICAS": str(wait), "COGWORKER_WAIT_TIMEOUT": "0.5",
           "PYTHONPATH": str(ROOT), "BENCH_FAILOVER_JOB_SECONDS": str(job_seconds)}
    worker = PreforkWorker(url, "bench.apps.failover_app", procs=procs, env=env)
    acked: list[tuple[str, float]] = []
    refused: Counter[str] = Counter()
    stop = threading.Event()
    producer = threading.Thread(target=_producer, args=(stop, rate, acked, refused, "x" * (payload_kb * 1024)),
                                daemon=True)
    failovers: list[float] = []
    try:
        worker.wait_ready()
        producer.start()
        for number in range(rounds):
            time.sleep(load)
            lagging = deployment.replica if pause else None
            if lagging is not None:  # the replica falls behind (a GC pause, a network hiccup)
                lagging.pause()
                time.sleep(pause)
            if link_break:  # the replica's link drops (a network blip): it reconnects within ~1 s
                deployment.master.client().client_kill_filter(_type="replica")
                time.sleep(link_break)
            killed = deployment.kill_master()
            if lagging is not None:
                lagging.resume()
            started = time.monotonic()
            deployment.wait_failover(killed.port, timeout=60)
            failovers.append(time.monotonic() - started)
            time.sleep(0.5)  # load on the promoted master while it has no replica
            deployment.rejoin(killed, timeout=60)
            print(f"  wait_replicas={wait} round {number + 1}/{rounds}: promoted in {failovers[-1]:.1f}s, "
                  f"{len(acked)} acknowledged so far", flush=True)
        time.sleep(load)
        stop.set()
        producer.join(30)
        drained = _drained(time.monotonic() + float(os.environ.get("BENCH_FAILOVER_DRAIN", "180")))
        if not drained:  # say where the jobs are, and what the worker said
            client = cogworker.get_config().redis()
            where = {key.decode(): client.llen(key) for key in client.scan_iter(match="cogworker:*")
                     if client.type(key) == b"list"}
            print(f"  not drained: {where}\n{worker.output()[-6000:]}", flush=True)
        worker.stop()
        figures = analyse(acked, log)
    finally:
        stop.set()
        if worker.stopped is None:
            worker.stop()
        deployment.cleanup()
    return {"wait_replicas": wait, "rounds": rounds, "drained": drained, **figures,
            "refused": dict(refused), "failover_seconds": [round(s, 2) for s in failovers],
            "enqueue_rate": rate, "procs": procs, "load_seconds": load, "replica_paused_before_kill": pause,
            "replica_link_broken_before_kill": link_break, "job_seconds": job_seconds,
            "payload_kb": payload_kb}


def report(rows: list[dict[str, object]], command: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    paused = rows[0].get("replica_paused_before_kill") if rows else 0
    broken = rows[0].get("replica_link_broken_before_kill") if rows else 0
    title = f", the replica SIGSTOPped {paused:g} s before each kill" if paused else ""
    title += f", the replica's link dropped {broken:g} s before each kill" if broken else ""
    job = rows[0].get("job_seconds", 0.002) if rows else 0.002
    rate = rows[0].get("enqueue_rate", 0) if rows else 0
    size = rows[0].get("payload_kb", 0) if rows else 0
    title += f" ({job:g} s jobs{f' of {size} KB' if size else ''} at up to {rate:g} enqueues/s)"
    lines = [f"# What a Sentinel failover loses{title}", "", f"`{command}` ({when})",
             "", "| wait_replicas | master SIGKILLs | acknowledged enqueues | lost | ran twice | twice at once "
             "| enqueues refused | failover (median s) |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        times = sorted(row["failover_seconds"])  # type: ignore[arg-type]
        median = times[len(times) // 2] if times else 0.0
        refused = sum(row["refused"].values())  # type: ignore[attr-defined]
        lines.append(f"| {row['wait_replicas']} | {row['rounds']} | {row['acknowledged']:,} | {row['lost']:,} | "
                     f"{row['twice']:,} | {row['twice_at_once']:,} | {refused:,} | {median:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--load", type=float, default=2.0, help="seconds of load before each kill")
    parser.add_argument("--rate", type=float, default=500.0, help="enqueues per second (at most)")
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--modes", default="0,1", help="wait_replicas values to run, in order")
    parser.add_argument("--replica-pause", type=float, default=0.0,
                        help="SIGSTOP the replica this many seconds before each kill (SIGCONT just after)")
    parser.add_argument("--job-seconds", type=float, default=0.002,
                        help="how long each job sleeps (longer than procs/rate: a backlog builds up)")
    parser.add_argument("--payload-kb", type=int, default=0,
                        help="pad each job to about this many KB (large jobs outrun the socket buffers)")
    parser.add_argument("--link-break", type=float, default=0.0,
                        help="drop the replica's link (CLIENT KILL TYPE replica) this many seconds before each kill")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    rows = []
    for wait in (int(w) for w in args.modes.split(",")):
        print(f"wait_replicas={wait}: {args.rounds} SIGKILLs of the master", flush=True)
        rows.append(one_mode(wait, args.rounds, args.load, args.rate, args.procs, args.replica_pause,
                             args.link_break, args.job_seconds, args.payload_kb))
        print(json.dumps(rows[-1]), flush=True)
    command = "python -m bench.failover " + " ".join(argv if argv is not None else sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    (RESULTS / f"failover-{stamp}.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    text = report(rows, command.strip())
    name = ("failover-large-latest.md" if args.payload_kb else
            "failover-backlog-latest.md" if args.link_break and args.job_seconds > 0.002 else
            "failover-link-break-latest.md" if args.link_break else
            "failover-paused-latest.md" if args.replica_pause else "failover-latest.md")
    (RESULTS / name).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
