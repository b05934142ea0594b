"""The start/end log the prefork fault tests share: each event is one line of the file
named by $PF_LOG, ``<event> <tag> <pid> <time>``, written by one ``os.write`` with
O_APPEND (so children's lines never interleave), not to Redis: these tests pause Redis."""

from __future__ import annotations

import os
import time


def log(event: str, tag: str) -> None:
    path = os.environ.get("PF_LOG")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {tag} {os.getpid()} {time.time()}\n".encode())
    finally:
        os.close(fd)


def events(path: str) -> list[tuple[str, str, int, float]]:
    """The log as [(event, tag, pid, time)]."""
    try:
        with open(path) as f:
            # Complete lines only: a line still being written by a child has no newline yet.
            lines = f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []
    return [(e, tag, int(pid), float(at)) for e, tag, pid, at in (line.split() for line in lines)]
