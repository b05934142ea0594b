"""A job's id as its handle's ``enqueue`` returns it: a ``str`` that carries the job's
return type for type checkers, so ``cogworker.result(add.enqueue(1, 2))`` is an ``int`` for
``def add(a: int, b: int) -> int``. At run time it is the jid, a ``str`` like any other
(JSON, Redis and comparisons take it as one)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ..core.payload import JobOptions
from ..errors import EnqueueDropped

# Covariant (a jid never changes): an async job's JobId[Coroutine[..., T]] is a
# JobId[Awaitable[T]], which ``result`` takes as a T.
R = TypeVar("R", covariant=True)


class JobId(str, Generic[R]):
    """The jid of a job whose function returns ``R``."""

    __slots__ = ()


def issued(jid: str | None, opts: JobOptions, name: str) -> JobId[Any] | None:
    """What a handle's enqueue returns for ``client.push``'s answer: the jid, or None for a
    unique job (a duplicate its lock dropped, or a client middleware's drop). Any other
    job's enqueue never returns None, as its type says: a middleware's drop raises."""
    if jid is not None:
        return JobId(jid)
    if opts.unique_for is None:
        raise EnqueueDropped(f"{name}: a client middleware dropped the push (nothing was written)")
    return None
