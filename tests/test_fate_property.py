"""Property test of the fate decision against a small model, on a real Redis: for random
sequences of events in one job's life, a job is never both acked and requeued, a job that
ran is never requeued, an orphaning counts exactly one, and hooks fire once per transition."""

from __future__ import annotations

import json

import redis
from apps import core_jobs
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cogworker.core import hooks
from cogworker.engine.loop import Worker
from cogworker.fleet import recovery
from cogworker.prefork import reaped

EVENTS = st.lists(st.sampled_from(["shutdown", "run", "die", "refuse"]), min_size=1, max_size=6)


def _requeue_from_retry(r, keys) -> bool:
    entries = r.zrange(keys.retry, 0, -1)
    for entry in entries:
        r.zrem(keys.retry, entry)
        r.lpush(keys.queue("default"), entry)
    return bool(entries)


def _seed(config, fails, retry, unique):
    """The job under test enqueued, with ``retry`` retries (and a unique lock if ``unique``)."""
    r, keys = config.redis(), config.keys
    job = core_jobs.fail_always if fails else core_jobs.record
    jid = job.enqueue("p")
    raw = r.rpop(keys.queue("default"))
    payload = json.loads(raw) | {"retry": retry}
    if unique:
        payload |= {"unique_for": 60, "unique_digest": "d-" + jid}
        r.set(keys.unique("d-" + jid), jid)
    r.lpush(keys.queue("default"), json.dumps(payload))
    return jid


def _die(config, w, jid, seen, before, orphanings):
    """Its process died running it: the master's recovery. The state after, and the
    orphanings counted."""
    r, keys = config.redis(), config.keys
    owed = reaped.reap({"jid": jid}, set(), {}, False, None, crashed=True)
    assert owed.count_orphanings == jid
    drop, keep = reaped.apply(config, w.identity, owed, w.fetcher.listed())
    recovery.requeue_in_progress(
        config, w.identity, drop=drop, keep=keep, count_orphanings=owed.count_orphanings, fence=True
    )
    orphanings += 1
    if orphanings > config.max_orphanings:  # orphaned too often: dead, never requeued
        assert r.llen(keys.queue("default")) == 0
        recovery.bury_repeat_orphans(config)
        # docs/architecture.md#hooks: orphaned when parked (its reason its fate), dead when filed
        assert [(e.name, e.reason) for e in seen[before:]] == [("orphaned", "process_died"), ("dead", "process_died")]
        assert seen[before].counted
        return "dead", orphanings
    assert int(r.get(keys.orphanings(jid)) or 0) == orphanings
    assert r.llen(keys.queue("default")) == 1
    return "queued", orphanings


def _refuse_first_filing(w):
    """Redis refuses the first filing: an interruption instead."""
    real = w.fetcher.file
    calls = {"n": 0}

    def refusing(*args, real=real, calls=calls):
        calls["n"] += 1
        if calls["n"] == 1:
            raise redis.ConnectionError("refused")
        return real(*args)

    w.fetcher.file = refusing


def _ran(config, w, seen, before, fails):
    """The run's events checked; the state after it (a retry made due at once)."""
    r, keys = config.redis(), config.keys
    names = [e.name for e in seen[before:]]
    assert names.count("started") == 1
    assert r.llen(keys.in_progress(w.identity)) == 0
    # A job that ran is never back on its queue.
    assert r.llen(keys.queue("default")) == 0
    if not fails:
        assert names == ["started", "succeeded"]
        return "acked"
    terminal = [n for n in names if n in ("retrying", "dead")]
    assert len(terminal) == 1, names
    assert r.zcard(keys.retry) + r.zcard(keys.dead) == 1
    if terminal == ["dead"]:
        return "dead"
    assert _requeue_from_retry(r, keys)
    return "queued"


def _check_end(config, state, unique, jid, seen, runs):
    r, keys = config.redis(), config.keys
    if state == "acked":
        assert r.zcard(keys.retry) == r.zcard(keys.dead) == 0
        assert r.llen(keys.queue("default")) == 0
        if unique:
            assert not r.exists(keys.unique("d-" + jid))
    if state == "dead" and unique:
        assert not r.exists(keys.unique("d-" + jid))
    assert [e.name for e in seen].count("enqueued") == 1
    assert len(r.lrange("test:ran", 0, -1)) == runs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS, fails=st.booleans(), retry=st.integers(0, 2), unique=st.booleans())
@example(events=["die"] * 4, fails=False, retry=0, unique=False)  # the repeat orphan, every run
def test_fate_against_a_model(config, events, fails, retry, unique):
    config.redis().flushall()
    seen: list[hooks.JobEvent] = []
    hooks.subscribe(hooks.EVENTS, seen.append)
    try:
        jid = _seed(config, fails, retry, unique)
        state, orphanings, runs = "queued", 0, 0
        for step, event in enumerate(events):
            if state != "queued":
                break
            w = Worker([("default", None)], config=config, identity=f"p-{event}-{step}", block_timeout=0)
            work = w.fetcher.fetch()
            assert work is not None and work.jid() == jid
            before = len(seen)
            if event == "shutdown":
                w.stop()
                w.process(work)
                assert [e.name for e in seen[before:]] == ["given_back"]
                continue
            if event == "die":
                state, orphanings = _die(config, w, jid, seen, before, orphanings)
                continue
            if event == "refuse":
                _refuse_first_filing(w)
            w.process(work)
            w.finish()
            runs += 1
            orphanings = 0  # a settled run forgets its orphanings (the ack/file scripts)
            state = _ran(config, w, seen, before, fails)
        _check_end(config, state, unique, jid, seen, runs)
    finally:
        hooks.unsubscribe(hooks.EVENTS, seen.append)
