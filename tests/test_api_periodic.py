"""api.periodic_entries / disable_periodic / enable_periodic / run_periodic_now, on a
schedule published by a real ticker, against a real redis-server."""

from __future__ import annotations

import json

import pytest
from apps import cron_jobs

import cogworker
from cogworker import api
from cogworker.cron import ticker as cron
from cogworker.errors import WrongType

T0 = 1_800_000_000  # a minute boundary


def _publish(config, clock_at=T0 + 1):
    cogworker.periodic("*/5 * * * *", cron_jobs.tick, args=("p",), name="p", queue="cronq", tz="Europe/Paris")
    cogworker.periodic("0 3 * * *", cron_jobs.tick, args=("n",), name="nightly")
    ticker = cron.Ticker(
        config, [cron.entries["p"], cron.entries["nightly"]], clock=lambda: clock_at, monotonic=lambda: clock_at
    )
    ticker.publish()
    return ticker


def test_entries_as_published_then_fired(config):
    assert api.periodic_entries() == []
    ticker = _publish(config)
    entries = api.periodic_entries()
    assert [e.name for e in entries] == ["nightly", "p"]
    p = entries[1]
    assert (p.cron, p.timezone, p.queue, p.job_class) == ("*/5 * * * *", "Europe/Paris", "cronq", "apps.cron_jobs.tick")
    assert p.next_fire is not None and p.next_fire > T0 and p.last_jid is None and p.disabled is False
    assert p.record["args"] == ["p"] and entries[0].timezone == "UTC" and entries[0].queue == "default"
    ticker.tick()  # p's first slot, T0: a new entry's is recorded, not fired
    first = api.periodic_entry("p")
    assert first is not None and first.last_slot == T0 and first.last_jid is None
    assert config.redis().llen(config.keys.queue("cronq")) == 0
    ticker.clock = ticker.monotonic = lambda: T0 + 301
    ticker.tick()  # fires p's next slot (*/5): recorded in the schedule and its last_slot key
    fired = api.periodic_entry("p")
    assert fired is not None and fired.last_slot == T0 + 300
    queued = [json.loads(r) for r in config.redis().lrange(config.keys.queue("cronq"), 0, -1)]
    assert fired.last_jid == queued[0]["jid"]
    assert api.periodic_entry("nope") is None


def test_disable_enable_and_unknown_names(config):
    _publish(config)
    assert api.disable_periodic("p") is True
    assert [e.name for e in api.periodic_entries() if e.disabled] == ["p"] and cron.disabled() == {"p"}
    assert api.enable_periodic("p") is True
    assert cron.disabled() == set() and not api.periodic_entry("p").disabled
    # A name no worker published: nothing changes (a typo must not disable nothing silently).
    assert api.disable_periodic("typo") is False and api.enable_periodic("typo") is False
    assert cron.disabled() == set()


def test_run_now_enqueues_once_and_leaves_the_schedule(config):
    _publish(config)
    before = config.redis().get(config.keys.periodic_last_slot("p"))
    jid = api.run_periodic_now("p")
    (job,) = [json.loads(r) for r in config.redis().lrange(config.keys.queue("cronq"), 0, -1)]
    assert job["jid"] == jid and job["periodic_pjid"] == "p" and job["args"] == ["p"]
    assert config.redis().get(config.keys.periodic_last_slot("p")) == before
    assert api.run_periodic_now("unknown") is None
    assert config.redis().llen(config.keys.queue("cronq")) == 1


def test_bad_keys_are_one_line(config):
    config.redis().set(config.keys.periodic_schedule, "not a hash")
    with pytest.raises(WrongType, match="periodic:schedule holds a string"):
        api.periodic_entries()
    with pytest.raises(WrongType):
        api.disable_periodic("p")
    config.redis().delete(config.keys.periodic_schedule)
    records = {"bad": "{not json", "five": "5", "ok": json.dumps({"cron": "* * * * *"})}
    config.redis().hset(config.keys.periodic_schedule, mapping=records)
    (only,) = api.periodic_entries()
    assert only.name == "ok" and only.job_class == "" and only.next_fire is None and only.last_slot is None
