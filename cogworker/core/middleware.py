"""Middleware chains around push (client) and perform (server).

A client middleware is ``fn(payload: dict, call_next) -> str | None``: it may change the
payload in place, and returns what ``call_next()`` returns (the jid), or ``None`` without
calling it to drop the push. A server middleware is ``fn(job, payload: dict, queue: str, call_next)``:
``job`` is the resolved job, or ``None`` when resolution failed; then ``call_next()``
raises that error, so every middleware sees a resolution failure like a perform-time
error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Chain:
    def __init__(self) -> None:
        self._entries: list[Callable[..., Any]] = []

    def add(self, middleware: Callable[..., Any]) -> Callable[..., Any]:
        """Append ``middleware`` (outermost first); returns it, so it works as a decorator."""
        if not callable(middleware):
            raise TypeError(f"middleware must be callable, got {middleware!r}")
        self._entries.append(middleware)
        return middleware

    def remove(self, middleware: Callable[..., Any]) -> None:
        self._entries.remove(middleware)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, middleware: object) -> bool:
        return middleware in self._entries

    def invoke(self, args: tuple[Any, ...], final: Callable[[], Any]) -> Any:
        """Call each middleware as ``mw(*args, call_next)``; the innermost ``call_next`` is ``final``."""
        entries = self._entries
        if not entries:
            return final()

        def at(i: int) -> Any:
            if i == len(entries):
                return final()
            return entries[i](*args, lambda: at(i + 1))

        return at(0)


client_middleware = Chain()
server_middleware = Chain()
