"""The steady window the prefork figures share: from 5 % of the jobs done to the queue
drained (the start-up of the interpreter and of the children stays out of it), and the
prefork worker of another checkout that drains it."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def waiting(r: Any, queue: str | list[str]) -> int:
    """The jobs on ``queue``, or on every list of ``queue`` (a queue's priority levels too)."""
    if isinstance(queue, str):
        return int(r.llen(queue))
    pipe = r.pipeline(transaction=False)
    for key in queue:
        pipe.llen(key)
    return sum(int(n) for n in pipe.execute())


def wait_steady(r: Any, queue: str | list[str], n: int) -> int:
    """Blocks until 5 % of ``n`` jobs have left ``queue``; the jobs still in it then."""
    while waiting(r, queue) > n * 0.95:
        time.sleep(0.001)
    return waiting(r, queue)


def wait_drained(r: Any, queue: str | list[str]) -> None:
    while waiting(r, queue) > 0:
        time.sleep(0.002)


def drain_rate(r: Any, queue: str | list[str], n: int) -> float:
    """Jobs/s over the steady window of ``n`` jobs being drained from ``queue``."""
    left = wait_steady(r, queue, n)
    started = time.perf_counter()
    wait_drained(r, queue)
    return left / (time.perf_counter() - started)


@contextmanager
def checkout_prefork(checkout: str, url: str, app: str, app_path: str, procs: int = 2) -> Iterator[None]:
    """``cogworker.prefork.cli --procs N APP`` from ``checkout``'s own ``.venv`` and source
    tree against ``url``; TERMed (its whole group) and waited for on the way out."""
    python = str(Path(checkout, ".venv", "bin", "python"))
    env = {**os.environ, "PYTHONPATH": app_path, "COGWORKER_REDIS_URL": url}
    proc = subprocess.Popen(
        [python, "-m", "cogworker.prefork.cli", "--procs", str(procs), app],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


def checkout_drain_rate(
    checkout: str, url: str, app: str, app_path: str, n: int, lists: list[str] | None = None
) -> float:
    """Jobs/s over the steady window of ``checkout``'s prefork worker (2 children) draining
    the ``n`` jobs already on the default queue at ``url`` (on ``lists``, its levels too)."""
    import redis

    r = redis.Redis.from_url(url)
    try:
        with checkout_prefork(checkout, url, app, app_path):
            return drain_rate(r, lists or "cogworker:queue:default", n)
    finally:
        r.close()
