"""Periodic jobs when something fails, against a real Redis with tickers run in-process on
an injected clock: a failed push rolled back and backed off, a push cut off by an outage,
a claim whose reply is lost, a lost connection, and slots that couldn't be fired on time
(rolled back, missed while Redis was away, a late tick, Redis paused under a running
ticker). (The rules when all goes well: test_cron.)"""

from __future__ import annotations

import threading
import time

import pytest
import redis
from cron_util import T0, Clock, existed_before, last_slot, lock_keys, queued, tick_while_paused, ticker
from prefork_harness import wait_for

import cogworker
from cogworker.core.middleware import client_middleware
from cogworker.cron import ticker as cron
from cogworker.store import lua

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


def test_push_whose_reply_is_lost_after_it_landed_fires_the_slot_once(own_redis, caplog):
    """Redis stops as the push is sent: it times out here, and Redis applies it on resume.
    The reclaim finds the slot's pushed mark and pushes nothing more (it used to fire twice)."""
    config = cogworker.configure(redis_url=own_redis.url, socket_timeout=0.3)
    cogworker.periodic("* * * * *", "x.y", name="u", queue="q")
    calls = []

    def reply_lost(payload, nxt):
        calls.append(payload["jid"])
        if len(calls) == 1:
            own_redis.pause()
        return nxt()

    client_middleware.add(reply_lost)
    r = config.redis()
    r.script_load(lua.script(r, "periodic_push").script)  # else the lost EVALSHA is a NOSCRIPT
    try:
        t = ticker(config, "u", clock=Clock(T0 + 1))
        t.tick()
        assert len(t._in_doubt) == 1
        own_redis.resume()
        wait_for(lambda: queued(config, "q"), what="the push applied on resume")
        t.tick()
        assert t._in_doubt == [] and len(calls) == 1
        assert [(j["periodic_slot"], j["jid"]) for j in queued(config, "q")] == [(T0, calls[0])]
        assert f"slot {T0}'s push had landed after all" in caplog.text
        ttl = r.ttl(config.keys.periodic_pushed("u", T0))
        assert 60 <= ttl <= 120  # bounded: it lives as long as the slot's lock
        t.clock.t = T0 + 61  # the next slot: fired as usual
        t.tick()
        assert [j["periodic_slot"] for j in queued(config, "q")] == [T0 + 60, T0]
    finally:
        if own_redis.paused:
            own_redis.resume()


def test_push_that_raised_after_it_landed_is_not_rolled_back_or_fired_again(config, caplog):
    """A client middleware raises after the push went through: the rollback sees the slot's
    mark and undoes nothing, and the reclaim fires nothing more."""
    cogworker.periodic("* * * * *", "x.y", name="m", queue="q")
    calls = []

    def raises_after(payload, nxt):
        calls.append(payload["jid"])
        jid = nxt()
        if len(calls) == 1:
            raise ValueError("middleware bug after the write")
        return jid

    client_middleware.add(raises_after)
    t = ticker(config, "m", clock=Clock(T0 + 1))
    t.tick()
    assert last_slot(config, "m") == T0 and len(lock_keys(config, "m")) == 1  # not rolled back
    assert "rolled back" not in caplog.text
    t.clock.t = T0 + 30  # past the entry's backoff
    t.tick()
    assert t._in_doubt == [] and len(calls) == 1
    assert [j["jid"] for j in queued(config, "q")] == calls


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


@pytest.mark.parametrize(
    "catch_up, fired, skipped",
    [
        (True, [T0, T0 + 1, T0 + 5, T0 + 6], "periodic s: 3 missed slots skipped"),
        (False, [T0 + 1, T0 + 6], "periodic s: 4 missed slots skipped"),
    ],
)
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
        deadline = resumed + 10  # a loaded machine may bring the ticker back late
        while (
            time.time() < deadline
            and max((j["periodic_slot"] for j in queued(config, "q")), default=0) < int(resumed) + 2
        ):
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(15)
        if own_redis.paused:
            own_redis.resume()
    jobs = {j["periodic_slot"]: j for j in queued(config, "q")}
    fired = sorted(jobs)
    assert len(fired) == len(queued(config, "q")), "a slot fired twice"
    assert k + 1 in fired and jobs[k + 1]["enqueued_at"] >= resumed - 0.05  # under way: fired late
    # After it: one run of skipped slots, then every slot again from the one fired on the
    # way back. Read from the slots, not the clock: a loaded machine may bring the ticker
    # back a second or two after the resume.
    after = [s for s in fired if s > k + 1]
    assert after, fired
    back = after[0]  # the latest missed slot, fired once Redis is back
    assert jobs[back]["enqueued_at"] >= resumed - 0.05, fired
    assert jobs[back]["enqueued_at"] - back < 1.5, fired  # the latest slot then, not an older one
    assert after == list(range(back, after[-1] + 1)), fired  # then every slot
    gaps = list(range(k + 2, back))
    assert gaps, fired  # the slots that passed during the pause
    assert f"periodic s: {len(gaps)} missed slot" in caplog.text
    assert fired[-1] >= int(resumed) + 2  # and every second again
