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

from ..config import Config, get_config, logger
from ..core.batchscope import BATCH_PREFIX, BatchScope
from ..core.payload import dumps, new_jid
from ..lifecycle import unique
from ..store import lua
from . import enqueue
from .jobs import Signature
from .placement import one_shard

CALLBACKS = ("on_success", "on_complete", "on_death")
MAX_BATCHES = 10_000  # the index keeps the newest this many (and none older than workflow_ttl)
DONE_KEEP = 24 * 3600  # a finished batch's record and jobs are kept this long (s)
DESCRIPTION_LIMIT = 500


class batch(BatchScope):  # noqa: N801 (named as the API has it: cogworker.batch(...))
    """``with cogworker.batch(on_success=..., on_complete=..., on_death=...) as b:``: every
    job enqueued inside joins batch ``b.bid``. ``on_success`` is pushed once when every job
    succeeded, ``on_complete`` once when every job succeeded, went dead or was cancelled,
    ``on_death`` once at the first that went dead; none before the block ends. A batch
    that no job joined is complete (and successful) when its block ends. ``keep``: how
    long its record stays once done (seconds)."""

    def __init__(self, on_success: Signature[Any] | None = None, on_complete: Signature[Any] | None = None,
                 on_death: Signature[Any] | None = None, description: str = "", keep: float = DONE_KEEP) -> None:
        given = {"on_success": on_success, "on_complete": on_complete, "on_death": on_death}
        for name, sig in given.items():
            if sig is not None and not isinstance(sig, Signature):
                raise TypeError(f"batch's {name} is a signature (job.s(...)), got {sig!r}")
        if not isinstance(description, str):
            raise TypeError(f"batch's description is a string, got {description!r}")
        if isinstance(keep, bool) or not (isinstance(keep, (int, float)) and keep >= 1):
            raise ValueError(f"batch's keep is at least 1 second, got {keep!r}")
        super().__init__(BATCH_PREFIX + new_jid())
        self.callbacks = {name: sig for name, sig in given.items() if sig is not None}
        self.description = description[:DESCRIPTION_LIMIT]
        self.keep = int(keep)
        self.opened = False
        self._fleet: Config | None = None  # the queue layout: the record waits for its shard

    def open(self, config: Config | None = None, now: float | None = None) -> None:
        """Writes the record (open); the ``with`` block does this as it enters. Under
        ``cogworker.testing``'s inline or fake mode nothing is written (nor fired).

        The queue layout on a cluster: the scripts that settle a job count it in its batch
        and push the callbacks in the same step, so the record is in the shard of its
        callbacks (all in one), or, without any, of its first job: written by that job's
        enqueue (``join``), or at the close if none joined."""
        if enqueue.sink is not None:
            self.opened = True
            return
        config = config or get_config()
        if config.sharded and config.shard_name is None:
            queues = [sig.bound.opts.queue for sig in self.callbacks.values()]
            if not queues:
                self._fleet = config
                return
            config = one_shard(config, queues, "batch")  # its callbacks' shard (the first job must match)
            self.shard = config.shard_name
        self._write_open(config, now)

    def join(self, config: Any, queue: str) -> None:
        """A job of ``queue`` joins (the queue layout): in the batch's shard, opened by the first."""
        super().join(config, queue)
        if not self.opened and self._fleet is not None:
            self._write_open(config, None)

    def _write_open(self, config: Config, now: float | None) -> None:
        now = time.time() if now is None else now
        fields: list[Any] = ["description", self.description, "keep", self.keep]
        for name, sig in self.callbacks.items():
            fields += callback_fields(name, sig, self.bid, config)
        keys = config.keys
        lua.run(config.redis(), "batch_open", [keys.batch(self.bid), keys.batches, keys.stats_batches],
                [self.bid, repr(now), config.workflow_ttl, MAX_BATCHES, repr(now - config.workflow_ttl),
                 keys.workflow_prefix, *fields])
        self.opened = True

    def close(self, config: Config | None = None, now: float | None = None) -> None:
        """Ends the block: the callbacks may fire from now on (at once, if all settled)."""
        if enqueue.sink is not None:
            return
        if self._fleet is not None:  # the queue layout
            if not self.opened:  # no job joined: complete, in any shard ("default"'s)
                into = one_shard(self._fleet, ["default"], "batch")
                self.shard = into.shard_name
                self._write_open(into, now)
            config = self._fleet.shard_named(self.shard or "default")
        elif self.shard is not None and config is None:
            config = get_config().shard_named(self.shard)
        close(self.bid, config, now)

    def __enter__(self) -> batch:
        if not self.opened:
            self.open()
        super().__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        super().__exit__(kind, error, tb)
        if len(self._tokens) == 0:
            # Closed even when the block raised: the jobs it wrote run anyway, and a batch
            # never closed would never fire.
            self.close()

    async def __aenter__(self) -> batch:
        if not self.opened:
            await asyncio.to_thread(self.open)  # a script's round trip, off the event loop
        BatchScope.__enter__(self)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        BatchScope.__exit__(self, kind, error, tb)
        if len(self._tokens) == 0:
            await asyncio.to_thread(self.close)


def close(bid: str, config: Config | None = None, now: float | None = None) -> bool:
    """Closes batch ``bid`` (``batch_close.lua``); False if it is unknown (expired)."""
    config = config or get_config()
    now = time.time() if now is None else now
    reply = lua.run(config.redis(), "batch_close", [config.keys.batch(bid)],
                    [config.keys.workflow_prefix, bid, repr(now)])
    for error in reply[1:]:
        logger.error("batch %s closed, but not all of it could be written: %s", bid,
                     error.decode("utf-8", "replace") if isinstance(error, bytes) else error)
    return bool(reply[0] == 1)


def callback_fields(name: str, sig: Signature[Any], bid: str, config: Config) -> list[Any]:
    """A callback as the record holds it: its payload ready to push (jid fixed now; it
    names its batch in ``batch_of``), queue, class, and for a unique job its lock and TTL."""
    payload = sig.bound.payload(sig.args, sig.kwargs)
    payload["batch_of"] = bid
    fields: list[Any] = [f"cbq:{name}", payload["queue"], f"cbj:{name}", payload["jid"], f"cbc:{name}",
                         payload["class"]]
    if payload.get("unique_for"):
        dumps(payload)
        unique.prepare(payload)
        fields += [f"cbu:{name}", config.keys.unique(payload["unique_digest"]),
                   f"cbut:{name}", unique.lock_ttl(payload)]
    return [f"cb:{name}", dumps(payload), *fields]
