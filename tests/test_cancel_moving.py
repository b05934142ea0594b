"""api.cancel of a job that moves while it is looked for: each look reads the places one
after another, so a job that moves between two reads must still be found (by the order of
the reads, or by a second look), and cancelled as the job it is: never taken for a chain's
id, which would write a workflow's mark for it."""

from __future__ import annotations

import importlib
import json

from cogworker import api
from cogworker.client.jobs import by_name

cancel_module = importlib.import_module("cogworker.api.cancel")  # (cogworker.api.cancel is also the function)

IDENTITY = "host:1:abc"


def _enqueued(config):
    jid = by_name("apps.pf_cancel.brief").enqueue("t", 0.0)
    raw = config.redis().lrange(config.keys.queue("default"), 0, -1)[0]
    assert json.loads(raw)["jid"] == jid
    return jid, raw


def _cancelled_as_a_job(config, jid, was):
    r, keys = config.redis(), config.keys
    assert int(r.get(keys.stats_cancelled) or 0) == 1
    assert json.loads(r.get(keys.cancelled(jid)))["was"] == was
    assert not r.zscore(keys.cancelled_workflows, jid), "taken for a chain's id"
    assert r.llen(keys.in_progress(IDENTITY)) == 0
    assert r.zcard(keys.retry) == 0
    assert r.llen(keys.queue("default")) == 0


def test_a_job_fetched_between_the_reads_is_cancelled_as_a_job(config, monkeypatch):
    jid, raw = _enqueued(config)
    r, keys = config.redis(), config.keys
    r.sadd(keys.in_progress_identities, IDENTITY)
    find = cancel_module.Queue.find
    moved = []

    def fetched_meanwhile(self, wanted):
        if not moved:  # a worker's fetch lands just as the queue is read
            moved.append(r.lmove(keys.queue("default"), keys.in_progress(IDENTITY), "RIGHT", "LEFT"))
            return None
        return find(self, wanted)

    monkeypatch.setattr(cancel_module.Queue, "find", fetched_meanwhile)
    assert api.cancel(jid) is True
    assert moved == [raw]
    _cancelled_as_a_job(config, jid, "running")


def test_a_job_failing_back_to_retry_between_the_reads_is_cancelled_as_a_job(config, monkeypatch):
    jid, raw = _enqueued(config)
    r, keys = config.redis(), config.keys
    r.sadd(keys.in_progress_identities, IDENTITY)
    r.lmove(keys.queue("default"), keys.in_progress(IDENTITY), "RIGHT", "LEFT")
    running = cancel_module._running
    moved = []

    def failed_meanwhile(part, needle):
        if not moved:  # its run fails and files it in retry just as the lists are read
            r.lrem(keys.in_progress(IDENTITY), 1, raw)
            moved.append(r.zadd(keys.retry, {raw: 1.0}))
            return iter(())
        return running(part, needle)

    monkeypatch.setattr(cancel_module, "_running", failed_meanwhile)
    assert api.cancel(jid) is True
    assert moved == [1]
    _cancelled_as_a_job(config, jid, "retry")


def test_a_job_gone_is_looked_for_twice_and_answers_false(config):
    r, keys = config.redis(), config.keys
    assert api.cancel("no-such-job") is False
    assert int(r.get(keys.stats_cancelled) or 0) == 0
    assert r.get(keys.cancelled("no-such-job")) is None
