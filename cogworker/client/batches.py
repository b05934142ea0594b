"""Batches with callbacks (docs/architecture.md#batches): what ``with cogworker.batch(...)``
writes when it opens and when it closes.

The record (``batch:{bid}``) is written first, open, with each callback's payload ready
(its jid fixed now); every enqueue inside the block joins it (``core/batchscope.py``,
counted by ``batch_push.lua``); the block's end closes it (``batch_close.lua``), which
fires the callbacks at once if every job already settled, or if none joined. After that
the script of the last job's settlement fires them.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any

from .. import routing
from ..config import Config, get_config, logger
from ..core.batchscope import BATCH_PREFIX, BatchScope
from ..core.payload import dumps, new_jid
from ..errors import BatchNotClosed
from ..lifecycle import unique
from ..store import guard
from ..transitions import batches as batch_scripts
from . import enqueue
from .jobs import Signature

CALLBACKS = ("on_success", "on_complete", "on_death")
MAX_BATCHES = 10_000  # the index keeps the newest this many (and none older than workflow_ttl)
DONE_KEEP = 24 * 3600  # a finished batch's record and jobs are kept this long (s)
DESCRIPTION_LIMIT = 500
# How long the end of a block rides out a Redis outage to close its batch (s); a batch
# never closed would never fire, so this is longer than a restart or a failover takes.
CLOSE_WITHIN = 30.0


class batch(BatchScope):  # noqa: N801 (named as the API has it: cogworker.batch(...))
    """``with cogworker.batch(on_success=..., on_complete=..., on_death=...) as b:``: every
    job enqueued inside joins batch ``b.bid``. ``on_success`` is pushed once when every job
    succeeded, ``on_complete`` once when every job succeeded, went dead or was cancelled,
    ``on_death`` once at the first that went dead; none before the block ends. A batch
    that no job joined is complete (and successful) when its block ends. ``keep``: how
    long its record stays once done (seconds); ``close_within``: how long the block's end
    rides out a Redis outage to close it before it raises ``BatchNotClosed`` (seconds)."""

    def __init__(
        self,
        on_success: Signature[Any] | None = None,
        on_complete: Signature[Any] | None = None,
        on_death: Signature[Any] | None = None,
        description: str = "",
        keep: float = DONE_KEEP,
        close_within: float = CLOSE_WITHIN,
    ) -> None:
        given = {"on_success": on_success, "on_complete": on_complete, "on_death": on_death}
        for name, sig in given.items():
            if sig is not None and not isinstance(sig, Signature):
                raise TypeError(f"batch's {name} is a signature (job.s(...)), got {sig!r}")
        if not isinstance(description, str):
            raise TypeError(f"batch's description is a string, got {description!r}")
        if isinstance(keep, bool) or not (isinstance(keep, (int, float)) and keep >= 1):
            raise ValueError(f"batch's keep is at least 1 second, got {keep!r}")
        if isinstance(close_within, bool) or not (isinstance(close_within, (int, float)) and close_within >= 0):
            raise ValueError(f"batch's close_within is at least 0 seconds, got {close_within!r}")
        super().__init__(BATCH_PREFIX + new_jid())
        self.callbacks = {name: sig for name, sig in given.items() if sig is not None}
        self.description = description[:DESCRIPTION_LIMIT]
        self.keep = int(keep)
        self.close_within = float(close_within)
        self.opened = False
        self._fleet: Config | None = None  # a split layout: the record waits for its part

    def open(self, config: Config | None = None, now: float | None = None) -> None:
        """Writes the record (open); the ``with`` block does this as it enters. Under
        ``cogworker.testing``'s inline or fake mode nothing is written (nor fired).

        The queue layout on a cluster: the scripts that settle a job count it in its batch
        and push the callbacks in the same step, so the record is in the part of its
        callbacks (all in one), or, without any, of its first job: written by that job's
        enqueue (``join``), or at the close if none joined."""
        if enqueue.sink is not None:
            self.opened = True
            return
        config = config or get_config()
        if routing.merged(config):
            queues = [sig.bound.opts.queue for sig in self.callbacks.values()]
            if not queues:
                self._fleet = config
                return
            config = routing.one_part(config, queues, "batch")  # its callbacks' part (the first job must match)
            self.part = routing.name_of(config)
        self._write_open(config, now)

    def join(self, config: Any, queue: str) -> None:
        """A job of ``queue`` joins (a split layout): in the batch's part, opened by the first."""
        super().join(config, queue)
        if not self.opened and self._fleet is not None:
            self._write_open(config, None)

    def _write_open(self, config: Config, now: float | None) -> None:
        now = time.time() if now is None else now
        fields: list[Any] = ["description", self.description, "keep", self.keep]
        for name, sig in self.callbacks.items():
            fields += callback_fields(name, sig, self.bid, config)
        keys = config.keys
        batch_scripts.batch_open(
            config.redis(),
            keys,
            record=keys.batch(self.bid),
            index=keys.batches,
            created=keys.stats_batches,
            declared=(),
            bid=self.bid,
            now=repr(now),
            ttl=config.workflow_ttl,
            most=MAX_BATCHES,
            oldest=repr(now - config.workflow_ttl),
            fields=fields,
        )
        self.opened = True

    def close(self, config: Config | None = None, now: float | None = None) -> None:
        """Ends the block: the callbacks may fire from now on (at once, if all settled)."""
        if enqueue.sink is not None:
            return
        if self._fleet is not None:  # the queue layout
            if not self.opened:  # no job joined: complete, in any part ("default"'s)
                into = routing.one_part(self._fleet, ["default"], "batch")
                self.part = routing.name_of(into)
                self._write_open(into, now)
            config = routing.named(self._fleet, self.part or "default")
        elif self.part is not None and config is None:
            config = routing.named(get_config(), self.part)
        close(self.bid, config, now, self.close_within)

    def _close_at_exit(self, raised: bool) -> None:
        """Closed even when the block raised: the jobs it wrote run anyway, and a batch
        never closed would never fire. If the close fails while the block's own error
        propagates, that error is not replaced: the close's is logged (ERROR), naming
        the batch and how to close it."""
        try:
            self.close()
        except BatchNotClosed as exc:
            if not raised:
                raise
            logger.error("%s", exc)

    def __enter__(self) -> batch:
        if not self.opened:
            self.open()
        super().__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        super().__exit__(kind, error, tb)
        if len(self._tokens) == 0:
            self._close_at_exit(error is not None)

    async def __aenter__(self) -> batch:
        if not self.opened:
            await asyncio.to_thread(self.open)  # a script's round trip, off the event loop
        BatchScope.__enter__(self)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        BatchScope.__exit__(self, kind, error, tb)
        if len(self._tokens) == 0:
            await asyncio.to_thread(self._close_at_exit, error is not None)


