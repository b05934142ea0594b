"""Bad input: garbage on a queue, unknown job names, keys of the wrong type. Each is
logged and handled; the loop survives and other jobs keep running."""

from __future__ import annotations

import json
import threading
import time

import pytest
from apps import core_jobs
from core_util import RunningWorker, ran, wait_for, zentries

import cogworker
from cogworker.engine import loop as worker_module
from cogworker.engine.loop import Worker
from cogworker.fleet.poller import Poller
from cogworker.worker.runner import Housekeeper


@pytest.mark.parametrize(
    "raw, why",
    [
        (b"not json{", "not JSON"),
        (b"", "not JSON"),
        (b"\xff\xfe\x00garbage", "not JSON"),
        (b"[1, 2, 3]", "not an object"),
        (b"42", "not an object"),
        (b'"a string"', "not an object"),
        (b"null", "not an object"),
        (b'{"args": [1], "jid": "abc"}', "no 'class'"),
        (b'{"class": 12, "jid": "abc"}', "no 'class'"),
        (b'{"class": "", "jid": "abc"}', "no 'class'"),
    ],
)
def test_garbage_on_a_queue_goes_to_dead_with_why(config, raw, why):
    r = config.redis()
    k = config.keys
    r.lpush(k.queue("default"), raw)
    core_jobs.record.enqueue("after")
    with RunningWorker() as w:
        assert wait_for(lambda: ran(r) == ["record:after"])
        assert wait_for(lambda: r.llen(k.in_progress(w.identity)) == 0)
    [(entry, score)] = zentries(r, k.dead)
    assert set(entry) >= {"error_class", "error_message", "failed_at", "raw_payload"}
    assert entry["error_class"] == "cogworker.BadPayload"
    assert why in entry["error_message"]
    assert entry["failed_at"] == pytest.approx(score) and abs(score - time.time()) < 30
    if not raw.startswith(b"\xff"):
        assert entry["raw_payload"] == raw.decode()  # the entry exactly as it was
    else:
        assert "garbage" in entry["raw_payload"]
    assert r.llen(k.queue("default")) == 0


def test_unknown_job_fails_through_the_chain_retry_then_dead(config):
    r = config.redis()
    k = config.keys
    seen = []

    @cogworker.server_middleware.add
    def observe(job, payload, queue, call_next):
        try:
            return call_next()
        except Exception as exc:
            seen.append((job, payload["class"], type(exc).__name__))
            raise

    payload = {
        "class": "apps.core_jobs.no_such_job",
        "args": [],
        "kwargs": {},
        "jid": "u" * 24,
        "queue": "default",
        "retry": 1,
        "created_at": time.time(),
        "enqueued_at": time.time(),
    }
    r.lpush(k.queue("default"), json.dumps(payload))
    cogworker.enqueue("no_such_module_anywhere.job", 1)
    with RunningWorker() as w:
        assert wait_for(lambda: r.zcard(k.retry) == 2)
        [raw] = [raw for raw in r.zrange(k.retry, 0, -1) if json.loads(raw)["jid"] == "u" * 24]
        first = json.loads(raw)
        assert first["retry_count"] == 1 and first["error_class"] == "cogworker.UnknownJob"
        assert "no_such_job" in first["error_message"]
        # Its retry is due now: the poller brings it back, it fails again, and dies.
        r.zadd(k.retry, {raw: 0})
        assert Poller(config).poll() == 1
        assert wait_for(lambda: r.zcard(k.dead) == 1)
        assert wait_for(lambda: r.llen(k.in_progress(w.identity)) == 0)
    [(dead, _)] = zentries(r, k.dead)
    assert dead["jid"] == "u" * 24 and dead["retry_count"] == 2 and dead["error_class"] == "cogworker.UnknownJob"
    assert seen.count((None, "apps.core_jobs.no_such_job", "UnknownJob")) == 2
    assert (None, "no_such_module_anywhere.job", "UnknownJob") in seen
    assert wait_for(lambda: r.get(k.stats_failed) == b"3")


def test_a_name_that_is_not_a_job_is_not_run(config):
    """A payload can only run a @job: not any callable it names (os.system, ...)."""
    r = config.redis()
    cogworker.enqueue("apps.core_jobs.plain_function", "x")
    cogworker.enqueue("os.getcwd")
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.retry) == 2)
    assert ran(r) == []
    assert {e["error_class"] for e, _ in zentries(r, config.keys.retry)} == {"cogworker.UnknownJob"}


def test_retry_of_the_wrong_type_is_logged_and_the_loop_survives(config, caplog, monkeypatch):
    monkeypatch.setattr(worker_module, "RECONCILE_INTERVAL", 0.2)
    r = config.redis()
    r.set(config.keys.retry, "a string")
    for i in range(3):
        core_jobs.fail_always.enqueue(i)
    for i in range(5):
        core_jobs.record.enqueue(i)
    with RunningWorker() as w:
        assert wait_for(lambda: len([x for x in ran(r) if x.startswith("record:")]) == 5)
        assert wait_for(lambda: len(w.pending) == 3)
    assert len([x for x in ran(r) if x.startswith("fail_always:")]) == 3  # each ran once
    assert any("WRONGTYPE" in rec.getMessage() or "couldn't" in rec.getMessage() for rec in caplog.records)
    assert r.llen(config.keys.unsettled) == 3  # handed over at shutdown, never requeued
    assert r.llen(config.keys.queue("default")) == 0


