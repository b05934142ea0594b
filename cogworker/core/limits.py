"""Fleet-wide rate limits of a job (docs/architecture.md#limits): ``Concurrency`` (at most
n running at once, across every process) and ``Window`` (at most n starts in any ``per``
seconds). A limit's key is a name, or a callable of the job's arguments for a limiter per
argument (``Concurrency(lambda user_id, **kw: f"user:{user_id}", 1)``).

Declared on ``@job(limits=[...])``; checked by the worker just before a job starts
(``engine/limiting.py``), never at enqueue.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError

NAME_MAX = 200  # a limiter's name is part of Redis key names and of pages: kept short

Key = str | Callable[..., Any]


class LimitKeyError(Exception):
    """A limit's callable key failed or gave no usable name for a job's arguments."""


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise LimitKeyError(f"{what} must be a non-empty string, got {name!r}")
    if len(name) > NAME_MAX:
        raise LimitKeyError(f"{what} is longer than {NAME_MAX} characters: {name[:40]!r}...")
    if any(c.isspace() or not c.isprintable() for c in name):
        raise LimitKeyError(f"{what} must not contain whitespace or control characters, got {name!r}")
    return name


@dataclass(frozen=True)
class Limit:
    key: Key
    n: int

    kind = ""

    def __post_init__(self) -> None:
        if isinstance(self.key, str):
            try:
                check_name(self.key, "a limit's name")
            except LimitKeyError as exc:
                raise ConfigurationError(str(exc)) from None
        elif not callable(self.key):
            raise ConfigurationError(f"a limit's key is a name or a callable of the job's arguments, got {self.key!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigurationError(f"a limit's n must be an int >= 1, got {self.n!r}")

    def name_for(self, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
        """The limiter this call counts against. ``LimitKeyError`` if the key can't say."""
        if isinstance(self.key, str):
            return self.key
        try:
            name = self.key(*args, **kwargs)
        except Exception as exc:
            raise LimitKeyError(
                f"the limit key {getattr(self.key, '__qualname__', self.key)!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        return check_name(name, "a limit key's result")

    def per_seconds(self) -> float:
        return 0.0


@dataclass(frozen=True)
class Concurrency(Limit):
    """At most ``n`` jobs holding this limiter run at once, fleet-wide. A slot is a lease of
    the process that holds it: it frees when the job ends, or when that process is declared
    dead (fenced) or deregistered."""

    kind = "concurrency"


@dataclass(frozen=True)
class Window(Limit):
    """At most ``n`` starts in any ``per`` seconds (a sliding window), fleet-wide."""

    per: float = 60.0
    kind = "window"

    def __post_init__(self) -> None:
        super().__post_init__()
        per = self.per
        if isinstance(per, bool) or not isinstance(per, (int, float)) or not math.isfinite(per) or per <= 0:
            raise ConfigurationError(f"a Window's per must be a positive number of seconds, got {per!r}")
        if per > 7 * 24 * 3600:
            raise ConfigurationError(f"a Window's per is at most 7 days, got {per!r}")

    def per_seconds(self) -> float:
        return float(self.per)


@dataclass(frozen=True)
class Resolved:
    """One limit for one call: its kind, limiter name, n and window."""

    kind: str
    name: str
    n: int
    per: float


def check_limits(limits: Any) -> tuple[Limit, ...]:
    """``@job(limits=...)`` as a tuple, or ``ConfigurationError``."""
    if limits is None:
        return ()
    if isinstance(limits, Limit):
        limits = [limits]
    if isinstance(limits, (str, bytes)) or not isinstance(limits, (list, tuple)):
        raise ConfigurationError(f"limits must be a list of cogworker.Concurrency/Window, got {limits!r}")
    for limit in limits:
        if not isinstance(limit, Limit) or type(limit) is Limit:
            raise ConfigurationError(f"limits must hold cogworker.Concurrency or cogworker.Window, got {limit!r}")
    return tuple(limits)


def resolve(limits: tuple[Limit, ...], payload: dict[str, Any]) -> list[Resolved]:
    """The limiters a payload counts against (one per name: a name given twice keeps its
    first limit). ``LimitKeyError`` if a key can't name one."""
    args = payload.get("args") or []
    kwargs = payload.get("kwargs") or {}
    out: list[Resolved] = []
    seen: set[str] = set()
    for limit in limits:
        name = limit.name_for(args, kwargs)
        if name not in seen:
            seen.add(name)
            out.append(Resolved(limit.kind, name, limit.n, limit.per_seconds()))
    return out