def close(bid: str, config: Config | None = None, now: float | None = None, within: float = CLOSE_WITHIN) -> bool:
    """Closes batch ``bid`` (``batch_close.lua``); False if it is unknown (expired).

    A Redis outage (away, paused, read-only, out of memory) is ridden out as the worker's
    loops ride one (``guard.Outage``: logged once when it starts and once when it ends,
    backed off) for up to ``within`` seconds: the script is idempotent (``open`` removed,
    each callback fired by ``HSETNX``), so an attempt that did land before its reply was
    lost changes nothing when the next one runs. Past that, ``BatchNotClosed`` names the
    batch and the two ways to close it later."""
    config = config or get_config()
    outage = guard.Outage(f"closing batch {bid}")
    deadline = time.monotonic() + within
    while True:
        at = time.time() if now is None else now
        try:
            keys = config.keys
            reply = batch_scripts.batch_close(
                config.redis(),
                keys,
                record=keys.batch(bid),
                jobs=keys.batch_jobs(bid),
                queues=keys.queues,
                wake=keys.wake,
                batch_callbacks=keys.stats_batch_callbacks,
                declared=[],
                now=repr(at),
            )
        except Exception as exc:  # the policy sorts it: only an outage is retried
            if guard.kind_of(exc) != guard.OUTAGE:
                raise
            delay = guard.handle(f"closing batch {bid}", exc, outage, config)
            if time.monotonic() + delay >= deadline:
                raise BatchNotClosed(bid, within, exc) from exc
            time.sleep(delay)
            continue
        outage.ok()
        break
    for error in reply.errors:
        logger.error("batch %s closed, but not all of it could be written: %s", bid, error)
    return reply.found


def callback_fields(name: str, sig: Signature[Any], bid: str, config: Config) -> list[Any]:
    """A callback as the record holds it: its payload ready to push (jid fixed now; it
    names its batch in ``batch_of``), queue, class, and for a unique job its lock and TTL."""
    payload = sig.bound.payload(sig.args, sig.kwargs)
    payload["batch_of"] = bid
    fields: list[Any] = [
        f"cbq:{name}",
        payload["queue"],
        f"cbj:{name}",
        payload["jid"],
        f"cbc:{name}",
        payload["class"],
    ]
    if payload.get("unique_for"):
        dumps(payload)
        unique.prepare(payload)
        fields += [
            f"cbu:{name}",
            config.keys.unique(payload["unique_digest"]),
            f"cbut:{name}",
            unique.lock_ttl(payload),
        ]
    return [f"cb:{name}", dumps(payload), *fields]
