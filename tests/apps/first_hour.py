"""A new user's first app: jobs on three queues and a periodic entry every 5 seconds on a
fourth. Runs record themselves in Redis (``test:ran``) so tests count them across processes."""

from __future__ import annotations

import cogworker
from cogworker.config import get_config


def _mark(tag: str) -> None:
    get_config().redis().rpush("test:ran", tag)


@cogworker.job
def add(x, y):
    _mark(f"add:{x}:{y}")
    return x + y


@cogworker.job(queue="critical", retry=3)
def charge(order_id, *, amount=None):
    _mark(f"charge:{order_id}:{amount}")


@cogworker.job(queue="cpu")
def crunch(n):
    _mark(f"crunch:{n}")
    return sum(i * i for i in range(n))


@cogworker.job(queue="low")
def report(kind):
    _mark(f"report:{kind}")


cogworker.periodic("*/5 * * * * *", report, args=("every-5s",), name="report-5s")
