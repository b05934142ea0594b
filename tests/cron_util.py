"""Helpers of the periodic jobs' tests (test_cron, test_cron_failures): an injected clock,
a ticker run in-process, and what Redis holds for an entry."""

from __future__ import annotations

import json

from cogworker.cron import ticker as cron

T0 = 1_800_000_000  # a minute boundary (divisible by 60)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def tick_while_paused(own_redis, t):
    """One tick whose claim is sent while Redis is paused: it times out, and Redis applies
    it on resume (a claim whose reply is lost)."""
    own_redis.pause()
    try:
        t.tick()
    finally:
        own_redis.resume()


def ticker(config, *pjids, clock, existed=True, **kwargs):
    """A ticker for these entries. ``existed``: as entries that ran before (the slot
    before the clock's recorded as fired, if none is), so their first slot fires: a new
    entry's is only recorded (test_a_new_entry_records_its_first_slot_without_firing)."""
    t = cron.Ticker(config, [cron.entries[p] for p in pjids], clock=clock, monotonic=clock, **kwargs)
    if existed:
        existed_before(config, t)
    return t


def existed_before(config, t):
    for entry in t.entries:
        previous = t.slot_and_next(entry, t.slot_and_next(entry, t.clock())[0] - 1)[0]
        config.redis().set(config.keys.periodic_last_slot(entry.pjid), previous, nx=True)


def queued(config, queue):
    return [json.loads(raw) for raw in config.redis().lrange(config.keys.queue(queue), 0, -1)]


def last_slot(config, pjid):
    raw = config.redis().get(config.keys.periodic_last_slot(pjid))
    return None if raw is None else int(raw)


def lock_keys(config, pjid):
    return config.redis().keys(config.keys.periodic_prefix + f"lock:{pjid}:*")
