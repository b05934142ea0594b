"""Which batch an enqueue joins (docs/architecture.md#batches): a context variable, set by
``with cogworker.batch(...)`` and by ``with current_job().batch`` (a running job adding
jobs to its own batch). The client reads it at every push; nothing here talks to Redis."""

from __future__ import annotations

import contextvars
from types import TracebackType

BATCH_PREFIX = "b-"  # a batch id: told from a jid or a group id by this
_joining: contextvars.ContextVar[str | None] = contextvars.ContextVar("cogworker_batch", default=None)


def joining() -> str | None:
    """The id of the batch an enqueue made now joins, or None."""
    return _joining.get()


class BatchScope:
    """``with scope:``: every enqueue inside joins batch ``bid`` (sync and async clients,
    single and bulk). Re-entrant; nests (the innermost batch wins)."""

    def __init__(self, bid: str) -> None:
        self.bid = bid
        self._tokens: list[contextvars.Token[str | None]] = []

    def __repr__(self) -> str:
        return f"<batch {self.bid}>"

    def __enter__(self) -> BatchScope:
        self._tokens.append(_joining.set(self.bid))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        _joining.reset(self._tokens.pop())

    async def __aenter__(self) -> BatchScope:
        return self.__enter__()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(kind, error, tb)
