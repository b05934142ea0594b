"""``cogworker jobs|job|retry|delete``: the entries of the sets, one job in full, and the
changes (through ``cogworker.api``, whose every change is one atomic script)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import api
from ..errors import NotFound
from ..names import shown
from ..wording import counted
from .bulk import ProgressLine, confirm
from .output import WIDTH, field, not_found, one_line, one_line_cut, pairs, print_json, relative, table, when

CHUNK = 500  # entries per filter() page in a bulk operation limited to one class


def sets() -> dict[str, Any]:
    return {"retry": api.RetrySet(), "dead": api.DeadSet(), "scheduled": api.ScheduledSet()}


def job_class(record: Any) -> str:
    """The record's job class, or ``(raw)`` for an entry that isn't a readable job."""
    if not field(record, "readable", True):
        return "(raw)"
    name = field(record, "job_class")
    return shown(name) if name else "(raw)"


def record_json(record: Any) -> dict[str, Any]:
    """A JobRecord for a script: its fields by name, and the raw text of an unreadable one."""
    shown = {
        name: field(record, name)
        for name in (
            "jid",
            "job_class",
            "args",
            "kwargs",
            "queue",
            "retry_count",
            "error_class",
            "error_message",
            "error_traceback",
            "failed_at",
            "enqueued_at",
            "at",
            "source",
            "readable",
        )
    }
    if not shown["readable"]:
        shown["raw"] = field(record, "raw_payload")
    return shown


def error_of(record: Any) -> str:
    error = field(record, "error_class")
    if not error:
        return "-"
    message = field(record, "error_message")
    return f"{error}: {one_line_cut(message, WIDTH)}" if message else str(error)


def list_jobs(args: argparse.Namespace) -> int:
    target = sets()[args.set]
    if args.job_class or args.error_class or args.queue:
        found = target.filter(
            job_class=args.job_class, error_class=args.error_class, queue=args.queue, limit=args.limit
        )
    else:
        found = target.jobs(offset=0, limit=args.limit)
    if args.json:
        print_json({"set": args.set, "size": target.size(), "jobs": [record_json(r) for r in found]})
        return 0
    if not found:
        print(f"{args.set}: no entries" + (" match" if args.job_class or args.error_class or args.queue else ""))
        return 0
    column = "FAILED" if args.set == "dead" else "DUE"
    rows = []
    for record in found:
        at = field(record, "failed_at") if args.set == "dead" else field(record, "at")
        queue = field(record, "queue")
        rows.append(
            [
                field(record, "jid") or "-",
                job_class(record),
                shown(queue) if queue else "-",
                relative(at),
                field(record, "retries") if field(record, "retry_count") is not None else "-",
                error_of(record) if field(record, "readable", True) else raw_text(record),
            ]
        )
    print(table(["JID", "CLASS", "QUEUE", column, "RETRIES", "ERROR"], rows))
    size = target.size()
    if size > len(found):
        print(f"({len(found)} of {size}; --limit N for more)")
    return 0


def raw_text(record: Any) -> str:
    return str(field(record, "raw_payload"))


# -- one job ---------------------------------------------------------------------------------


def locate(jid: str) -> tuple[str | None, Any]:
    """Where the entry waits (``schedule``, ``retry``, ``dead``, ``queue:NAME``) and its
    record, or (None, None): a running or finished job waits nowhere."""
    try:
        record = api.locate(jid)
    except NotFound:
        return None, None
    return record.source, record


def show_job(args: argparse.Namespace) -> int:
    where, record = locate(args.jid)
    status = api.status(args.jid)
    history = api.history(args.jid)
    rules = api.retention().describe()
    if where is None and status is None and not history:
        raise not_found(
            f"job {args.jid!r}: {api.NOT_RETAINED.replace('_', ' ')}: not queued, scheduled, retrying "
            f"or dead, and no status or history of it is kept ({rules}; or no such job)"
        )
    if args.json:
        print_json(
            {
                "jid": args.jid,
                "where": where,
                "entry": record_json(record) if record is not None else None,
                "state": field(status, "state") if status is not None else api.NOT_RETAINED,
                "status": status,
                "history": history,
                "retention": rules,
            }
        )
        return 0
    state = field(status, "state") or field(status, "status") if status is not None else None
    print(
        pairs(
            [
                ("jid", args.jid),
                ("where", where or ("running" if state == "running" else "-")),
                (
                    "status",
                    f"{state} (since {when(field(status, 'updated_at'))}, attempt {field(status, 'attempt')})"
                    if status is not None
                    else f"not retained ({rules})",
                ),
                *progress_of(status),
                *([("progress", progress_text(status))] if field(status, "progress") is not None else []),
            ]
        )
    )
    if record is not None:
        print_entry(record)
    if history:
        print("\nhistory")
        print(
            table(
                ["STARTED (UTC)", "ENDED (UTC)", "OUTCOME", "BY", "ERROR"],
                [
                    [
                        when(field(a, "started_at")),
                        when(field(a, "ended_at")),
                        field(a, "outcome") or "-",
                        field(a, "identity") or "-",
                        error_of(a),
                    ]
                    for a in history
                ],
            )
        )
    traceback = (field(record, "error_traceback") if record is not None else None) or next(
        (field(a, "traceback") for a in reversed(history) if field(a, "traceback")), None
    )
    if traceback:
        print("\ntraceback")
        print(traceback if isinstance(traceback, str) else "\n".join(traceback))
    return 0


def progress_of(status: Any) -> list[tuple[str, object]]:
    """An iterable job's checkpoint: its items done and its cursor (nothing for other jobs)."""
    done = field(status, "items_done") if status is not None else None
    if done is None:
        return []
    return [("items done", done), ("cursor", shown(json.dumps(field(status, "cursor"))))]


