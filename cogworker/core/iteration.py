"""Iterable jobs (docs/architecture.md#iterable): a generator job yields its cursor after
each item. This drives it: it resumes from the newest of the payload's cursor and the
job's checkpoint record, saves a checkpoint every N items or S seconds, and stops at a
``yield`` when its process asks (a stop, quiet, recycling): then the outcome is
``fate.Suspended`` and the worker puts the job back on its queue with its cursor.

The worker that runs the job is its ``Host``, handed over in a context variable set by
``engine/execute.py`` (an asyncio task copies it). Without one (a plain call, the
``testing`` modes) the generator simply runs to its end: no checkpoint, no stop.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import AsyncGenerator, Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from .. import store
from ..config import as_text, logger
from . import current, fate
from .inprogress import InProgressList

MAX_CURSOR_BYTES = 64 * 1024  # a checkpoint holds one cursor per job: bounded in size too
DEFAULT_EVERY = 100
DEFAULT_SECONDS = 5.0


@dataclass(frozen=True)
class Policy:
    """When to checkpoint: after ``every`` items, or ``seconds`` since the last one (either
    may be None; the first due wins)."""

    every: int | None = DEFAULT_EVERY
    seconds: float | None = DEFAULT_SECONDS


class Host(Protocol):
    """What the process running the job provides (the ``Worker``)."""

    @property
    def fetcher(self) -> InProgressList:
        """Its in-progress list: the checkpoints are written with its identity and fence."""

    def pause_due(self) -> bool:
        """Asked at every yield: should the job stop here (stop, quiet, recycling)?"""

    def count_item(self) -> None:
        """One more item done in this process (items count towards ``--max-jobs``)."""


class Context:
    """Set by the worker around one run; the driver leaves its ``Run`` here."""

    __slots__ = ("host", "payload", "run")

    def __init__(self, host: Host, payload: dict[str, Any]) -> None:
        self.host = host
        self.payload = payload
        self.run: Run | None = None


CURRENT: contextvars.ContextVar[Context | None] = contextvars.ContextVar("cogworker_iteration", default=None)


def encode(cursor: Any, name: str) -> str:
    """The cursor as JSON text; TypeError (the job's failure) if it can't be stored."""
    try:
        text = json.dumps(cursor)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"iterable job {name} yielded a cursor JSON can't carry ({type(cursor).__name__}): {exc}"
        ) from None
    if len(text) > MAX_CURSOR_BYTES:
        raise TypeError(
            f"iterable job {name} yielded a cursor of {len(text)} bytes as JSON "
            f"(at most {MAX_CURSOR_BYTES}): yield a key, not the item"
        )
    return text


def read_checkpoint(lst: InProgressList, jid: str) -> tuple[Any, int] | None:
    """The job's saved (cursor, items done), or None."""
    raw = lst.client.hgetall(lst.keys.checkpoint(jid))
    if not raw:
        return None
    fields = {as_text(k): as_text(v) for k, v in raw.items()}
    try:
        return json.loads(fields["cursor"]), int(fields["done"])
    except (KeyError, ValueError):
        logger.warning("unreadable checkpoint of jid=%s ignored", jid)
        return None


class Run:
    """One run of an iterable job: where it stands, and when to save or stop."""

    def __init__(self, context: Context | None, policy: Policy, name: str) -> None:
        self.context = context
        self.policy = policy
        self.name = name
        self.cursor: Any = None
        self.done = 0  # items done over all runs of this job
        self.items_run = 0  # ... in this run
        self.saved_done = 0
        self.saved_at = time.monotonic()
        self.suspended: fate.Suspended | None = None

    @property
    def jid(self) -> str:
        return str(self.context.payload.get("jid") or "") if self.context else ""

    def begin(self, start: Any) -> Any:
        """The cursor to resume from: the newest (most items done) of the payload's (set
        when it was suspended or filed) and the checkpoint record's; else ``start``."""
        self.cursor = start
        if self.context is None:
            return start
        payload = self.context.payload
        best: tuple[Any, int] | None = None
        if isinstance(payload.get("iter_done"), int):
            best = payload.get("iter_cursor"), payload["iter_done"]
        saved = read_checkpoint(self.context.host.fetcher, self.jid)
        if saved is not None and (best is None or saved[1] > best[1]):
            best = saved
        if best is not None:
            self.cursor, self.done = best
            self.saved_done = self.done
            logger.info(
                "iterable job %s jid=%s resumes after %d item(s) at cursor %s",
                self.name,
                self.jid,
                self.done,
                _short(self.cursor),
            )
        return self.cursor

    def advance(self, cursor: Any) -> bool:
        """One item done, ``cursor`` yielded; True if a checkpoint is due now."""
        self.cursor = cursor
        self.done += 1
        self.items_run += 1
        if self.context is None:
            return False
        if self.items_run > 1:  # the run itself counts as one job: its first item is that one
            self.context.host.count_item()
        every, seconds = self.policy.every, self.policy.seconds
        return bool(
            (every is not None and self.done - self.saved_done >= every)
            or (seconds is not None and time.monotonic() - self.saved_at >= seconds)
        )

    def pause_due(self) -> bool:
        """Its process stops (or goes quiet, ...), or an operator cancelled it: it stops
        at this yield (cancelled, it then ends as such: docs/architecture.md#cancel)."""
        if self.context is None:
            return False
        job = current.current_job()
        return self.context.host.pause_due() or (job is not None and job.cancelled)

    def save(self, state: str = "running", ttl: int | None = None) -> None:
        """The checkpoint, in Redis and in the payload (a failure's filing carries it). A
        Redis error is logged and the job goes on: the next checkpoint may land. Raises
        ``Fenced``: this process's run is no longer the job's."""
        if self.context is None:
            return
        text = encode(self.cursor, self.name)
        self.context.payload.update(iter_cursor=self.cursor, iter_done=self.done)
        extra = {} if ttl is None else {"ttl": ttl}
        try:
            self.context.host.fetcher.checkpoint(self.jid, text, self.done, state, **extra)
        except store.RedisError as exc:
            logger.warning(
                "iterable job %s jid=%s: couldn't save its checkpoint after %d item(s): %s",
                self.name,
                self.jid,
                self.done,
                exc,
            )
            return
        self.saved_done = self.done
        self.saved_at = time.monotonic()

    def pause(self) -> None:
        """Stopped at a yield: the worker suspends it (cursor saved with its requeue)."""
        self.suspended = fate.Suspended(encode(self.cursor, self.name), self.done)

    def failed(self, error: BaseException) -> None:
        """It raised (or a stop-now abandoned it): what it did so far is kept for its next
        run (best-effort)."""
        if self.context is None or self.done == self.saved_done:
            return
        try:
            self.save("failed" if isinstance(error, Exception) else "stopped")
        except Exception as exc:  # noqa: BLE001 (its own failure is what counts; Fenced: the filing learns it too)
            logger.debug("iterable job %s jid=%s: no checkpoint at its failure: %s", self.name, self.jid, exc)

    def finished(self) -> None:
        """Its last item done: the record says so for as long as its status lives."""
        if self.context is not None:
            config = self.context.host.fetcher.config
            self.save("finished", ttl=max(1, int(config.status_ttl)))


def _short(cursor: Any) -> str:
    text = repr(cursor)
    return text if len(text) <= 80 else text[:77] + "..."


def _start(kwargs: dict[str, Any], policy: Policy, name: str) -> tuple[Run, dict[str, Any], Any]:
    context = CURRENT.get()
    run = Run(context, policy, name)
    if context is not None:
        context.run = run
    rest = dict(kwargs)
    return run, rest, rest.pop("cursor", None)


def drive(
    func: Callable[..., Generator[Any, Any, Any]],
    policy: Policy,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """Runs a generator job to its end, or to the yield where its process asked it to stop."""
    run, rest, start = _start(kwargs, policy, name)
    cursor = run.begin(start)
    generator = func(*args, cursor=cursor, **rest)
    try:
        for value in generator:
            if run.advance(value):
                run.save()
            if run.pause_due():
                generator.close()  # its finally blocks run now
                run.pause()
                return
    except BaseException as exc:
        run.failed(exc)
        raise
    run.finished()


async def drive_async(
    func: Callable[..., AsyncGenerator[Any, Any]],
    policy: Policy,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """``drive`` for an async generator job; its Redis writes go to a thread, so a slow
    Redis never blocks the loop other jobs share."""
    run, rest, start = _start(kwargs, policy, name)
    cursor = await asyncio.to_thread(run.begin, start)
    generator = func(*args, cursor=cursor, **rest)
    try:
        async for value in generator:
            if run.advance(value):
                await asyncio.to_thread(run.save)
            if run.pause_due():
                await generator.aclose()
                run.pause()
                return
    except BaseException as exc:
        run.failed(exc)
        raise
    await asyncio.to_thread(run.finished)
