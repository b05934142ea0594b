"""Periodic jobs, rule by rule, against a real Redis: tickers run in-process with an
injected clock, so slots, catch-up and backoff are exact: registration, one claim per
slot, disabling, the published schedule, waking, unique entries' running lock. (When
something fails: test_cron_failures; real masters: test_cron_fleet.)"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import UTC, datetime

import pytest
from apps import basic, cron_jobs
from core_util import run_worker_until
from cron_util import T0, Clock, last_slot, lock_keys, queued, ticker

import cogworker
from cogworker.cron import ticker as cron
from cogworker.errors import ConfigurationError
from cogworker.fleet import recovery

# -- registration ------------------------------------------------------------------------------


def test_registration_defaults_and_errors():
    entry = cogworker.periodic("*/5 * * * *", basic.add, args=(1, 2))
    assert entry.pjid.startswith("apps.basic.add@") and entry.queue == "default" and entry.retry == 25
    assert cron.entries[entry.pjid] is entry
    with pytest.raises(ConfigurationError, match="registered twice"):
        cogworker.periodic("*/5 * * * *", basic.add, args=(1, 2))
    # Different arguments: a different derived name.
    assert cogworker.periodic("*/5 * * * *", basic.add, args=(2, 2)).pjid != entry.pjid
    named = cogworker.periodic("*/10 * * * * *", "some.job", name="ten-s", queue="low", tz="Europe/Berlin")
    assert (named.pjid, named.queue, named.tz, named.job_name) == ("ten-s", "low", "Europe/Berlin", "some.job")
    with pytest.raises(ConfigurationError, match="'ten-s' is registered twice"):
        cogworker.periodic("0 * * * *", basic.add, name="ten-s")
    with pytest.raises(ConfigurationError, match="'bad-cron'.*invalid cron expression '61 \\* \\* \\* \\*'"):
        cogworker.periodic("61 * * * *", basic.add, name="bad-cron")
    # Valid fields that name no date: 30 February, 31 April, a year gone by.
    for never in ("0 0 30 2 *", "0 0 31 4 *", "0 0 0 1 1 * 2020"):
        with pytest.raises(ConfigurationError, match=f"'never'.*{re.escape(never)!s}.*never fires"):
            cogworker.periodic(never, basic.add, args=(1, 2), name="never")
    # 29 February fires in leap years.
    assert cogworker.periodic("0 0 29 2 *", basic.add, args=(1, 2), name="leap-day").pjid == "leap-day"
    with pytest.raises(ConfigurationError, match="'bad-tz'.*unknown time zone 'Mars/Olympus'"):
        cogworker.periodic("* * * * *", basic.add, name="bad-tz", tz="Mars/Olympus")
    with pytest.raises(ConfigurationError, match="'bad-args'.*args must be"):
        cogworker.periodic("* * * * *", basic.add, name="bad-args", args="12")
    with pytest.raises(ConfigurationError, match="'bad-queue'"):
        cogworker.periodic("* * * * *", basic.add, name="bad-queue", queue="a b")
    with pytest.raises(TypeError, match="JSON"):
        cogworker.periodic("* * * * *", basic.add, name="bad-json", args=(object(),))
    for failed in ("bad-cron", "bad-tz", "bad-args", "bad-queue", "bad-json"):
        assert failed not in cron.entries


def test_slot_is_previous_fire_time_including_now(config):
    cogworker.periodic("* * * * *", "x.y", name="m")
    cogworker.periodic("0 9 * * *", "x.y", name="berlin", tz="Europe/Berlin")
    t = ticker(config, "m", clock=Clock(T0))
    assert t.slot_and_next(cron.entries["m"], T0) == (T0, T0 + 60)
    assert t.slot_and_next(cron.entries["m"], T0 + 59.9) == (T0, T0 + 60)
    slot, following = t.slot_and_next(cron.entries["berlin"], T0)
    assert time.strftime("%H:%M", time.gmtime(slot)) in ("07:00", "08:00")  # 9:00 CEST / CET
    assert following - slot == 86400


# -- ticking: one claim per slot -----------------------------------------------------------------


def test_each_slot_fires_once_across_tickers(config):
    cogworker.periodic("* * * * *", cron_jobs.tick, args=("m",), name="m", queue="cronq")
    clock = Clock(T0 + 0.01)
    tickers = [ticker(config, "m", clock=clock) for _ in range(3)]
    for _ in range(2):
        for t in tickers:
            t.tick()
    clock.t = T0 + 60.02
    for t in tickers:
        t.tick()
    jobs = queued(config, "cronq")
    assert sorted(j["periodic_slot"] for j in jobs) == [T0, T0 + 60]
    job = jobs[0]  # the newest
    assert (job["class"], job["args"], job["periodic_pjid"], job["queue"]) == (
        "apps.cron_jobs.tick",
        ["m"],
        "m",
        "cronq",
    )
    assert last_slot(config, "m") == T0 + 60
    record = cron.schedule(config)["m"]
    assert (record["last_slot"], record["last_jid"], record["next_fire"]) == (T0 + 60, job["jid"], T0 + 120)


def test_catch_up_fires_one_missed_slot_not_one_per_slot(config, caplog):
    cogworker.periodic("* * * * *", "x.y", name="on", queue="q")
    config.redis().set(config.keys.periodic_last_slot("on"), T0 - 600)  # ten slots missed
    ticker(config, "on", clock=Clock(T0 + 30)).tick()
    assert [j["periodic_slot"] for j in queued(config, "q")] == [T0]
    assert f"periodic on: 9 missed slots skipped (after slot {T0 - 600}); firing the latest, slot {T0}" in caplog.text


@pytest.mark.parametrize("catch_up", [True, False])
@pytest.mark.parametrize(
    "expr, now, slot, following",
    [
        # Registered on 15 January: New Year's slot (1 January) is before it existed.
        ("0 0 1 1 *", "2027-01-15T08:00:00", "2027-01-01T00:00:00", "2028-01-01T00:00:00"),
        # A nightly job deployed at 05:02: 03:00 today is not its slot.
        ("0 3 * * *", "2027-01-15T05:02:00", "2027-01-15T03:00:00", "2027-01-16T03:00:00"),
    ],
)
def test_a_new_entry_records_its_first_slot_without_firing(config, caplog, catch_up, expr, now, slot, following):
    def at(text):
        return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()

    cogworker.periodic(expr, "x.y", name="fresh", queue="q")
    clock = Clock(at(now))
    t = ticker(config, "fresh", clock=clock, catch_up=catch_up, existed=False)
    t.tick()
    assert queued(config, "q") == []  # not on deploy
    assert last_slot(config, "fresh") == at(slot)  # recorded: the next boot doesn't see it as missed
    assert f"periodic fresh: new entry: its first slot {int(at(slot))} is recorded, not fired" in caplog.text
    assert f"next one, at {following}+00:00" in caplog.text
    clock.t = at(following) + 0.01
    t.tick()
    assert [j["periodic_slot"] for j in queued(config, "q")] == [at(following)]  # then on schedule


def test_a_new_entry_is_not_fired_by_a_second_master_either(config):
    """Two masters booting with the new entry at once: neither fires it."""
    cogworker.periodic("0 3 * * *", "x.y", name="fresh", queue="q")
    clock = Clock(T0)
    for t in [ticker(config, "fresh", clock=clock, existed=False) for _ in range(2)]:
        t.tick()
    assert queued(config, "q") == []


def test_catch_up_off_skips_the_missed_slot_and_primes_a_new_entry(config):
    cogworker.periodic("* * * * *", "x.y", name="old", queue="q")
    cogworker.periodic("* * * * *", "x.y", name="new", queue="q")
    config.redis().set(config.keys.periodic_last_slot("old"), T0 - 600)
    clock = Clock(T0 + 30)
    t = ticker(config, "old", "new", clock=clock, catch_up=False, existed=False)
    t.tick()
    assert queued(config, "q") == []
    # The missed slot is skipped, not recorded as fired; a new entry's first slot is primed.
    assert last_slot(config, "old") == T0 - 600 and last_slot(config, "new") == T0
    clock.t = T0 + 60.01
    t.tick()
    assert sorted((j["periodic_pjid"], j["periodic_slot"]) for j in queued(config, "q")) == [
        ("new", T0 + 60),
        ("old", T0 + 60),
    ]


def test_entry_catch_up_overrides_the_masters(config):
    for name, catch_up in (("default", None), ("on", True), ("off", False)):
        cogworker.periodic("* * * * *", "x.y", name=name, queue="q", catch_up=catch_up)
        config.redis().set(config.keys.periodic_last_slot(name), T0 - 300)
    for master_catch_up, fired in ((False, {"on"}), (True, {"default", "on"})):
        config.redis().delete(config.keys.queue("q"))
        ticker(config, "default", "on", "off", clock=Clock(T0 + 1), catch_up=master_catch_up).tick()
        assert {j["periodic_pjid"] for j in queued(config, "q")} == fired
        for name in ("default", "on", "off"):
            config.redis().set(config.keys.periodic_last_slot(name), T0 - 300)
        # The slot replayed from scratch: its pushed marks too (periodic_push.lua pushes a slot once).
        marks = config.redis().keys(config.keys.periodic_prefix + "pushed:*")
        config.redis().delete(*lock_keys(config, "on"), *lock_keys(config, "default"), *marks)


# -- disabling ----------------------------------------------------------------------------------


def test_disabled_set_of_the_wrong_type_counts_as_enabled(config, caplog):
    cogworker.periodic("* * * * *", "x.y", name="a", queue="q")
    config.redis().set(config.keys.periodic_disabled, "oops")
    clock = Clock(T0 + 1)
    t = ticker(config, "a", clock=clock)
    t.tick()
    clock.t += 60
    t.tick()
    assert len(queued(config, "q")) == 2
    assert caplog.text.count("treating every entry as enabled") == 1


def test_disable_and_enable(config):
    cogworker.periodic("* * * * *", "x.y", name="a", queue="q")
    cogworker.periodic("* * * * *", "x.y", name="b", queue="q")
    cogworker.disable("a")
    assert cron.disabled() == {"a"}
    clock = Clock(T0 + 1)
    t = ticker(config, "a", "b", clock=clock)
    t.tick()
    assert [j["periodic_pjid"] for j in queued(config, "q")] == ["b"]
    assert last_slot(config, "a") == T0  # the slot is spent: enabling doesn't fire it late
    cogworker.enable("a")
    clock.t = T0 + 30
    t.tick()
    assert len(queued(config, "q")) == 1
    clock.t = T0 + 60.01
    t.tick()
    assert sorted(j["periodic_pjid"] for j in queued(config, "q")) == ["a", "b", "b"]


# -- published schedule, readiness, waking ----------------------------------------------------------


def test_published_schedule(config):
    cogworker.periodic("*/5 * * * *", cron_jobs.tick, args=("p",), name="p", queue="cronq", unique=True)
    config.redis().set(config.keys.periodic_last_slot("p"), T0 - 300)
    t = ticker(config, "p", clock=Clock(T0 + 1))
    t.publish()
    record = cron.schedule(config)["p"]
    assert record == {
        **record,
        "pjid": "p",
        "cron": "*/5 * * * *",
        "job": "apps.cron_jobs.tick",
        "queue": "cronq",
        "args": ["p"],
        "unique": True,
        "next_fire": T0 + 300,
        "last_slot": T0 - 300,
        "last_jid": None,
    }
    t.tick()
    record = cron.schedule(config)["p"]
    assert (record["last_slot"], record["last_jid"]) == (T0, queued(config, "cronq")[0]["jid"])
    # A restarted master keeps what was recorded.
    ticker(config, "p", clock=Clock(T0 + 2)).publish()
    assert cron.schedule(config)["p"]["last_jid"] == record["last_jid"]


def test_publish_failure_is_logged_and_never_stops_ticking(config, caplog):
    cogworker.periodic("* * * * *", "x.y", name="a", queue="q")
    config.redis().set(config.keys.periodic_schedule, "wrong type")
    t = ticker(config, "a", clock=Clock(T0 + 1))
    t.publish()
    assert "periodic schedule not published" in caplog.text
    t.tick()
    assert len(queued(config, "q")) == 1


def test_waits_until_ready(config):
    cogworker.periodic("* * * * *", "x.y", name="a", queue="q")
    ready = threading.Event()
    t = ticker(config, "a", clock=Clock(T0 + 1), ready=ready.is_set)
    t.tick()
    assert config.redis().keys("*") == [config.keys.periodic_last_slot("a").encode()]  # only existed_before's
    assert t.seconds_to_next() == cron.NOT_READY_WAIT
    ready.set()
    t.tick()
    assert len(queued(config, "q")) == 1


def test_wakes_for_the_earliest_next_fire_time_and_at_least_every_5s(config):
    cogworker.periodic("* * * * *", "x.y", name="minutely", queue="q")
    cogworker.periodic("*/2 * * * * *", "x.y", name="two-s", queue="q")
    clock = Clock(T0 + 50)
    t = ticker(config, "minutely", clock=clock)
    assert t.seconds_to_next() < 0.01  # never ticked
    t.tick()
    assert t.seconds_to_next() == pytest.approx(cron.TICK_INTERVAL + 0.002)
    t2 = ticker(config, "minutely", "two-s", clock=clock)
    clock.t = T0 + 50.3
    t2.tick()
    assert t2.seconds_to_next() == pytest.approx(1.702)


# -- unique entries and the running lock --------------------------------------------------------------


def test_unique_entry_skips_slots_while_the_previous_run_holds_the_lock(config):
    cogworker.periodic("* * * * *", "x.y", name="u", queue="q", unique=True)
    r = config.redis()
    clock = Clock(T0 + 1)
    t = ticker(config, "u", clock=clock)
    t.tick()
    first = queued(config, "q")[0]["jid"]
    assert r.get(config.keys.periodic_running("u")) == first.encode()
    assert cron.QUEUED_TTL - 5 < r.ttl(config.keys.periodic_running("u")) <= cron.QUEUED_TTL
    clock.t = T0 + 61
    t.tick()
    assert len(queued(config, "q")) == 1 and last_slot(config, "u") == T0 + 60  # skipped for good
    cron.release_running_lock(config, "u", "not-the-owner")
    assert r.exists(config.keys.periodic_running("u"))
    cron.release_running_lock(config, "u", first)
    clock.t = T0 + 121
    t.tick()
    assert [j["periodic_slot"] for j in queued(config, "q")] == [T0 + 120, T0]


@pytest.mark.parametrize(
    "job,args,expect",
    [
        (cron_jobs.probe, ("u",), "released"),
        (cron_jobs.fail_dead, ("x",), "released"),
        (cron_jobs.fail_retry, ("x",), "extended"),
    ],
)
def test_running_lock_follows_the_job(config, job, args, expect):
    cogworker.periodic("* * * * *", job, args=args, name="u", unique=True)
    r = config.redis()
    key = config.keys.periodic_running("u")
    ticker(config, "u", clock=Clock(time.time())).tick()
    jid = r.get(key).decode()
    run_worker_until(
        lambda: (
            r.llen(config.keys.queue("default")) == 0
            and not r.exists("test:busy")
            and (r.exists("test:probe") or r.zcard(config.keys.retry) or r.zcard(config.keys.dead))
        )
    )
    time.sleep(0.2)
    if job is cron_jobs.probe:
        holder, ttl = json.loads(r.lindex("test:probe", 0))
        assert holder == jid and 60 < ttl <= 10 + cron.RUNNING_GRACE  # switched to the running TTL
    if expect == "released":
        assert not r.exists(key)
    else:
        assert r.get(key) == jid.encode() and r.ttl(key) > cron.QUEUED_TTL + 90


def test_running_lock_released_when_buried_as_repeat_orphan(config):
    cogworker.periodic("* * * * *", cron_jobs.tick, args=("o",), name="u", unique=True)
    r = config.redis()
    ticker(config, "u", clock=Clock(time.time())).tick()
    raw = r.rpop(config.keys.queue("default"))
    r.rpush(config.keys.repeat_orphans, raw)
    assert recovery.bury_repeat_orphans(config) == 1
    assert not r.exists(config.keys.periodic_running("u"))
