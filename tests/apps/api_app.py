"""Jobs for the operator API tests: each start is one O_APPEND line in a file named by
the job (not Redis), with the queue it was pushed to."""

from __future__ import annotations

import os
import time

import cogworker


@cogworker.job
def mark(path, queue, tag, seconds=0.0):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{time.time():.6f} {queue} {tag}\n".encode())
    finally:
        os.close(fd)
    if seconds:
        time.sleep(seconds)
