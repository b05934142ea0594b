"""Batches as the operator sees them (docs/architecture.md#batches): one batch's counts and
callbacks, the newest batches, a batch's jobs and their states, how many are known; and
closing a batch whose block could not (``close_batch``: the client's close). Every write
is the scripts' (``batch_open``, ``batch_push``, ``batch_close``, the settlements). In the
queue layout on a cluster a batch lives in one part: each is asked, pages merged by time."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .. import routing
from ..client import batches as client_batches
from ..config import Config, as_text, count, get_config, number

CALLBACK_NAMES = ("on_success", "on_complete", "on_death")
JOB_STATES = ("pending", "succeeded", "dead", "cancelled")


@dataclass(frozen=True)
class BatchInfo:
    """``failed`` = ``dead`` + ``cancelled``; ``closed``: its ``with`` block ended;
    ``done_at``: when its last job settled (None while open or pending); ``callbacks``:
    name -> {"job": class, "jid", "fired_at": epoch s or None} (and "dropped" when a
    unique callback's lock was held); ``expires_at``: when its record goes."""

    bid: str
    description: str
    total: int
    pending: int
    succeeded: int
    failed: int
    dead: int
    cancelled: int
    created_at: float
    closed: bool
    done_at: float | None
    callbacks: dict[str, dict[str, Any]]
    expires_at: float | None

    @property
    def complete(self) -> bool:
        return self.done_at is not None


def _info(bid: str, raw: dict[Any, Any], ttl: int, now: float) -> BatchInfo:
    f = {as_text(k): as_text(v) for k, v in raw.items()}
    callbacks: dict[str, dict[str, Any]] = {}
    for name in CALLBACK_NAMES:
        if f"cb:{name}" in f:
            callbacks[name] = {
                "job": f.get(f"cbc:{name}", ""),
                "jid": f.get(f"cbj:{name}", ""),
                "fired_at": number(f.get(f"fired_at:{name}")),
            }
            if f"dropped:{name}" in f:
                callbacks[name]["dropped"] = f[f"dropped:{name}"]
    dead, cancelled = count(f.get("dead")), count(f.get("cancelled"))
    expires = number(f.get("expires_at")) or (now + ttl if ttl > 0 else None)
    return BatchInfo(
        bid,
        f.get("description", ""),
        count(f.get("total")),
        count(f.get("pending")),
        count(f.get("succeeded")),
        dead + cancelled,
        dead,
        cancelled,
        number(f.get("created_at")) or 0.0,
        "open" not in f,
        number(f.get("done_at")),
        callbacks,
        expires,
    )


def batch(bid: str, config: Config | None = None) -> BatchInfo | None:
    """Batch ``bid``, or None if unknown (never opened, or its record expired)."""
    _check_bid(bid)
    return routing.first(routing.parts(config or get_config()), lambda part: _read(part, [bid])[0])


def close_batch(bid: str, config: Config | None = None) -> bool:
    """Closes batch ``bid`` as the end of its ``with`` block does (``batch_close.lua``):
    for a block whose close could not be written (``BatchNotClosed``). Its callbacks fire
    as usual: at once if every job already settled, else at the last one's settlement.
    Closing a closed batch changes nothing. False if it is unknown (never opened, or its
    record expired). A Redis outage is ridden out as the block's close rides one."""
    _check_bid(bid)
    config = config or get_config()
    if not routing.merged(config):
        return client_batches.close(bid, config)
    home = routing.first(  # the queue layout: the part that holds its record
        routing.parts(config), lambda part: part if part.redis().exists(part.keys.batch(bid)) else None
    )
    return home is not None and client_batches.close(bid, home)


def _check_bid(bid: object) -> None:
    if not isinstance(bid, str) or not bid:
        raise TypeError(f"a batch id is a non-empty string (cogworker.batch(...).bid), got {bid!r}")


def _read(config: Config, bids: list[str]) -> list[BatchInfo | None]:
    pipe = config.redis().pipeline(transaction=False)
    for bid in bids:
        pipe.hgetall(config.keys.batch(bid))
        pipe.ttl(config.keys.batch(bid))
    replies = pipe.execute()
    now = time.time()
    return [
        _info(bid, raw, int(ttl), now) if raw else None
        for bid, raw, ttl in zip(bids, replies[::2], replies[1::2], strict=True)
    ]


def batches(limit: int = 50, offset: int = 0, config: Config | None = None) -> list[BatchInfo]:
    """The batches known, newest first (those whose record expired are left out)."""
    if limit < 0 or offset < 0:
        raise ValueError(f"limit and offset are at least 0, got {limit}, {offset}")
    if limit == 0:
        return []
    config = config or get_config()
    if routing.merged(config):
        pages = [_newest(part, 0, offset + limit) for part in routing.parts(config)]
        chosen = routing.merge_pages(pages, lambda row: row[2], True, offset, limit)
        read: dict[str, BatchInfo | None] = {}
        for part in {id(c): c for c, _, _ in chosen}.values():  # one pipeline a part
            bids = [bid for c, bid, _ in chosen if c is part]
            read.update(zip(bids, _read(part, bids), strict=True))
        return [info for _, bid, _ in chosen if (info := read.get(bid)) is not None]
    found: list[Any] = config.redis().zrevrange(config.keys.batches, offset, offset + limit - 1)
    bids = [as_text(b) for b in found]
    return [info for info in _read(config, bids) if info is not None] if bids else []


def _newest(config: Config, offset: int, limit: int) -> list[tuple[Config, str, float]]:
    """One part's page of its batch index, newest first, with each one's score."""
    found: list[Any] = config.redis().zrevrange(config.keys.batches, offset, offset + limit - 1, withscores=True)
    return [(config, as_text(bid), float(score)) for bid, score in found]


def batch_jobs(bid: str, limit: int = 200, config: Config | None = None) -> list[tuple[str, str]]:
    """Up to ``limit`` of batch ``bid``'s jobs as (jid, state), state one of pending,
    succeeded, dead, cancelled (in no particular order: a hash scanned)."""
    _check_bid(bid)
    if limit < 0:
        raise ValueError(f"limit is at least 0, got {limit}")
    config = config or get_config()
    if routing.merged(config):  # the part that holds the batch's jobs hash
        config = (
            routing.first(
                routing.parts(config), lambda part: part if part.redis().exists(part.keys.batch_jobs(bid)) else None
            )
            or config
        )
    found: list[tuple[str, str]] = []
    for jid, state in config.redis().hscan_iter(config.keys.batch_jobs(bid), count=min(max(limit, 10), 1000)):
        if len(found) >= limit:
            break
        found.append((as_text(jid), as_text(state)))
    return found


def batch_count(config: Config | None = None) -> int:
    """Batches in the index (bounded: docs/architecture.md#batches), for /metrics."""
    config = config or get_config()
    return sum(int(part.redis().zcard(part.keys.batches)) for part in routing.parts(config))


def batch_counters(config: Config | None = None) -> dict[str, int]:
    """Batches created and batch callbacks pushed, ever (for /metrics)."""
    totals = {"created": 0, "callbacks_fired": 0}
    for part in routing.everywhere(config or get_config()):  # written where each batch lives
        created, fired = part.redis().mget([part.keys.stats_batches, part.keys.stats_batch_callbacks])
        totals["created"] += count(as_text(created) if created is not None else None)
        totals["callbacks_fired"] += count(as_text(fired) if fired is not None else None)
    return totals
