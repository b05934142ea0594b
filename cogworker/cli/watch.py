"""``cogworker stats --watch [SECONDS]`` (as ``rq info --interval`` and ``sidekiqmon``): the
stats screen redrawn in place on a terminal; anywhere else (a pipe, a log file) one plain
line per round, so the output stays readable and greppable (``--json``: one document per
line). Ctrl-C ends it with exit 0. A Redis that stops answering is one line per round, not
the end of the watch: it shows the numbers again once Redis is back."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from .. import api, store
from ..config import get_config, redact_url
from . import commands
from .output import field, jsonable, seconds

CLEAR = "\x1b[H\x1b[2J"  # cursor home, then clear the screen: the next round draws over the last


def run(args: argparse.Namespace) -> int:
    if args.watch is None:
        return commands.stats(args)
    return watch(args, sys.stdout)


def watch(args: argparse.Namespace, stream: TextIO, rounds: int | None = None) -> int:
    """Until Ctrl-C (or ``rounds`` rounds, for a test): a round every ``args.watch`` seconds."""
    redraw = stream.isatty() and not args.json
    done = 0
    try:
        while rounds is None or done < rounds:
            started = time.monotonic()
            stream.write(one_round(args, redraw))
            stream.flush()
            done += 1
            if rounds is None or done < rounds:
                time.sleep(max(0.0, args.watch - (time.monotonic() - started)))
    except KeyboardInterrupt:
        pass  # how a watch ends
    if redraw:
        stream.write("\n")
    return 0


def one_round(args: argparse.Namespace, redraw: bool) -> str:
    try:
        numbers, queues, processes = api.stats(), api.queues(), api.processes()
        document = commands.stats_document(numbers, queues, processes) if args.json else None
    except (store.ConnectionError, store.TimeoutError) as exc:
        note = (
            f"{stamp()} Redis at {redact_url(get_config().redis_url)} did not answer ({type(exc).__name__}); "
            f"trying again in {args.watch:g}s"
        )
        return (CLEAR if redraw else "") + note + "\n"
    if document is not None:
        return json.dumps(jsonable({"at": time.time(), **document}), separators=(",", ":")) + "\n"
    if redraw:
        title = f"cogworker stats every {args.watch:g}s (Ctrl-C to stop) · {stamp()} UTC"
        return f"{CLEAR}{title}\n\n{commands.stats_screen(numbers, queues, processes)}\n"
    return line(numbers) + "\n"


def line(numbers: Any) -> str:
    """One round as one line: a UTC time, then name=value pairs."""
    names = (
        ("processed", "processed"),
        ("failed", "failed"),
        ("enqueued", "enqueued"),
        ("scheduled", "scheduled_size"),
        ("retry", "retry_size"),
        ("dead", "dead_size"),
        ("unsettled", "unsettled_size"),
        ("processes", "processes"),
        ("busy", "busy"),
    )
    values = " ".join(f"{label}={field(numbers, name, 0)}" for label, name in names)
    return f"{stamp()} {values} default_latency={seconds(field(numbers, 'default_latency', 0.0))}"


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
