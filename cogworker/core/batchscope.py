"""Which batch an enqueue joins (docs/architecture.md#batches): a context variable, set by
``with cogworker.batch(...)`` and by ``with current_job().batch`` (a running job adding
jobs to its own batch). The client reads it at every push; nothing here talks to Redis."""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import Any

from .. import routing

BATCH_PREFIX = "b-"  # a batch id: told from a jid or a group id by this
_joining: contextvars.ContextVar[BatchScope | None] = contextvars.ContextVar("cogworker_batch", default=None)


def joining() -> str | None:
    """The id of the batch an enqueue made now joins, or None."""
    scope = _joining.get()
    return None if scope is None else scope.bid


def joining_scope() -> BatchScope | None:
    """The batch an enqueue made now joins (its part known, in a split layout), or None."""
    return _joining.get()


class BatchScope:
    """``with scope:``: every enqueue inside joins batch ``bid`` (sync and async clients,
    single and bulk). Re-entrant; nests (the innermost batch wins)."""

    def __init__(self, bid: str, part: str | None = None) -> None:
        self.bid = bid
        # A split layout (``routing``): the part its record is in (None: not known yet).
        self.part = part
        self._tokens: list[contextvars.Token[BatchScope | None]] = []

    def __repr__(self) -> str:
        return f"<batch {self.bid}>"

    def __enter__(self) -> BatchScope:
        self._tokens.append(_joining.set(self))
        return self

    def join(self, config: Any, queue: str) -> None:
        """An enqueue into this batch of a job of ``queue``, whose part is ``config`` (a
        split layout only). The scripts that settle a job count it in its batch in the
        same step, so every job of a batch must be in the batch's part."""
        self.part = routing.join_batch(self.part, config, self.bid, queue)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        _joining.reset(self._tokens.pop())

    async def __aenter__(self) -> BatchScope:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, error, tb)