def test_queue_of_the_wrong_type_does_not_stop_the_others(config, caplog):
    r = config.redis()
    r.set(config.keys.queue("broken"), "a string")
    for i in range(3):
        core_jobs.record.enqueue(i)
    queues = [("broken", None), ("default", None)]
    with RunningWorker(queues=queues):
        assert wait_for(lambda: len(ran(r)) == 3)
        # And as the queue it blocks on (the last one tried is not the first one).
        core_jobs.record.enqueue("later")
        assert wait_for(lambda: len(ran(r)) == 4)
    assert any("wrong type" in rec.getMessage() for rec in caplog.records)
    with RunningWorker(queues=[("default", None), ("broken", None)]):
        core_jobs.record.enqueue("more")
        assert wait_for(lambda: len(ran(r)) == 5)


@pytest.mark.parametrize("key", ["in_progress_identities", "last_beat"])
def test_registration_key_of_the_wrong_type_does_not_stop_the_worker(config, key):
    r = config.redis()
    r.set(getattr(config.keys, key), "a string")
    core_jobs.record.enqueue("x")
    rw = RunningWorker()
    with rw:
        assert wait_for(lambda: ran(r) == ["record:x"], timeout=5)
    assert rw.error is None


def test_stats_keys_of_the_wrong_type_never_change_a_job(config):
    r = config.redis()
    k = config.keys
    r.lpush(k.stats_processed, "x")
    r.lpush(k.stats_failed, "x")
    for i in range(3):
        core_jobs.record.enqueue(i)
    core_jobs.fail_no_retry.enqueue("f")
    with RunningWorker() as w:
        assert wait_for(lambda: len(ran(r)) == 4 and r.zcard(k.dead) == 1)
        time.sleep(1.2)  # a stats flush fails; nothing else does
        assert wait_for(lambda: r.llen(k.in_progress(w.identity)) == 0)
    assert r.llen(k.queue("default")) == 0 and len(ran(r)) == 4


def test_dead_of_the_wrong_type_and_garbage(config):
    """Garbage can't be buried: remembered, and the loop goes on."""
    r = config.redis()
    k = config.keys
    r.set(k.dead, "a string")
    r.lpush(k.queue("default"), b"garbage")
    core_jobs.record.enqueue("after")
    with RunningWorker() as w:
        assert wait_for(lambda: ran(r) == ["record:after"])
        assert wait_for(lambda: len(w.pending) == 1)
        r.delete(k.dead)
        w._last_reconcile = 0  # reconcile now
        assert wait_for(lambda: r.zcard(k.dead) == 1)
    [(entry, _)] = zentries(r, k.dead)
    assert entry["raw_payload"] == "garbage"


def test_housekeeping_survives_keys_of_the_wrong_type(config):
    """The single-process runner's housekeeping thread: heartbeat keys of the wrong type
    must not stop the scheduled poller."""
    r = config.redis()
    k = config.keys
    r.set(k.processes, "a string")
    r.set(k.in_progress_identities, "a string")
    core_jobs.record.enqueue_at(time.time() + 0.3, "scheduled")
    w = Worker([("default", None)], block_timeout=0.2)
    keeper = Housekeeper(w, ["default"], cron=False)
    thread = threading.Thread(target=w.run, daemon=True)
    keeper.start()
    thread.start()
    try:
        assert wait_for(lambda: ran(r) == ["record:scheduled"], timeout=5)
        assert keeper.is_alive()
    finally:
        keeper.stop()
        w.stop()
        thread.join(10)
        keeper.join(10)


def test_known_queues_set_of_the_wrong_type_does_not_fail_an_enqueue(config):
    """``queues`` only lists names (for a UI): a written job must not look unwritten,
    or the caller's retry would enqueue it twice."""
    r = config.redis()
    k = config.keys
    r.set(k.queues, "a string")
    jid = core_jobs.record.enqueue("one")
    jids = core_jobs.record.enqueue_many([("two",), ("three",)])
    assert isinstance(jid, str) and all(jids)
    assert r.llen(k.queue("default")) == 3
    r.zadd(
        k.schedule,
        {
            json.dumps(
                {
                    "class": "apps.core_jobs.record",
                    "args": ["four"],
                    "kwargs": {},
                    "jid": "f" * 24,
                    "queue": "default",
                    "retry": 0,
                }
            ): 1
        },
    )
    assert Poller(config).poll() == 1
    with RunningWorker():
        assert wait_for(lambda: len(ran(r)) == 4)
    assert sorted(ran(r)) == ["record:four", "record:one", "record:three", "record:two"]
