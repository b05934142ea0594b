"""Periodic jobs, rule by rule, against a real Redis: tickers run in-process with an
injected clock, so slots, catch-up and backoff are exact. (Real masters: test_cron_fleet.)"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import datetime, timezone

import pytest
import redis
from apps import basic, cron_jobs
from core_util import run_worker_until

import cogworker
from cogworker.core.middleware import client_middleware
from cogworker.cron import ticker as cron
from cogworker.errors import ConfigurationError
from cogworker.fleet import recovery

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
    assert (job["class"], job["args"], job["periodic_pjid"], job["queue"]) == ("apps.cron_jobs.tick", ["m"], "m",
                                                                               "cronq")
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
@pytest.mark.parametrize("expr, now, slot, following", [
    # Registered on 15 January: New Year's slot (1 January) is before it existed.
    ("0 0 1 1 *", "2027-01-15T08:00:00", "2027-01-01T00:00:00", "2028-01-01T00:00:00"),
    # A nightly job deployed at 05:02: 03:00 today is not its slot.
    ("0 3 * * *", "2027-01-15T05:02:00", "2027-01-15T03:00:00", "2027-01-16T03:00:00"),
])
def test_a_new_entry_records_its_first_slot_without_firing(config, caplog, catch_up, expr, now, slot, following):
    def at(text):
        return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()

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
        ("new", T0 + 60), ("old", T0 + 60)]


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
        config.redis().delete(*lock_keys(config, "on"), *lock_keys(config, "default"))


# -- failures -------------------------------------------------------------------------------------

def test_failed_push_rolls_back_the_claim_backs_off_and_spares_other_entries(config, caplog):
    r = config.redis()
    cogworker.periodic("* * * * *", "x.y", name="broken", queue="brokenq", unique=True)
    cogworker.periodic("* * * * * *", "x.y", name="healthy", queue="okq")
    r.set(config.keys.queue("brokenq"), "not a list")
    clock = Clock(T0 + 0.5)
    t = ticker(config, "broken", "healthy", clock=clock)
    t.tick()
    # Rolled back: last_slot as before this slot, no slot lock, no running lock.
    assert last_slot(config, "broken") == T0 - 60
    assert lock_keys(config, "broken") == [] and r.get(config.keys.periodic_running("broken")) is None
    attempts = []
    for second in range(1, 40):
        clock.t = T0 + second + 0.5
        before = caplog.text.count("periodic broken failed")
        t.tick()
        if caplog.text.count("periodic broken failed") > before:
            attempts.append(second)
        if second == 25:
            r.delete(config.keys.queue("brokenq"))  # fixed
    # Backoff 5 s, 10 s, 20 s after the failures at 0, 5, 15; the try at 35 goes through.
    assert attempts == [5, 15]
    fired = queued(config, "brokenq")
    assert [j["periodic_slot"] for j in fired] == [T0]  # the rolled-back slot, fired once
    assert r.get(config.keys.periodic_running("broken")) == fired[0]["jid"].encode()
    # The other entry fired every second all the while.
    assert sorted(j["periodic_slot"] for j in queued(config, "okq")) == list(range(T0, T0 + 40))
    # Reset on success: the next slot fires on time.
    cron.release_running_lock(config, "broken", fired[0]["jid"])
    clock.t = T0 + 60.01
    t.tick()
    assert [j["periodic_slot"] for j in queued(config, "brokenq")] == [T0 + 60, T0]


def test_push_cut_off_by_an_outage_is_retried_before_the_entry_is_looked_at_again(own_redis):
    config = cogworker.configure(redis_url=own_redis.url, socket_timeout=0.3)
    cogworker.periodic("* * * * *", "x.y", name="u", queue="q", unique=True)
    calls = []

    def redis_goes_away(payload, nxt):
        calls.append(payload["jid"])
        if len(calls) == 1:
            own_redis.pause()  # nothing else gets through either
            raise redis.ConnectionError("lost")
        return nxt()

    client_middleware.add(redis_goes_away)
    try:
        t = ticker(config, "u", clock=Clock(T0 + 1))
        t.tick()
        assert len(t._in_doubt) == 1
        t.tick()  # still paused: the claim in doubt fails again, the entry isn't looked at
        assert len(calls) == 1 and len(t._in_doubt) == 1
        own_redis.resume()
        r = config.redis()
        t.tick()  # the claim is found to be ours, taken over and pushed
        assert t._in_doubt == [] and t._retry_at == {}  # a lost connection: no backoff
        jobs = queued(config, "q")
        assert [(j["periodic_slot"], j["jid"]) for j in jobs] == [(T0, calls[1])]
        assert r.get(config.keys.periodic_running("u")) == calls[1].encode()
        assert last_slot(config, "u") == T0
    finally:
        if own_redis.paused:
            own_redis.resume()


def test_claim_whose_reply_is_lost_is_settled_then_made(own_redis):
    config = cogworker.configure(redis_url=own_redis.url, socket_timeout=0.3)
    cogworker.periodic("* * * * *", "x.y", name="u", queue="q", unique=True)
    t = ticker(config, "u", clock=Clock(T0 + 1))
    config.redis().ping()
    tick_while_paused(own_redis, t)
    assert len(t._in_doubt) == 1
    t.tick()
    jobs = queued(config, "q")
    assert [j["periodic_slot"] for j in jobs] == [T0]
    r = config.redis()
    assert r.get(config.keys.periodic_running("u")) == jobs[0]["jid"].encode()
    assert [r.get(k).decode().split(":")[0] for k in lock_keys(config, "u")] == [jobs[0]["jid"]]


def test_lost_connection_is_not_an_entry_failing(own_redis):
    config = cogworker.configure(redis_url=own_redis.url, socket_timeout=0.5)
    cogworker.periodic("* * * * *", "x.y", name="a", queue="q")
    cogworker.periodic("* * * * *", "x.y", name="b", queue="q")
    clock = Clock(T0 + 1)
    t = ticker(config, "a", "b", clock=clock, existed=False)
    own_redis.stop()
    t.tick()
    assert t._retry_at == {} and t._failures == {}
    assert t.seconds_to_next() >= cron.OUTAGE_WAIT  # no spinning on a refused connection
    own_redis.start()
    existed_before(config, t)  # (the restarted server has no data)
    clock.t += 0.5
    t.tick()  # at once, not after a backoff
    assert sorted(j["periodic_pjid"] for j in queued(config, "q")) == ["a", "b"]


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
    assert record == {**record, "pjid": "p", "cron": "*/5 * * * *", "job": "apps.cron_jobs.tick", "queue": "cronq",
                      "args": ["p"], "unique": True, "next_fire": T0 + 300, "last_slot": T0 - 300, "last_jid": None}
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


@pytest.mark.parametrize("job,args,expect", [
    (cron_jobs.probe, ("u",), "released"),
    (cron_jobs.fail_dead, ("x",), "released"),
    (cron_jobs.fail_retry, ("x",), "extended"),
])
def test_running_lock_follows_the_job(config, job, args, expect):
    cogworker.periodic("* * * * *", job, args=args, name="u", unique=True)
    r = config.redis()
    key = config.keys.periodic_running("u")
    ticker(config, "u", clock=Clock(time.time())).tick()
    jid = r.get(key).decode()
    run_worker_until(lambda: r.llen(config.keys.queue("default")) == 0 and not r.exists("test:busy")
                     and (r.exists("test:probe") or r.zcard(config.keys.retry) or r.zcard(config.keys.dead)))
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


# -- slots that couldn't be fired on time -------------------------------------------------------

def test_rolled_back_slot_fires_once_the_problem_is_gone(config, caplog):
    """An every-second entry: by the time the push works again, later slots have come.
    The claimed slot still fires, once; the ones in between are skipped, and logged."""
    r = config.redis()
    cogworker.periodic("* * * * * *", "x.y", name="s", queue="sq")
    r.set(config.keys.queue("sq"), "not a list")  # the push fails after the claim
    clock = Clock(T0 + 0.5)
    t = ticker(config, "s", clock=clock)
    t.tick()
    assert "rolled back slot" in caplog.text and last_slot(config, "s") == T0 - 1
    r.delete(config.keys.queue("sq"))
    for second in range(1, 12):
        clock.t = T0 + second + 0.5
        t.tick()
    fired = sorted(j["periodic_slot"] for j in queued(config, "sq"))
    assert fired.count(T0) == 1 and len(fired) == len(set(fired))
    # Retried after the 5 s backoff: T0 late, then the slot current then, then every second.
    assert fired == [T0, *range(T0 + 5, T0 + 12)]
    assert "periodic s: 4 missed slots skipped" in caplog.text


def test_claim_whose_reply_is_lost_fires_once_even_after_its_slot_passed(own_redis, caplog):
    config = cogworker.configure(redis_url=own_redis.url, socket_timeout=0.3)
    cogworker.periodic("* * * * * *", "x.y", name="s", queue="q")
    clock = Clock(T0 - 0.5)
    t = ticker(config, "s", clock=clock)
    t.tick()  # fires T0 - 1 (and loads the script: the claim below can land)
    clock.t = T0 + 0.5
    tick_while_paused(own_redis, t)
    assert len(t._in_doubt) == 1
    clock.t = T0 + 3.5
    t.tick()
    clock.t = T0 + 4.5
    t.tick()
    assert sorted(j["periodic_slot"] for j in queued(config, "q")) == [T0 - 1, T0, T0 + 3, T0 + 4]
    assert "periodic s: 2 missed slots skipped" in caplog.text


@pytest.mark.parametrize("catch_up, fired, skipped", [
    (True, [T0, T0 + 1, T0 + 5, T0 + 6], "periodic s: 3 missed slots skipped"),
    (False, [T0 + 1, T0 + 6], "periodic s: 4 missed slots skipped"),
])
def test_slots_missed_while_redis_was_away(own_redis, caplog, catch_up, fired, skipped):
    """Redis away for slots T0+2..T0+5 (refused: no claim landed). Back at T0+5.5: with
    catch-up the latest missed slot fires once and the older ones are skipped; without,
    all of them are skipped. Each way one line says how many."""
    config = cogworker.configure(redis_url=own_redis.url, socket_timeout=0.5)
    cogworker.periodic("* * * * * *", "x.y", name="s", queue="q", catch_up=catch_up)
    clock = Clock(T0 + 0.5)
    t = ticker(config, "s", clock=clock)
    for at in (0.5, 1.5):  # catch-up off: the first slot is primed, not fired
        clock.t = T0 + at
        t.tick()
    own_redis.client().save()  # restarted with its data: only the connections are refused meanwhile
    own_redis.stop()
    for at in (2.5, 3.5, 4.5):
        clock.t = T0 + at
        t.tick()
    own_redis.start()
    for at in (5.5, 6.5):
        clock.t = T0 + at
        t.tick()
    assert sorted(j["periodic_slot"] for j in queued(config, "q")) == fired
    assert caplog.text.count(skipped) == 1


def test_a_late_tick_fires_the_slot_it_passed(config):
    """A process held up past a slot (not Redis): that slot fires late, then the current one."""
    cogworker.periodic("* * * * * *", "x.y", name="s", queue="q")
    clock = Clock(T0 + 0.5)
    t = ticker(config, "s", clock=clock)
    for at in (0.5, 2.7, 3.1):
        clock.t = T0 + at
        t.tick()
    assert sorted(j["periodic_slot"] for j in queued(config, "q")) == [T0, T0 + 1, T0 + 2, T0 + 3]


@pytest.mark.parametrize("socket_timeout", [5.0, 1.0])
def test_redis_paused_with_a_running_ticker(own_redis, caplog, socket_timeout):
    """An every-second entry, real clock, Redis paused 3 s from mid-second. The slot whose
    claim was under way fires once (late); of the slots that passed during the pause, the
    latest fires once Redis is back; the others are skipped with one log line. Nothing
    fires twice. socket_timeout 5: the claim waits out the pause; 1: its reply is lost."""
    config = cogworker.configure(redis_url=own_redis.url, socket_timeout=socket_timeout)
    cogworker.periodic("* * * * * *", "x.y", name="s", queue="q")
    t = cron.Ticker(config, [cron.entries["s"]])
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            t.tick()
            stop.wait(t.seconds_to_next())

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        time.sleep(1.5)
        k = int(time.time()) + 1
        time.sleep(max(0.0, k + 0.5 - time.time()))
        own_redis.pause()
        time.sleep(3.0)
        own_redis.resume()
        resumed = time.time()
        time.sleep(2.5)
    finally:
        stop.set()
        thread.join(15)
        if own_redis.paused:
            own_redis.resume()
    jobs = {j["periodic_slot"]: j for j in queued(config, "q")}
    fired = sorted(jobs)
    assert len(fired) == len(queued(config, "q")), "a slot fired twice"
    assert k + 1 in fired and jobs[k + 1]["enqueued_at"] >= resumed - 0.05  # under way: fired late
    late = [s for s in fired if k + 1 < s <= resumed + 1 and jobs[s]["enqueued_at"] >= resumed - 0.05
            and jobs[s]["enqueued_at"] - s > 0.2]
    assert len(late) == 1, fired  # the latest missed slot, fired once Redis is back
    gaps = [s for s in range(fired[0], fired[-1] + 1) if s not in jobs]
    assert gaps and gaps == list(range(k + 2, late[0])), fired
    assert f"periodic s: {len(gaps)} missed slot" in caplog.text
    assert fired[-1] >= int(resumed) + 2  # and every second again
