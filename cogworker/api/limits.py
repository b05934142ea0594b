"""The fleet's rate limiters, for an operator (docs/architecture.md#limits): each one's
kind and limit, slots in use (concurrency) or starts in its window, jobs waiting on it,
and how many jobs it parked over its limit. Read-only. In the queue layout on a cluster each
part keeps the limiters its jobs used: listed from every part, one row per name."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .. import routing, store
from ..config import Config, as_text, count, get_config, number
from .records import checked

# A waiting entry this far past its due time is back on its queue (the poller runs about
# once a second), or soon parked again with a new one: not counted as waiting.
WAIT_GRACE = 5.0


@dataclass(frozen=True)
class LimiterInfo:
    """One limiter. ``in_use``: slots held by live processes (concurrency) or starts in
    the current window (window); ``waiting``: jobs parked on it, not yet due back;
    ``over``: jobs it has parked over its limit (kept while the limiter is used);
    ``unreadable``: the record's fields that hold no usable number (a damaged or forged
    record), shown as unknown: ``limit`` 0, ``per`` None, ``over`` 0."""

    name: str
    kind: str
    limit: int
    per: float | None
    in_use: int
    waiting: int
    over: int
    last_used: float | None
    holders: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "limit": self.limit,
            "per": self.per,
            "in_use": self.in_use,
            "waiting": self.waiting,
            "over": self.over,
            "last_used": self.last_used,
            "holders": list(self.holders),
            "unreadable": list(self.unreadable),
        }


def _positive(fields: dict[str, str], name: str, bad: list[str]) -> float | None:
    """The record's field ``name`` as a number > 0; None (and ``name`` noted in ``bad``)
    if it is there and isn't one."""
    value = number(fields.get(name))
    if value is not None and value > 0:
        return value
    if name in fields:
        bad.append(name)
    return None


def limiters(config: Config | None = None) -> list[LimiterInfo]:
    """Every limiter used in the last 7 days (at most 1,000), most recently used first."""
    config = config or get_config()
    if not routing.merged(config):
        return _limiters_in(config)
    by_name: dict[str, LimiterInfo] = {}
    for part in routing.parts(config):
        for info in _limiters_in(part):
            by_name[info.name] = _joined(by_name[info.name], info) if info.name in by_name else info
    return sorted(by_name.values(), key=lambda i: -(i.last_used or 0.0))


def _joined(a: LimiterInfo, b: LimiterInfo) -> LimiterInfo:
    """One limiter used by jobs of several parts: its counts summed (each part enforces
    its own copy; the kind and limit shown are the most recently used one's)."""
    newer = a if (a.last_used or 0.0) >= (b.last_used or 0.0) else b
    return LimiterInfo(
        name=a.name,
        kind=newer.kind,
        limit=newer.limit,
        per=newer.per,
        in_use=a.in_use + b.in_use,
        waiting=a.waiting + b.waiting,
        over=a.over + b.over,
        last_used=newer.last_used,
        holders=a.holders + b.holders,
        unreadable=newer.unreadable,
    )


def _limiters_in(config: Config) -> list[LimiterInfo]:
    """``limiters`` of one namespace (or part): three pipelines."""
    client, keys = config.redis(), config.keys
    with checked(client, keys.limits, "sorted set"):
        listed: list[tuple[bytes, float]] = client.zrevrange(keys.limits, 0, -1, withscores=True)  # type: ignore[assignment]
    names = [(as_text(name), number(score, 0.0)) for name, score in listed]
    now = time.time()
    pipe = store.pipeline(client)
    for name, _ in names:
        record_key, held_key, _, waiting_key = keys.limit_keys(name)
        pipe.hgetall(record_key)
        pipe.zrange(held_key, 0, -1)
        pipe.zcount(waiting_key, now - WAIT_GRACE, "+inf")
    replies = pipe.execute(raise_on_error=False)
    rows: list[tuple[str, float, dict[str, Any], list[str], int]] = []
    for i, (name, score) in enumerate(names):
        record, held, waiting = replies[3 * i : 3 * i + 3]
        fields = {as_text(k): as_text(v) for k, v in record.items()} if isinstance(record, dict) else {}
        holders = [as_text(m) for m in held] if isinstance(held, list) else []
        rows.append((name, score, fields, holders, waiting if isinstance(waiting, int) else 0))
    alive = _alive_holders(config, {h.split("\t")[0] for _, _, _, holders, _ in rows for h in holders})
    pipe = store.pipeline(client)
    for name, _, fields, _, _ in rows:
        pipe.zcount(keys.limit_keys(name)[2], now - number(fields.get("per"), 0.0), "+inf")
    in_window = pipe.execute(raise_on_error=False)
    out = []
    for (name, score, fields, holders, waiting), starts in zip(rows, in_window, strict=True):
        kind = fields.get("kind", "concurrency")
        live = tuple(h for h in holders if h.split("\t")[0] in alive)
        in_use = len(live) if kind == "concurrency" else (starts if isinstance(starts, int) else 0)
        bad: list[str] = []
        limit = _positive(fields, "n", bad)
        per = _positive(fields, "per", bad) if kind == "window" else None
        over = _positive(fields, "over", bad) if fields.get("over") not in (None, "0") else 0
        out.append(
            LimiterInfo(
                name=name,
                kind=kind,
                limit=int(limit or 0),
                per=per,
                in_use=in_use,
                waiting=waiting,
                over=int(over or 0),
                last_used=score or None,
                holders=live,
                unreadable=tuple(bad),
            )
        )
    return out


def _alive_holders(config: Config, identities: set[str]) -> set[str]:
    """The holders whose slots still count: registered and not fenced (the script's rule)."""
    if not identities:
        return set()
    ordered = sorted(identities)
    pipe = store.pipeline(config.redis())
    for identity in ordered:
        pipe.exists(config.keys.fenced(identity))
    pipe.hmget(config.keys.last_beat, ordered)
    *fenced, beats = pipe.execute(raise_on_error=False)
    beats = beats if isinstance(beats, list) else [None] * len(ordered)
    return {i for i, f, b in zip(ordered, fenced, beats, strict=True) if f == 0 and b is not None}


def deferrals(config: Config | None = None) -> int:
    """Jobs parked over a limit, ever (all limiters, every part): /metrics' counter."""
    config = config or get_config()
    return sum(count(part.redis().get(part.keys.limits_over)) for part in routing.parts(config))
