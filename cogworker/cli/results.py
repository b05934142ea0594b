"""``cogworker result ID``: a kept result (a job's of ``results=True``, a chain's, a chord's
or a group's), through ``cogworker.api``; ``--wait`` blocks as ``cogworker.result`` does."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from .. import api
from ..client import results as waiting
from ..errors import CogworkerError
from .output import not_found, pairs, print_json, usage, when

FAILED = 1  # the exit status of a result that says its job ended dead (or expired)


def add_parser(sub: Any, parent: Sequence[argparse.ArgumentParser]) -> None:
    found = sub.add_parser(
        "result", parents=parent, help="a kept result: of a job (results=True), chain, chord or group"
    )
    found.add_argument("ident", metavar="ID", help="a jid, a chain's or chord's id, or a group id (g-...)")
    found.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="wait up to SECONDS for it (default: read it now)"
    )


def show_result(args: argparse.Namespace) -> int:
    if args.wait < 0:
        raise usage("--wait takes seconds, at least 0")
    if args.wait:
        try:
            waiting.result(args.ident, timeout=args.wait)
        except CogworkerError:
            pass  # whatever it ended as, the record below says it
    record = api.result(args.ident)
    if record is None:
        raise not_found(
            f"no result kept for {args.ident!r} (not finished, not a job that keeps its result "
            "(results=True), or gone past twice its result_ttl)"
        )
    if args.json:
        print_json(record)
        return 0 if record.state in ("succeeded", "running") else FAILED
    rows = [("id", record.id), ("state", record.state)]
    if record.total is not None:
        rows.append(("members", f"{record.total} ({record.left} left)"))
    if record.state == "succeeded":
        rows.append(("value", json.dumps(record.value)))
    if record.state == "dead":
        rows += [("failed jid", record.failed_jid or "-"), ("error", f"{record.error_class}: {record.error_message}")]
    rows += [("finished (UTC)", when(record.finished_at)), ("expires (UTC)", when(record.expires_at))]
    print(pairs(rows))
    if record.traceback:
        print("\ntraceback")
        print(record.traceback)
    return 0 if record.state in ("succeeded", "running") else FAILED
