"""The job of bench/failover.py: logs its start and end, one O_APPEND line each, to the
file named by $BENCH_FAILOVER_LOG (never to Redis, which a failover may roll back)."""

from __future__ import annotations

import os
import time

import cogworker


def _log(event: str, tag: str) -> None:
    fd = os.open(os.environ["BENCH_FAILOVER_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {tag} {os.getpid()} {time.time():.6f}\n".encode())
    finally:
        os.close(fd)


SECONDS = float(os.environ.get("BENCH_FAILOVER_JOB_SECONDS", "0.002"))


@cogworker.job
def work(tag: str, padding: str = "") -> None:
    _log("start", tag)
    time.sleep(SECONDS)
    _log("end", tag)


@cogworker.job
def noop(i: int) -> None:
    """bench/wait_cost.py's job: nothing, so the cost measured is the framework's and Redis's."""
