"""The scheduled poller: due entries of schedule and retry onto their queues,
atomically, in batches; with two pollers, each job is enqueued once."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

from apps import core_jobs
from core_util import RunningWorker, queued, ran, wait_for

import cogworker
from cogworker.fleet import poller as scheduler
from cogworker.fleet.poller import Poller
from cogworker.store import lua


def _due_payload(i, queue="default", **extra):
    payload = {
        "class": "apps.core_jobs.record",
        "args": [i],
        "kwargs": {},
        "jid": f"{i:024d}",
        "queue": queue,
        "retry": 25,
        "created_at": 1.0,
        "enqueued_at": 1.0,
    }
    payload.update(extra)
    return json.dumps(payload)


def test_due_entries_move_and_future_ones_stay(config):
    r = config.redis()
    k = config.keys
    now = time.time()
    r.zadd(k.schedule, {_due_payload(1): now - 10, _due_payload(2, "low"): now - 1, _due_payload(3): now + 60})
    r.zadd(k.retry, {_due_payload(4, retry_count=1): now - 5, _due_payload(5, retry_count=1): now + 60})
    assert Poller(config).poll() == 3
    assert [p["args"] for p in queued(r, config)] == [[4], [1]]
    assert [p["args"] for p in queued(r, config, "low")] == [[2]]
    assert r.smembers(k.queues) == {b"default", b"low"}
    assert r.zcard(k.schedule) == 1 and r.zcard(k.retry) == 1
    # Moved exactly as stored (nothing re-encoded).
    assert r.lrange(k.queue("low"), 0, -1) == [_due_payload(2, "low").encode()]
    assert Poller(config).poll() == 0


def test_big_backlog_moves_in_batches(config, monkeypatch):
    r = config.redis()
    k = config.keys
    now = time.time()
    r.zadd(k.schedule, {_due_payload(i): now - 100 + i / 1000 for i in range(scheduler.CHUNK * 2 + 37)})
    calls = []
    real_run = lua.run

    def spy(client, name, *args, **kwargs):
        reply = real_run(client, name, *args, **kwargs)
        if name == "poll_due":
            calls.append(int(reply[0]))
        return reply

    monkeypatch.setattr(lua, "run", spy)
    assert Poller(config).poll() == scheduler.CHUNK * 2 + 37
    assert max(calls) <= scheduler.CHUNK and len([c for c in calls if c]) >= 3
    assert r.llen(k.queue("default")) == scheduler.CHUNK * 2 + 37
    assert r.zcard(k.schedule) == 0
    # Oldest first: the first due lands at the fetch end.
    assert json.loads(r.lindex(k.queue("default"), -1))["args"] == [0]


def test_two_pollers_enqueue_each_job_once(config, redis_server):
    r = config.redis()
    k = config.keys
    n = 2000
    now = time.time()
    pipe = r.pipeline(transaction=False)
    for start in range(0, n, 500):
        pipe.zadd(k.schedule, {_due_payload(i): now - 1 for i in range(start, start + 500)})
        pipe.zadd(k.retry, {_due_payload(n + i): now - 1 for i in range(start, start + 500)})
    pipe.execute()
    moved = []
    go = threading.Event()

    def poll_until_empty():
        own = cogworker.Config(redis_url=redis_server.url)  # a client of its own
        poller = Poller(own)
        go.wait()
        total = 0
        while r.zcard(k.schedule) or r.zcard(k.retry):
            total += poller.poll()
        moved.append(total)

    threads = [threading.Thread(target=poll_until_empty) for _ in range(3)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(60)
    assert sum(moved) == 2 * n
    jids = Counter(json.loads(raw)["jid"] for raw in r.lrange(k.queue("default"), 0, -1))
    assert len(jids) == 2 * n and set(jids.values()) == {1}


def test_scheduled_job_runs_once_with_the_worker(config):
    r = config.redis()
    core_jobs.record.enqueue_in(0.3, "soon")
    poller = Poller(config, interval=0.05)
    with RunningWorker():
        assert wait_for(lambda: poller.poll() is not None and ran(r) == ["record:soon"], timeout=5)
        time.sleep(0.3)
        poller.poll()
    assert ran(r) == ["record:soon"]


def test_garbage_in_schedule_goes_to_dead(config):
    r = config.redis()
    k = config.keys
    r.zadd(k.schedule, {"not json": 1, "[1]": 2, _due_payload(1): 3})
    assert Poller(config).poll() == 1
    dead = [json.loads(x) for x in r.zrange(k.dead, 0, -1)]
    assert sorted(d["raw_payload"] for d in dead) == ["[1]", "not json"]
    assert all(d["error_class"] == "cogworker.BadPayload" and d["error_message"] and d["failed_at"] for d in dead)
    assert r.zcard(k.schedule) == 0


def test_garbage_is_filed_by_the_one_dead_entry_builder_and_fires_dead(config):
    """Poller garbage gets the same dead entry as a bad payload a worker fetched: raw
    payload cut at the limit, its jid when readable, and the ``dead`` hook (bad_payload)."""
    from cogworker.core import fate, hooks

    r = config.redis()
    k = config.keys
    huge = "x" * (fate.RAW_PAYLOAD_LIMIT + 10)
    r.zadd(k.retry, {huge: 1, json.dumps({"jid": "j-no-class"}): 2})
    events: list[hooks.JobEvent] = []
    hooks.subscribe("dead", events.append)
    try:
        assert Poller(config).poll() == 0
    finally:
        hooks.unsubscribe("dead", events.append)
    dead = sorted((json.loads(x) for x in r.zrange(k.dead, 0, -1)), key=lambda d: len(d["raw_payload"]))
    assert [d.get("jid") for d in dead] == ["j-no-class", None]
    assert len(dead[1]["raw_payload"]) == fate.RAW_PAYLOAD_LIMIT
    assert r.zcard(k.retry) == 0
    assert sorted(e.reason for e in events) == ["bad_payload", "bad_payload"]


def test_one_set_of_the_wrong_type_does_not_stop_the_other(config, caplog):
    r = config.redis()
    k = config.keys
    r.set(k.schedule, "a string")
    r.zadd(k.retry, {_due_payload(1): 1})
    assert Poller(config).poll() == 1
    assert any(k.schedule in rec.getMessage() for rec in caplog.records)


def test_a_queue_of_the_wrong_type_does_not_hold_up_other_entries(config):
    """An entry whose queue can't be written stays where it is (nothing lost), and the
    due entries behind it still move."""
    r = config.redis()
    k = config.keys
    r.set(k.queue("broken"), "a string")
    stuck = _due_payload(0, "broken")
    r.zadd(k.retry, {stuck: 1})
    r.zadd(k.retry, {_due_payload(i): 2 + i for i in range(1, scheduler.CHUNK + 20)})
    poller = Poller(config)
    poller.poll()
    assert r.zrange(k.retry, 0, -1) == [stuck.encode()]
    assert r.llen(k.queue("default")) == scheduler.CHUNK + 19
    r.delete(k.queue("broken"))
    assert poller.poll() == 1
    assert r.zcard(k.retry) == 0


def test_orphan_recovery_pass_trims_the_dead_set(config):
    """Paths that bury without the filing script's trim are trimmed by the recovery pass."""
    import time as _time

    from cogworker.fleet.recovery import OrphanRecovery

    r = config.redis()
    now = _time.time()
    old = {f"old{i}": now - 181 * 24 * 3600 for i in range(5)}
    fresh = {f"fresh{i}": now - i for i in range(10)}
    r.zadd(config.keys.dead, {**old, **fresh})
    cfg = cogworker.configure(dead_max_jobs=8)
    OrphanRecovery(cfg).run()
    left = {m.decode() for m in r.zrange(config.keys.dead, 0, -1)}
    assert left == {f"fresh{i}" for i in range(8)}  # the 180-day-old ones and the 2 oldest others gone
