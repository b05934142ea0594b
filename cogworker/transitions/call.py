"""What every transition shares: a script call (its name, KEYS and ARGV), how it is run,
sent raw or awaited, and the mark that ties a function to its script.

Each entry script (``<name>.lua`` beside this module; the ``_*.lua`` files are includes)
has one function in this package, marked ``@entry(name, keys=n)``: its keyword-only
parameters, in order, are the script's KEYS (the first ``n``) then its ARGV, named as the
script's header names them (tests/test_transitions.py reads both). A parameter annotated
``Sequence`` is a variadic tail (spread in place); a sequence of a NamedTuple spreads each
item's fields in the order the header lists them. That function is the only place the
order is written. Some are run here with a typed reply; those the hot path pipelines, or
the async client awaits, return their ``Call`` for ``as_command``/``command``/``run_async``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from ..store import lua

Key = str | bytes
Arg = str | bytes | int | float
F = TypeVar("F", bound=Callable[..., Any])


class Call(NamedTuple):
    """One script call: the script's name, its KEYS and its ARGV."""

    script: str
    keys: list[Any]
    args: list[Any]


def entry(script: str, keys: int, derived: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Marks the one function of entry script ``script``: its first ``keys`` keyword-only
    parameters are the KEYS, the rest the ARGV; ``derived``: header names of values the
    function computes (a count) rather than takes."""

    def mark(fn: F) -> F:
        fn.script = script  # type: ignore[attr-defined]
        fn.n_keys = keys  # type: ignore[attr-defined]
        fn.derived = derived  # type: ignore[attr-defined]
        return fn

    return mark


def run(client: Any, call: Call, pipe: Any = None) -> Any:
    """Runs ``call`` (NOSCRIPT reloaded, the replication WAIT, ``Fenced``: the runner's);
    with ``pipe``, queued on that pipeline instead."""
    return lua.run(client, call.script, call.keys, call.args, pipe)


async def run_async(conn: Any, call: Call, pipe: Any = None) -> Any:
    """``call`` on an asyncio client (or queued on its pipeline ``pipe``, not sent)."""
    found = lua.script(conn, call.script)
    if pipe is not None:  # the script's queueing is a coroutine too (it loads it if missing)
        return await found(keys=call.keys, args=call.args, client=pipe)
    return await found(keys=call.keys, args=call.args)


def command(client: Any, call: Call) -> tuple[Any, ...]:
    """``call`` as one EVALSHA command for a raw pipeline (a ``NoScriptError`` reply: run
    it with ``run``, which loads the script)."""
    return lua.command(client, call.script, call.keys, call.args)


def as_command(sha: str, call: Call) -> tuple[Any, ...]:
    """``call`` as one EVALSHA command under a SHA the caller keeps (``sha``)."""
    return ("EVALSHA", sha, len(call.keys), *call.keys, *call.args)


def sha(client: Any, script: str) -> str:
    """The SHA of ``script``, for ``as_command``."""
    return str(lua.script(client, script).sha)


def load(client: Any, script: str) -> str:
    """Loads ``script`` into Redis (a raw EVALSHA loads nothing by itself); its SHA."""
    return str(client.script_load(lua.source(script)))


def raise_if_fenced(exc: Exception) -> None:
    """A script's ``FENCED <identity>`` error reply (read from a raw pipeline), as ``Fenced``."""
    lua.raise_if_fenced(exc)  # type: ignore[arg-type]


def forget_scripts() -> None:
    """Drops the scripts registered per client (a new config: new clients)."""
    lua.reset()


def flat(groups: Iterable[Sequence[Any]]) -> list[Any]:
    """The fields of each group, one after the other (a header's per-item tail)."""
    return [value for group in groups for value in group]


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def texts(values: Iterable[Any]) -> list[str]:
    return [text(v) for v in values]
