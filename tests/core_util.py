"""Helpers shared by the test_core_* files."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from cogworker.engine.loop import Worker


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> bool:
    """Polls ``predicate`` until it is truthy or ``timeout`` passes; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result or time.monotonic() >= deadline:
            return bool(result)
        time.sleep(interval)


def ran(client: Any) -> list[str]:
    return [x.decode() for x in client.lrange("test:ran", 0, -1)]


def zentries(client: Any, key: str) -> list[tuple[dict[str, Any], float]]:
    return [(json.loads(raw), score) for raw, score in client.zrange(key, 0, -1, withscores=True)]


def queued(client: Any, config: Any, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in client.lrange(config.keys.queue(queue), 0, -1)]


class RunningWorker:
    """A ``Worker`` looping in a thread, stopped (and joined) on exit."""

    def __init__(self, queues: Any = (("default", None),), block_timeout: float = 0.2, **kwargs: Any) -> None:
        self.worker = Worker(list(queues), block_timeout=block_timeout, **kwargs)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:  # reported to the test
            self.error = exc

    def __enter__(self) -> Worker:
        self.thread.start()
        return self.worker

    def __exit__(self, *exc: Any) -> None:
        self.worker.stop()
        self.thread.join(30)
        assert not self.thread.is_alive(), "worker did not stop"

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()


def old_redis_code(entry: str) -> str:
    """``python -c`` code that runs ``entry`` (a module with ``main(argv)``) against a Redis
    that reports itself as 6.0.9: the real server is 7, so INFO is patched."""
    return f"""
import sys, redis
real = redis.Redis.info
def info(self, *a, **kw):
    reply = real(self, *a, **kw)
    reply["redis_version"] = "6.0.9"
    return reply
redis.Redis.info = info
from {entry} import main
main(sys.argv[1:])
"""


def run_worker_until(predicate: Callable[[], Any], timeout: float = 10.0, **kwargs: Any) -> bool:
    """Runs a worker in a thread until ``predicate()`` holds (or ``timeout``); returns
    whether it held. The worker is stopped and joined either way."""
    with RunningWorker(**kwargs):
        return wait_for(predicate, timeout)


def raw_payload(name: str, *args: Any, **extra: Any) -> dict[str, Any]:
    """A payload of ``apps.core_jobs.{name}`` as Redis holds one (``extra`` overrides)."""
    base = {
        "class": f"apps.core_jobs.{name}",
        "args": list(args),
        "kwargs": {},
        "jid": extra.pop("jid", "j" * 24),
        "queue": "default",
        "retry": 3,
        "created_at": time.time(),
        "enqueued_at": time.time(),
    }
    base.update(extra)
    return base


def push_raw(config: Any, payload: dict[str, Any]) -> None:
    """``payload`` pushed onto its queue as it is (no client in between)."""
    config.redis().lpush(config.keys.queue(payload.get("queue", "default")), json.dumps(payload))
