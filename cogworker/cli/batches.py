"""``cogworker batches``: the newest batches (``api.batches()``), a line each: created,
its counts, done or not, description; ``cogworker batch BID``: one batch's counts, its
callbacks (fired when, their jids) and its jobs with their states; ``cogworker batch BID
--close`` closes it first (``api.close_batch``), for a block whose close failed."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from .. import api
from ..config import logger
from ..launch.argtypes import positive_int
from .output import not_found, pairs, print_json, relative, table, when

DEFAULT_LIMIT = 25
JOBS_SHOWN = 200


def add_parser(sub: Any, parent: Sequence[argparse.ArgumentParser]) -> None:
    listing = sub.add_parser("batches", parents=parent, help="the newest batches: counts, callbacks fired")
    listing.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"at most N batches (default {DEFAULT_LIMIT})",
    )
    one = sub.add_parser("batch", parents=parent, help="a batch's counts, callbacks and jobs")
    one.add_argument("bid", metavar="BID")
    one.add_argument(
        "--limit",
        type=positive_int,
        default=JOBS_SHOWN,
        metavar="N",
        help=f"list at most N of its jobs (default {JOBS_SHOWN})",
    )
    one.add_argument(
        "--close",
        action="store_true",
        help="close it first, as its with block's end does (its callbacks fire as usual)",
    )


def state(info: api.BatchInfo) -> str:
    if not info.closed:
        return "open"
    return "done" if info.complete else "running"


def fired(info: api.BatchInfo) -> str:
    return ",".join(name for name, cb in info.callbacks.items() if cb.get("fired_at") is not None) or "-"


def list_batches(args: argparse.Namespace) -> int:
    found = api.batches(limit=args.limit)
    if args.json:
        print_json({"batches": found, "count": api.batch_count()})
        return 0
    if not found:
        print("no batches (none made, or all expired)")
        return 0
    rows = [
        [
            b.bid,
            relative(b.created_at),
            state(b),
            b.total,
            b.succeeded,
            b.failed,
            b.pending,
            fired(b),
            b.description or "-",
        ]
        for b in found
    ]
    print(table(["BATCH", "CREATED", "STATE", "JOBS", "OK", "FAILED", "PENDING", "FIRED", "DESCRIPTION"], rows))
    return 0


def close(bid: str) -> None:
    """``--close``: rides out an outage as the block's close does. The command answers in
    one line (``BatchNotClosed`` says it all), so the outage's own log lines, which would
    reach stderr through logging's last resort, are not shown here."""
    quiet = logging.NullHandler()
    logger.addHandler(quiet)
    try:
        if not api.close_batch(bid):
            raise not_found(f"no batch {bid!r} to close (never opened, or its record expired)")
    finally:
        logger.removeHandler(quiet)


def show_batch(args: argparse.Namespace) -> int:
    if args.close:
        close(args.bid)
    info = api.batch(args.bid)
    if info is None:
        raise not_found(f"no batch {args.bid!r} (never opened, or its record expired)")
    jobs = sorted(api.batch_jobs(args.bid, limit=args.limit), key=lambda j: (j[1] != "pending", j))
    if args.json:
        print_json({"batch": info, "jobs": [{"jid": jid, "state": st} for jid, st in jobs]})
        return 0
    print(
        pairs(
            [
                ("batch", info.bid),
                ("description", info.description or "-"),
                ("state", state(info)),
                ("jobs", info.total),
                ("succeeded", info.succeeded),
                ("failed", f"{info.failed} ({info.dead} dead, {info.cancelled} cancelled)"),
                ("pending", info.pending),
                ("created (UTC)", when(info.created_at)),
                ("done (UTC)", when(info.done_at) if info.done_at else "-"),
                ("expires (UTC)", when(info.expires_at) if info.expires_at else "-"),
            ]
        )
    )
    if info.callbacks:
        print()
        print(
            table(
                ["CALLBACK", "JOB", "JID", "FIRED (UTC)"],
                [
                    [
                        name,
                        cb.get("job") or "-",
                        cb.get("jid") or "-",
                        when(cb["fired_at"]) if cb.get("fired_at") is not None else "not yet",
                    ]
                    for name, cb in info.callbacks.items()
                ],
            )
        )
    print()
    print(table(["JID", "STATE"], [[jid, st] for jid, st in jobs]) if jobs else "no jobs")
    if len(jobs) >= args.limit and info.total > len(jobs):
        print(f"(the first {len(jobs)} of {info.total}: --limit N for more)")
    return 0
