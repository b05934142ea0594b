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


@cogworker.job(unique_for=60, results=True)
def charge(account: int) -> str:
    return "ok"


def results_carry_the_return_type() -> None:
    # A job's enqueue gives a JobId[R]: never None, its result an R.
    n: int = cogworker.result(add.enqueue(1, 2))
    jid: str = add.enqueue(1, 2)
    later: int = cogworker.result(add.enqueue_in(30, 1, 2), timeout=5)
    at: int = cogworker.result(add.options(queue="low").enqueue_at(1_900_000_000, 1, 2))
    signed: int = cogworker.result(add.s(1, 2).enqueue())
    typed_id: cogworker.JobId[int] = add.enqueue(1, 2)
    anything = cogworker.result("a jid from elsewhere")  # a plain str: Any
    # A unique job's may be None (a duplicate): checked first, then its result is typed.
    maybe = charge.enqueue(7)
    if maybe is not None:
        receipt: str = cogworker.result(maybe)
        del receipt
    unique_now = add.options(unique_for=30).enqueue(1, 2)
    if unique_now is not None:
        also: int = cogworker.result(unique_now)
        del also
    by_name_jid = cogworker.by_name("app.jobs.add").enqueue(1, 2)
    by_in = cogworker.enqueue_in("app.jobs.add", 30, 1, 2)
    del n, jid, later, at, signed, typed_id, anything, maybe, by_name_jid, by_in

    # Wrong: each is one error.
    wrong: str = cogworker.result(add.enqueue(1, 2))  # E
    cogworker.result(charge.enqueue(7))  # E
    cogworker.result(add.options(unique_for=30).enqueue(1, 2))  # E
    sure: cogworker.JobId[str] = charge.enqueue(7)  # E
    cogworker.result(cogworker.by_name("app.jobs.add").enqueue(1, 2))  # E
    mistyped: bytes = cogworker.result(add.s(1, 2).enqueue())  # E
    del wrong, sure, mistyped


async def async_results_carry_the_return_type() -> None:
    n: int = await cogworker.result_async(await add.enqueue_async(1, 2))
    body: bytes = await cogworker.result_async(await fetch.enqueue_async("https://example.com"))
    got = await cogworker.result_async(await add.enqueue_async(1, 2))
    # (Assigned through a name: mypy checks an awaited overloaded call against the declared
    # type by trying the plain-str overload too, which gives Any.)
    wrong: bytes = got  # E
    await cogworker.result_async(await charge.enqueue_async(7))  # E
    del n, body, wrong


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
