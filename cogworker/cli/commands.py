"""``cogworker stats|queues|queue|processes``: the system at a glance, through ``cogworker.api``;
``processes quiet|stop IDENTITY`` asks a master to go quiet or stop."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from .. import api
from ..errors import NotFound
from . import jobs
from .output import field, megabytes, not_found, pairs, print_json, seconds, table, when


def stats(args: argparse.Namespace) -> int:
    numbers = api.stats()
    queues = api.queues()
    processes = api.processes()
    if args.json:
        print_json({"stats": numbers, "queues": [queue_row(q) for q in queues],
                    "processes": processes})
        return 0
    print(pairs([
        ("processed", field(numbers, "processed", 0)),
        ("failed", field(numbers, "failed", 0)),
        ("enqueued", field(numbers, "enqueued", 0)),
        ("scheduled", field(numbers, "scheduled_size", 0)),
        ("retry", field(numbers, "retry_size", 0)),
        ("dead", field(numbers, "dead_size", 0)),
        ("unsettled", field(numbers, "unsettled_size", 0)),
        ("processes", f"{field(numbers, 'processes', 0)} ({field(numbers, 'busy', 0)} busy)"),
        ("default latency", seconds(field(numbers, "default_latency", 0.0))),
    ]))
    print()
    print(queue_table(queues) if queues else "no queues")
    print()
    print(process_table(processes) if processes else "no live processes")
    return 0


def queue_row(queue: Any) -> dict[str, Any]:
    return {"name": queue.name, "size": queue.size(), "latency": queue.latency(), "paused": queue.paused()}


def queue_table(queues: list[Any]) -> str:
    rows = []
    for queue in queues:
        row = queue_row(queue)
        rows.append([row["name"], row["size"], seconds(row["latency"]), "yes" if row["paused"] else "no"])
    return table(["QUEUE", "SIZE", "LATENCY", "PAUSED"], rows)


def queues(args: argparse.Namespace) -> int:
    found = api.queues()
    if args.json:
        print_json({"queues": [queue_row(q) for q in found]})
    else:
        print(queue_table(found) if found else "no queues")
    return 0


def queue(args: argparse.Namespace) -> int:
    try:
        target = api.queue(args.name)
    except NotFound:
        known = ", ".join(q.name for q in api.queues()) or "none"
        raise not_found(f"no queue named {args.name!r} (known: {known})") from None
    if args.action == "pause":
        target.pause()
    else:
        target.resume()
    paused = target.paused()
    if args.json:
        print_json({"queue": args.name, "paused": paused})
    else:
        print(f"queue {args.name}: {'paused' if paused else 'resumed'} (fleet-wide)")
    return 0


def processes(args: argparse.Namespace) -> int:
    if args.action:
        return control(args)
    found = api.processes()
    if args.json:
        print_json({"processes": found})
    else:
        print(process_table(found) if found else "no live processes")
    return 0


def control(args: argparse.Namespace) -> int:
    request = api.quiet_process if args.action == "quiet" else api.stop_process
    if not request(args.identity):
        raise not_found(f"no live master or single-process worker {args.identity!r} "
                        "(a prefork child is quieted or stopped with its master)")
    if args.json:
        print_json({"identity": args.identity, "requested": args.action})
    else:
        print(f"process {args.identity}: {args.action} requested (acted on at its next heartbeat)")
    return 0


def process_table(found: list[Any]) -> str:
    now = time.time()
    rows = []
    for process in found:
        running = field(process, "running")
        doing = "-"
        if running:
            doing = f"{field(running, 'class', None) or field(running, 'job_class', '?')} " \
                    f"jid={field(running, 'jid', '?')}"
            started = field(running, "run_at")
            if started:
                doing += f" for {seconds(now - float(started))}"
        queues_of = field(process, "queues") or []
        rows.append([field(process, "identity", "?"), field(process, "kind", "?"),
                     ",".join(queues_of) if isinstance(queues_of, (list, tuple)) else queues_of,
                     when(field(process, "started_at")), megabytes(field(process, "rss")), doing])
    return table(["IDENTITY", "KIND", "QUEUES", "SINCE (UTC)", "RSS", "RUNNING"], rows)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "stats": stats,
    "queues": queues,
    "queue": queue,
    "processes": processes,
    "jobs": jobs.list_jobs,
    "job": jobs.show_job,
    "retry": jobs.bulk,
    "delete": jobs.bulk,
}
