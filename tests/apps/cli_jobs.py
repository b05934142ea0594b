"""Jobs for the ``cogworker`` command's tests (tests/test_cli.py) and the CLI guide's transcript:
one that succeeds, one that dies at once, one that waits an hour in retry."""

from __future__ import annotations

import cogworker

cogworker.configure(status=True, history=True)  # what `cogworker job JID` shows (on by default; said here all the same)


@cogworker.job
def add(a, b):
    return a + b


@cogworker.job(retry=0)
def charge(order_id):
    raise ValueError(f"card declined for order {order_id}")


@cogworker.job(retry=5, backoff=lambda count, error: 3600)
def sync(account):
    raise ConnectionError(f"partner API down for {account}")


@cogworker.job
def later(tag):
    return tag


@cogworker.job(queue="reports")
def report(day):
    return day


cogworker.periodic("0 3 * * *", report, args=("today",), name="nightly-report")
