"""Right and wrong calls of typed jobs, for tests/test_typed_jobs.py: type checkers run on
this file (it is never imported). Each line that must be an error ends in ``# E``; every
other line must check clean."""

from __future__ import annotations

import cogworker


@cogworker.job
def add(x: int, y: int) -> int:
    return x + y


@cogworker.job
def summed(values: list[int]) -> int:
    return sum(values)


@cogworker.job(queue="critical", retry=3)
async def fetch(url: str, *, timeout: float = 10.0) -> bytes:
    return b""


async def calls() -> None:
    # Right calls.
    total: int = add(1, 2)
    add.enqueue(1, 2)
    add.enqueue(x=1, y=2)
    add.enqueue_in(30, 1, 2)
    add.enqueue_at(1_900_000_000, 1, y=2)
    add.options(queue="low", retry=0).enqueue(1, 2)
    add.options(retry=False).options(timeout=5).enqueue_in(3, 1, 2)
    add.s(1, 2).enqueue()
    add.s(1, 2).enqueue_in(30)
    add.options(queue="low").s(1, 2).enqueue_at(1_900_000_000)
    cogworker.chain(add.s(1, 2), add.s(10), add.options(queue="low").s(100)).enqueue()  # steps: the result first
    cogworker.chain(add.s(1, 2), add.si(5, 5)).enqueue()
    cogworker.chord(cogworker.group(add.s(i, i) for i in range(3)), summed.s()).enqueue()
    await add.enqueue_async(1, 2)
    await add.enqueue_in_async(5, 1, 2)
    await add.enqueue_at_async(1_900_000_000, 1, 2)
    await add.options(queue="low").enqueue_async(1, 2)
    await add.s(1, 2).enqueue_async()
    await fetch.enqueue_async("https://example.com", timeout=3)
    fetch.enqueue("https://example.com")
    cogworker.by_name("app.jobs.add", queue="critical").enqueue("anything", 1)
    add.enqueue_many([(1, 2), ((1,), {"y": 2})])

    # Wrong calls: each is one error.
    add.enqueue("x", "y")  # E
    add.enqueue(1)  # E
    add.enqueue(1, 2, 3)  # E
    add.enqueue(1, z=2)  # E
    add.enqueue_in(30, "x", 2)  # E
    add.enqueue_in("soon", 1, 2)  # E
    add.enqueue_at(1_900_000_000, 1, "y")  # E
    add.options(queue="low").enqueue("x", 2)  # E
    add.options(queu="low")  # E
    add.options(retry="many")  # E
    add.s("x", 2)  # E
    add.s(1, 2).enqueue_in("soon")  # E
    add.s("x")  # E
    add.s(1, 2, 3)  # E
    add.s()  # E
    add.options(queue="low").s("x")  # E
    add.si(10)  # E
    await add.enqueue_async("x", 2)  # E
    await add.enqueue_in_async(5, 1, "y")  # E
    await add.enqueue_at_async(1_900_000_000, "x", 2)  # E
    await add.options(retry=0).enqueue_async(1, "y")  # E
    await fetch.enqueue_async(3)  # E
    fetch.enqueue("https://example.com", timeout="slow")  # E
    text: str = add(1, 2)  # E
    del total, text


@cogworker.job(queu="low")  # E
def misspelt() -> None: ...
