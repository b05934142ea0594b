"""``cogworker limits``: every rate limiter of the fleet (``api.limiters()``): its kind and
limit, in use, waiting, and how many jobs it parked over its limit."""

from __future__ import annotations

import argparse
from typing import Any

from .. import api
from .output import print_json, relative, seconds, table


def run(args: argparse.Namespace) -> int:
    found = api.limiters()
    if args.json:
        print_json({"limiters": [one.to_json() for one in found], "deferrals": api.deferrals()})
    else:
        print(screen(found))
    return 0


def limit_text(one: Any) -> str:
    """``3 at once``, ``20 per 2.0s``; a number the record doesn't hold usably shows as ``?``
    and the row says which (a damaged or forged record: shown, not fatal)."""
    n = one.limit or "?"
    text = f"{n} at once" if one.kind == "concurrency" else f"{n} per {seconds(one.per) if one.per else '?'}"
    return text + (f" (unreadable: {', '.join(one.unreadable)})" if one.unreadable else "")


def screen(found: list[Any]) -> str:
    if not found:
        return "no limiters (none used in the last 7 days)"
    rows = [
        [one.name, one.kind, limit_text(one), one.in_use, one.waiting, one.over, relative(one.last_used)]
        for one in found
    ]
    return table(["LIMITER", "KIND", "LIMIT", "IN USE", "WAITING", "OVER LIMIT", "LAST USED"], rows)
