"""Periodic entries, for an operator: the schedule the workers published (this never
imports the app), the fleet-wide disabled set, and a run outside the schedule
(docs/architecture.md#periodic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import store
from ..config import Config, as_text, get_config, number
from ..cron import ticker as cron
from .records import checked


@dataclass(frozen=True)
class PeriodicEntry:
    name: str  # the pjid
    cron: str
    timezone: str
    queue: str
    job_class: str
    next_fire: float | None  # epoch seconds, as the last publishing process computed it
    last_slot: int | None  # epoch of the last slot claimed (fired), from its own key
    last_jid: str | None
    disabled: bool
    last_fired_at: float | None = None
    record: dict[str, Any] = field(default_factory=dict)  # the published record as it is (args, unique, ...)


def _slot(raw: Any, fallback: Any) -> int | None:
    value = number(as_text(raw) if isinstance(raw, bytes) else fallback)
    return None if value is None else int(value)


def periodic_entries(config: Config | None = None) -> list[PeriodicEntry]:
    """Every entry a worker published at boot, by name (unreadable records skipped)."""
    config = (config or get_config()).fleet  # periodic entries are the fleet's keys
    client, keys = config.redis(), config.keys
    with checked(client, keys.periodic_schedule, "hash"):
        published = cron.schedule(config)
    with checked(client, keys.periodic_disabled, "set"):
        disabled = cron.disabled(config)
    names = sorted(n for n, rec in published.items() if isinstance(rec, dict))  # JSON, but not a record: skipped
    pipe = store.pipeline(client)
    for name in names:
        pipe.get(keys.periodic_last_slot(name))
    slots = pipe.execute(raise_on_error=False)
    found = []
    for name, slot in zip(names, slots, strict=True):
        rec = published[name]
        found.append(
            PeriodicEntry(
                name=name,
                cron=str(rec.get("cron") or ""),
                timezone=str(rec.get("tz") or "UTC"),
                queue=str(rec.get("queue") or "default"),
                job_class=str(rec.get("job") or ""),
                next_fire=number(rec.get("next_fire")),
                last_slot=_slot(slot, rec.get("last_slot")),
                last_jid=rec.get("last_jid") or None,
                disabled=name in disabled,
                last_fired_at=number(rec.get("last_fired_at")),
                record=rec,
            )
        )
    return found


def periodic_entry(name: str, config: Config | None = None) -> PeriodicEntry | None:
    """The entry of that name; None if no worker published it."""
    return next((e for e in periodic_entries(config) if e.name == name), None)


def _published(name: str, config: Config) -> bool:
    client, key = config.redis(), config.keys.periodic_schedule
    with checked(client, key, "hash"):
        return isinstance(name, str) and bool(client.hexists(key, name))


def disable_periodic(name: str, config: Config | None = None) -> bool:
    """Stop firing the entry, fleet-wide, from its next slot (passed slots are skipped, not
    fired on enable). False, and nothing changed, for a name no worker published (a typo
    would otherwise disable nothing, silently)."""
    config = (config or get_config()).fleet  # periodic entries are the fleet's keys
    if not _published(name, config):
        return False
    with checked(config.redis(), config.keys.periodic_disabled, "set"):
        cron.disable(name, config)
    return True


def enable_periodic(name: str, config: Config | None = None) -> bool:
    """Undo ``disable_periodic``: it fires again from its next slot. False for an unknown name."""
    config = (config or get_config()).fleet  # periodic entries are the fleet's keys
    if not _published(name, config):
        return False
    with checked(config.redis(), config.keys.periodic_disabled, "set"):
        cron.enable(name, config)
    return True


def run_periodic_now(name: str, config: Config | None = None) -> str | None:
    """Enqueue the entry's job once, now, from its published record; its schedule is left
    as it is. The jid; None for an unknown name (or if a client middleware dropped the job:
    ``periodic_entry`` tells the two apart)."""
    config = (config or get_config()).fleet  # periodic entries are the fleet's keys
    if not _published(name, config):
        return None
    try:
        return cron.run_now(name, config)
    except KeyError:  # unpublished meanwhile, or its record unreadable
        return None
