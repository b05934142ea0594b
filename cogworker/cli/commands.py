"""``cogworker stats|queues|queue|clear|processes``: the system at a glance, a queue's jobs,
through ``cogworker.api``; ``clear QUEUE`` empties a queue; ``processes quiet|stop IDENTITY``
asks a master to go quiet or stop."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from .. import api
from ..errors import NotFound
from ..names import shown
from ..wording import counted
from . import jobs, results
from .bulk import confirm
from .output import field, megabytes, not_found, pairs, print_json, relative, seconds, table, when


def stats(args: argparse.Namespace) -> int:
    numbers, queues, processes = api.stats(), api.queues(), api.processes()
    if args.json:
        print_json(stats_document(numbers, queues, processes))
    else:
        print(stats_screen(numbers, queues, processes))
    return 0


def stats_document(numbers: Any, queues: list[Any], processes: list[Any]) -> dict[str, Any]:
    return {"stats": numbers, "queues": [queue_row(q) for q in queues], "processes": processes}


def stats_screen(numbers: Any, queues: list[Any], processes: list[Any]) -> str:
    """``cogworker stats`` for a person: the counters, the queues, the processes."""
    counters = pairs(
        [
            ("processed", field(numbers, "processed", 0)),
            ("failed", field(numbers, "failed", 0)),
            ("enqueued", field(numbers, "enqueued", 0)),
            ("scheduled", field(numbers, "scheduled_size", 0)),
            ("retry", field(numbers, "retry_size", 0)),
            ("dead", field(numbers, "dead_size", 0)),
            ("unsettled", field(numbers, "unsettled_size", 0)),
            ("processes", f"{field(numbers, 'processes', 0)} ({field(numbers, 'busy', 0)} busy)"),
            ("default latency", seconds(field(numbers, "default_latency", 0.0))),
        ]
    )
    return "\n\n".join(
        [
            counters,
            queue_table(queues) if queues else "no queues",
            process_table(processes) if processes else "no live processes",
        ]
    )


def queue_row(queue: Any) -> dict[str, Any]:
    return {"name": queue.name, "size": queue.size(), "latency": queue.latency(), "paused": queue.paused()}


def queue_table(queues: list[Any]) -> str:
    rows = []
    for queue in queues:
        row = queue_row(queue)
        rows.append([shown(row["name"]), row["size"], seconds(row["latency"]), "yes" if row["paused"] else "no"])
    return table(["QUEUE", "SIZE", "LATENCY", "PAUSED"], rows)


def queues(args: argparse.Namespace) -> int:
    found = api.queues()
    if args.json:
        print_json({"queues": [queue_row(q) for q in found]})
    else:
        print(queue_table(found) if found else "no queues")
    return 0


def known_queue(name: str) -> api.Queue:
    try:
        return api.queue(name)
    except NotFound:
        known = ", ".join(q.name for q in api.queues()) or "none"
        raise not_found(f"no queue named {name!r} (known: {known})") from None


def queue(args: argparse.Namespace) -> int:
    if args.action is None:
        return queue_jobs(args)
    target = known_queue(args.name)
    if args.action == "pause":
        target.pause()
    else:
        target.resume()
    paused = target.paused()
    if args.json:
        print_json({"queue": args.name, "paused": paused})
    else:
        print(f"queue {shown(args.name)}: {'paused' if paused else 'resumed'} (fleet-wide)")
    return 0


def queue_jobs(args: argparse.Namespace) -> int:
    """``cogworker queue NAME``: its jobs, the next to run first."""
    target = known_queue(args.name)
    found, size = target.jobs(0, args.limit), target.size()
    if args.json:
        print_json({**queue_row(target), "jobs": [jobs.record_json(r) for r in found]})
        return 0
    paused = ", paused" if target.paused() else ""
    print(f"queue {target.name}: {counted(size, 'job')}, latency {seconds(target.latency())}{paused}")
    if found:
        print(
            table(
                ["JID", "CLASS", "ARGS", "ENQUEUED"],
                [
                    [field(r, "jid") or "-", jobs.job_class(r), arguments(r), relative(field(r, "enqueued_at"))]
                    for r in found
                ],
            )
        )
    if size > len(found):
        print(f"({len(found)} of {size}, the next to run first; --limit N for more)")
    return 0


def arguments(record: Any) -> str:
    if not field(record, "readable", True):
        return jobs.raw_text(record)
    args, kwargs = field(record, "args") or [], field(record, "kwargs") or {}
    return json.dumps(args) + (f" {json.dumps(kwargs)}" if kwargs else "")


def clear(args: argparse.Namespace) -> int:
    """``cogworker clear QUEUE``: every job of the queue deleted, after a confirmation."""
    target = known_queue(args.name)
    size = target.size()
    deleted = 0
    if size:
        confirm(f"Delete all {counted(size, 'job')} of queue {target.name}? This cannot be undone.", args.yes)
        deleted = target.clear()
    if args.json:
        print_json({"queue": target.name, "deleted": deleted})
    else:
        print(f"queue {target.name}: {counted(deleted, 'job')} deleted")
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
        raise not_found(
            f"no live master or single-process worker {args.identity!r} "
            "(a prefork child is quieted or stopped with its master)"
        )
    if args.json:
        print_json({"identity": args.identity, "requested": args.action})
    else:
        print(f"process {args.identity}: {args.action} requested (acted on at its next heartbeat)")
    return 0


def process_states(found: list[Any]) -> list[str]:
    """Each process's STATE: ``quiet`` or ``stopping`` when it (a child: its master, whose
    record holds it) was told so, else ``busy`` (running a job; a master: a child is) or
    ``idle``."""
    told = {
        (field(p, "host", ""), field(p, "pid", 0)): field(p, "state", "")
        for p in found
        if field(p, "kind", "") == "master"
    }
    states = []
    for process in found:
        state = field(process, "state", "") or ""
        if not state and field(process, "kind", "") == "child":
            state = told.get((field(process, "host", ""), field(process, "ppid", 0)), "")
        busy = field(process, "busy", 0) or field(process, "running")
        states.append(state or ("busy" if busy else "idle"))
    return states


def process_table(found: list[Any]) -> str:
    now = time.time()
    rows = []
    for process, state in zip(found, process_states(found), strict=True):
        running = field(process, "running")
        doing = "-"
        if running:
            doing = (
                f"{field(running, 'class', None) or field(running, 'job_class', '?')} jid={field(running, 'jid', '?')}"
            )
            started = field(running, "run_at")
            if started:
                doing += f" for {seconds(now - float(started))}"
            done = field(running, "progress")
            if done is not None:  # first: the column is cut to the screen's width
                doing = f"{float(done):.0%} {doing}"
        queues_of = field(process, "queues") or []
        rows.append(
            [
                field(process, "identity", "?"),
                field(process, "kind", "?"),
                state,
                ",".join(queues_of) if isinstance(queues_of, (list, tuple)) else queues_of,
                when(field(process, "started_at")),
                megabytes(field(process, "rss")),
                doing,
            ]
        )
    return table(["IDENTITY", "KIND", "STATE", "QUEUES", "SINCE (UTC)", "RSS", "RUNNING"], rows)


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "stats": stats,
    "queues": queues,
    "queue": queue,
    "clear": clear,
    "processes": processes,
    "jobs": jobs.list_jobs,
    "job": jobs.show_job,
    "result": results.show_result,
    "cancel": jobs.cancel,
    "retry": jobs.bulk,
    "delete": jobs.bulk,
}
