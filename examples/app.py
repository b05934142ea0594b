"""The example app: a few jobs of each kind. Run it with ``python -m examples.demo``."""

from __future__ import annotations

import hashlib
import random

import cogworker


@cogworker.job
def add(x: int, y: int) -> int:
    return x + y


@cogworker.job(queue="critical", retry=3)
def checksum(text: str, rounds: int = 2000) -> str:
    """A little CPU work, as a real fleet's jobs would do."""
    digest = text.encode()
    for _ in range(rounds):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()


@cogworker.job(retry=2, backoff=lambda count, error: 1)
def flaky(n: int) -> None:
    """Fails now and then: shows retries, and the dead set once retries run out."""
    if random.random() < 0.3:
        raise RuntimeError(f"flaky job {n} failed")


@cogworker.job(unique_for=60)
def nightly_report() -> None:
    pass


# Six fields: seconds first (second minute hour day month weekday), so every 5 seconds.
cogworker.periodic("*/5 * * * * *", add, args=(1, 1), name="add-every-5s")
