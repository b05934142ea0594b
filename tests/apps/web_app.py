"""Jobs for the web UI's browser tests: each start of ``mark`` is one O_APPEND line
(``<tag>``) in a file the test names; ``explode`` fails at once into dead (retry=0)."""

from __future__ import annotations

import os
import time

import cogworker

# What /job/<jid> shows (status and every run, on by default), and a quick heartbeat so a
# quiet request from /busy is taken within a second.
cogworker.configure(status=True, history=True, heartbeat_interval=0.5)


@cogworker.job
def mark(path, tag, seconds=0.0):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{tag}\n".encode())
    finally:
        os.close(fd)
    if seconds:
        time.sleep(seconds)


@cogworker.job(retry=0)
def explode(message):
    raise ValueError(message)


cogworker.periodic("0 3 * * *", mark, args=("/dev/null", "nightly"), name="nightly-report")
cogworker.periodic("*/30 * * * * *", mark, args=("/dev/null", "half-minute"), name="every-30s")
