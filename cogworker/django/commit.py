"""``enqueue_on_commit(job, *args, **kwargs)``: the arguments are checked now and the job
is enqueued once the current transaction commits (never, if it rolls back)."""

from __future__ import annotations

from typing import Any, ParamSpec, TypeVar

from django.db import transaction

from ..client.jobs import Job

P = ParamSpec("P")
R = TypeVar("R")


def enqueue_on_commit(job: Job[P, R, Any], *args: P.args, **kwargs: P.kwargs) -> None:
    """``job.enqueue(*args, **kwargs)`` once the transaction of the default database
    commits (at once outside one); the arguments are checked now. Another database:
    ``transaction.on_commit(job.s(...).enqueue, using="other")``."""
    call = job.s(*args, **kwargs)
    transaction.on_commit(call.enqueue)