def progress_text(status: Any) -> str:
    message = field(status, "progress_message")
    return f"{float(field(status, 'progress')):.0%}" + (f" {one_line(message)}" if message else "")


def cancel(args: argparse.Namespace) -> int:
    """Exit 0 if every job was cancelled, 1 if any was not waiting or running."""
    done = {jid: api.cancel(jid) for jid in args.jids}
    if args.json:
        print_json(
            {"cancelled": [j for j, ok in done.items() if ok], "not_found": [j for j, ok in done.items() if not ok]}
        )
    else:
        for jid, ok in done.items():
            print(
                f"{jid}: cancelled"
                if ok
                else f"{jid}: not cancelled (not waiting or running: finished, dead or unknown)"
            )
    if not all(done.values()):
        if not args.json:
            raise not_found(f"{sum(not ok for ok in done.values())} of {len(done)} not cancelled")
        return 1
    return 0


def print_entry(record: Any) -> None:
    if not field(record, "readable", True):
        print(f"\nentry (not a readable job, shown raw)\n{raw_text(record)}")
        return
    print("\npayload")
    payload = {
        "class": job_class(record),
        "args": field(record, "args"),
        "kwargs": field(record, "kwargs"),
        "queue": shown(field(record, "queue") or "-"),
        "retry_count": field(record, "retry_count"),
        "enqueued_at": when(field(record, "enqueued_at")),
        "at": when(field(record, "at")),
        "failed_at": when(field(record, "failed_at")),
        "error": error_of(record),
    }
    if field(record, "at") == field(record, "failed_at"):
        del payload["at"]  # a dead entry's score is its failed_at
    print(pairs([(k, json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in payload.items()]))


# -- retry and delete --------------------------------------------------------------------------


def bulk(args: argparse.Namespace) -> int:
    verb = args.command  # "retry" or "delete"
    if args.all:
        return bulk_all(args, verb)
    done: list[str] = []
    missing: list[str] = []
    for jid in args.jids:
        (done if change_one(verb, jid, args.source) else missing).append(jid)
    if args.json:
        print_json({verb: done, "not_found": missing})
    else:
        for jid in done:
            print(f"{jid}: {'enqueued now' if verb == 'retry' else 'deleted'}")
    if missing:
        where = args.source or ("retry, dead or scheduled" if verb == "retry" else "a set or a queue")
        raise not_found(f"not found in {where}: {' '.join(missing)}")
    return 0


def change_one(verb: str, jid: str, source: str | None) -> bool:
    """Retries or deletes the entry wherever it is (in ``source`` only, when given); False
    when it is nowhere (or went away meanwhile: the API then returns False)."""
    found = {source: sets()[source]} if source else sets()
    for target in found.values():
        record = target.find(jid)
        if record is not None:  # changed only if still the entry just read (else False)
            return bool(target.retry(record) if verb == "retry" else target.delete(record))
    if verb == "delete" and source is None:
        for queue in api.queues():
            record = queue.find(jid)
            if record is not None:
                return bool(queue.delete(record))
    return False


def bulk_all(args: argparse.Namespace, verb: str) -> int:
    target = sets()[args.source]
    size = target.size()
    of_class = f" of class {args.job_class}" if args.job_class else ""
    what = f"{args.source} entries{of_class}"
    if size == 0:
        count = 0
    else:
        confirm(f"{verb.capitalize()} all {what} (of {size} in {args.source})?", args.yes)
        progress = ProgressLine(f"{verb} {args.source}", None if args.job_class else size)
        try:
            count = (
                by_class(target, verb, args.job_class, progress)
                if args.job_class
                else whole_set(target, verb, progress)
            )
        finally:
            progress.close()
    if args.json:
        print_json({verb: count, "from": args.source, "class": args.job_class})
    else:
        done = counted(count, f"{args.source} entry", f"{args.source} entries") + of_class
        print(f"{verb}: {done}" + (" enqueued now" if verb == "retry" else " deleted"))
    return 0


def whole_set(target: Any, verb: str, progress: ProgressLine) -> int:
    # The API works through the set in chunks (a few ms of Redis each) and reports each.
    count = target.retry_all(progress.add) if verb == "retry" else target.clear(progress.add)
    return int(count or 0)


def by_class(target: Any, verb: str, job_class_name: str, progress: ProgressLine) -> int:
    count = 0
    while True:
        page = target.filter(job_class=job_class_name, limit=CHUNK)
        changed = sum(1 for record in page if (target.retry(record) if verb == "retry" else target.delete(record)))
        count += changed
        progress.add(changed)
        if not page or changed == 0:  # nothing left, or nothing would move: never spin
            return count
