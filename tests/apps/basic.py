"""Jobs used by the tests. Each records its runs in Redis (``test:ran`` list) so a test
can count runs from Redis, across processes."""

from __future__ import annotations

import os
import time

import cogworker
from cogworker.config import get_config


def _mark(tag: str) -> None:
    get_config().redis().rpush("test:ran", tag)


@cogworker.job
def add(x, y):
    _mark(f"add:{x}:{y}")
    return x + y


@cogworker.job(retry=2, backoff=lambda count, error: 0)
def boom(tag):
    _mark(f"boom:{tag}")
    raise ValueError(f"boom {tag}")


@cogworker.job(retry=0)
def boom_once(tag):
    _mark(f"boom_once:{tag}")
    raise ValueError(f"no retries {tag}")


@cogworker.job
def sleepy(tag, seconds):
    _mark(f"start:{tag}")
    time.sleep(seconds)
    _mark(f"done:{tag}")


@cogworker.job
def suicide(tag):
    _mark(f"suicide:{tag}")
    os.kill(os.getpid(), 9)


@cogworker.job(timeout=0.5, retry=0)
def overrun(tag):
    _mark(f"overrun:{tag}")
    time.sleep(5)
