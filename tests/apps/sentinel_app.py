"""Jobs for the Sentinel tests: each run appends its start and end to the file named by
$COGWORKER_TEST_LOG (not to Redis: a failover may lose what Redis held), one line each."""

from __future__ import annotations

import os
import time

import cogworker


def _log(event: str, tag: str) -> None:
    line = f"{event} {tag} {os.getpid()} {time.time():.6f}\n"
    fd = os.open(os.environ["COGWORKER_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write of a short line with O_APPEND: never interleaved
    finally:
        os.close(fd)


@cogworker.job
def logged(tag, seconds=0.0):
    _log("start", tag)
    if seconds:
        time.sleep(seconds)
    _log("end", tag)
