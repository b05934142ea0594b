"""Operating periodic entries from anywhere (the API, the CLI, the web UI): disable and
enable an entry fleet-wide, read the published schedule, run an entry now. Registration
and firing are ``cron/ticker.py``'s; these need only Redis and the schedule a master published."""

from __future__ import annotations

from typing import Any

from ..boundedjson import loads as json_loads
from ..config import Config, as_text, get_config
from ..core.payload import JobOptions, build_payload, is_number


def disable(pjid: str, config: Config | None = None) -> None:
    """Stop firing an entry, fleet-wide, from its next slot until ``enable``. Slots that
    pass while it is disabled are skipped, not fired on enable."""
    config = config or get_config()
    config.redis().sadd(config.keys.periodic_disabled, pjid)


def enable(pjid: str, config: Config | None = None) -> None:
    """Undo ``disable``: the entry fires again from its next slot."""
    config = config or get_config()
    config.redis().srem(config.keys.periodic_disabled, pjid)


def disabled(config: Config | None = None) -> set[str]:
    """The pjids disabled at the moment."""
    config = config or get_config()
    return {as_text(m) for m in config.redis().smembers(config.keys.periodic_disabled)}


def schedule(config: Config | None = None) -> dict[str, dict[str, Any]]:
    """The published schedule: pjid -> cron, job, queue, next_fire, last_slot, last_jid, ..."""
    config = config or get_config()
    out = {}
    for pjid, record in config.redis().hgetall(config.keys.periodic_schedule).items():
        try:
            out[as_text(pjid)] = json_loads(record)
        except ValueError:
            continue
    return out


def run_now(pjid: str, config: Config | None = None) -> str | None:
    """Enqueues the entry's job once, now, outside its schedule, from its published record
    (``KeyError`` when no worker published an entry of that name). Its slot bookkeeping
    (the slot locks, ``last_slot``, a unique entry's running lock) is left alone: the next
    slot fires as it would have. Returns the jid, or None if a client middleware dropped it."""
    from ..client.enqueue import push

    config = config or get_config()
    record = schedule(config)[pjid]
    timeout: Any = record.get("timeout")
    opts = JobOptions.build(
        queue=record.get("queue") or "default",
        retry=record.get("retry", 25),
        timeout=float(timeout) if is_number(timeout) and float(timeout) > 0 else None,
    )
    payload = build_payload(record["job"], record.get("args") or [], record.get("kwargs") or {}, opts)
    payload["periodic_pjid"] = pjid  # where it came from; no periodic_slot: it fills no slot
    return push(payload, config=config)
