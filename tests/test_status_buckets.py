"""The common path of job status and history: hourly buckets ``enq:<hour>`` (queued) and
``done:<hour>`` (first-try successes) instead of per-jid keys, and the readers that merge
them with ``status:<jid>``/``history:<jid>`` (docs/architecture.md#status-buckets).
Real redis-server, real workers."""

from __future__ import annotations

import json
import time

import pytest
from apps import core_jobs
from core_util import RunningWorker, ran, wait_for

import cogworker
from cogworker import api
from cogworker.client import status as status_enqueue
from cogworker.fleet.poller import Poller
from cogworker.lifecycle import donering, history


@pytest.fixture
def config(config):
    status_enqueue._expired_enq = None  # the session's Redis was emptied: this process's memory is stale
    return cogworker.configure(status=True, history=True)


def per_jid_keys(config):
    r = config.redis()
    return sorted(
        k.decode() for p in (config.keys.status_prefix, config.keys.history_prefix) for k in r.scan_iter(p + "*")
    )


def test_a_first_try_success_is_one_field_of_enq_and_of_done_and_no_key_of_its_own(config):
    r = config.redis()
    jid = core_jobs.record.enqueue("quick")
    hour = history.hour_of(time.time())
    assert r.hexists(config.keys.enq(hour), jid)
    assert api.status(jid).state == "queued"
    assert config.status_ttl < r.ttl(config.keys.enq(hour)) <= config.status_ttl + 3600
    with RunningWorker() as worker:
        assert wait_for(lambda: (s := api.status(jid)) is not None and s.state == "succeeded", 5)
    assert per_jid_keys(config) == []
    [bucket] = r.lrange(config.keys.done_ring, 0, -1)  # the done ring's one bucket
    queue, job_class, attempt, started_at, ended_at, identity = json.loads(r.hget(bucket, jid))
    assert (queue, job_class, attempt, identity) == ("default", "apps.core_jobs.record", 1, worker.identity)
    assert started_at <= ended_at
    found = api.status(jid)
    assert (found.attempt, found.queue, found.job_class) == (1, "default", "apps.core_jobs.record")
    [entry] = api.history(jid)
    assert (entry.outcome, entry.went, entry.attempt, entry.identity) == ("succeeded", "succeeded", 1, worker.identity)
    assert not r.hexists(config.keys.enq(hour), jid)  # finished: no longer queued (docs/architecture.md#retention)
    assert config.history_ttl < r.ttl(bucket) <= config.history_ttl + 3600


def test_a_long_job_is_running_in_its_own_key_and_its_success_goes_there_too(config):
    r = config.redis()
    jid = core_jobs.sleepy.enqueue("long", 1.6)  # longer than a flush interval
    with RunningWorker() as worker:
        assert wait_for(lambda: api.status(jid).state == "running", 5)
        assert api.status(jid).identity == worker.identity
        assert wait_for(lambda: api.status(jid).state == "succeeded", 5)
    stored = r.hgetall(config.keys.status(jid))
    assert stored[b"state"] == b"succeeded"  # not left saying "running"
    assert not any(r.hexists(k, jid) for k in r.scan_iter(config.keys.done_prefix + "*"))
    assert [a.outcome for a in api.history(jid)] == ["succeeded"]


def test_a_retried_job_then_succeeded_updates_its_own_keys(config):
    r = config.redis()
    jid = core_jobs.fail_then_pass.enqueue("again", 1)
    poller = Poller(config)
    with RunningWorker():
        assert wait_for(lambda: api.status(jid).state == "retrying", 5)
        poller.poll()
        assert wait_for(lambda: r.hget(config.keys.status(jid), "state") == b"succeeded", 5)
    assert api.status(jid).attempt == 2
    assert [(a.attempt, a.outcome) for a in api.history(jid)] == [(1, "failed"), (2, "succeeded")]
    assert not any(r.hexists(k, jid) for k in r.scan_iter(config.keys.done_prefix + "*"))


def test_a_scheduled_job_has_its_own_key_then_its_success_goes_there(config):
    r = config.redis()
    jid = core_jobs.record.enqueue_in(1, "soon")
    assert r.hget(config.keys.status(jid), "state") == b"scheduled"
    assert r.ttl(config.keys.status(jid)) >= config.status_ttl
    assert not any(r.hexists(k, jid) for k in r.scan_iter(config.keys.enq_prefix + "*"))
    time.sleep(1.1)
    Poller(config).poll()
    with RunningWorker():
        assert wait_for(lambda: "record:soon" in ran(r) and api.status(jid).state == "succeeded", 5)
    assert r.hget(config.keys.status(jid), "state") == b"succeeded"


def test_bulk_enqueue_is_one_field_each_of_one_bucket_with_one_expire(config):
    r = config.redis()
    r.config_resetstat()
    jids = core_jobs.record.enqueue_many([[str(i)] for i in range(50)])
    jids += [core_jobs.record.enqueue("x"), core_jobs.record.enqueue("y")]
    stats = r.info("commandstats")
    assert stats["cmdstat_expire"]["calls"] == 1  # once per bucket per process
    assert "cmdstat_hset" in stats and stats["cmdstat_hset"]["calls"] == 3  # one bulk, two single
    hour = history.hour_of(time.time())
    assert all(r.hexists(config.keys.enq(hour), j) for j in jids)
    assert all(api.status(j).state == "queued" for j in jids) and per_jid_keys(config) == []


def test_hour_rollover_and_a_reader_across_buckets(config):
    """Injected times: enqueued in the last second of one hour, done in the next; readers
    at later times find the records while they are within their TTL, and not after."""
    r = config.redis()
    t0 = (history.hour_of(time.time()) - 10 * 3600) - 0.5  # 00:59:59.5 of an hour, ten hours ago
    key, ttl, fields = status_enqueue.enqueue_bucket(config, [{"jid": "roll", "queue": "q", "class": "C"}], t0)
    r.hset(key, mapping=fields)
    assert key == config.keys.enq(history.hour_of(t0))
    t1 = t0 + 1.0  # the next hour
    history._write_pending(config, [], [], True, [("roll", "q", "C", 1, t0 + 0.2, t1, "w1", None)])
    [bucket] = r.lrange(config.keys.done_ring, 0, -1)
    assert r.hexists(bucket, "roll")
    assert history.hour_of(t1) == history.hour_of(t0) + 3600
    assert 0 < r.ttl(bucket) <= donering.done_ttl(config)
    r.hset(key, mapping=fields)  # (deleted as it finished: put back for the reader's sake)
    assert api.status("roll", now=t1 + 1).state == "succeeded"  # the newest of its records
    later = api.status("roll", now=t1 + 20 * 3600)  # 20 hours on: read across 21 buckets
    assert (later.state, later.updated_at, later.queue, later.job_class) == ("succeeded", t1, "q", "C")
    assert api.status("roll", now=t1 + config.status_ttl + 2 * 3600) is None  # past status_ttl
    assert [a.ended_at for a in api.history("roll", now=t1 + 20 * 3600)] == [t1]
    assert api.history("roll", now=t1 + config.history_ttl + 2 * 3600) == []  # past history_ttl
    assert api.history("roll", now=t1 + config.history_ttl + 2 * 3600) == []


def test_the_newest_of_key_and_buckets_wins_and_history_merges_without_duplicates(config):
    r = config.redis()
    now = time.time()
    history.write(
        config,
        [("mix", now - 5, 60, {"state": "queued", "queue": "q"})],
        [
            (
                "mix",
                json.dumps(
                    {
                        "attempt": 1,
                        "started_at": now - 9,
                        "ended_at": now - 8,
                        "outcome": "orphaned",
                        "went": "queued",
                        "identity": "w0",
                    }
                ),
            )
        ],
    )
    history._write_pending(config, [], [], True, [("mix", "q", "C", 1, now - 2, now - 1, "w1", None)])
    assert api.status("mix").state == "succeeded"  # the done record is newer than status:<jid>
    assert [(a.outcome, a.identity) for a in api.history("mix")] == [("orphaned", "w0"), ("succeeded", "w1")]
    # The same success also in history:<jid> (a rerun's two writers) shows once.
    r.rpush(
        config.keys.history("mix"),
        json.dumps(
            {
                "attempt": 1,
                "started_at": now - 2,
                "ended_at": now - 1,
                "outcome": "succeeded",
                "went": "succeeded",
                "identity": "w1",
            }
        ),
    )
    assert [a.outcome for a in api.history("mix")] == ["orphaned", "succeeded"]
    # An unreadable bucket record is skipped, not an error.
    r.hset(config.keys.enq(history.hour_of(now)), "mix", "not json")
    assert api.status("mix").state == "succeeded"


def test_a_key_of_the_wrong_type_at_a_bucket_skips_it_and_writes_the_rest(config):
    r = config.redis()
    now = time.time()
    wrong = config.keys.done(history.hour_of(now), 1)
    r.set(wrong, "x")
    r.lpush(config.keys.done_ring, wrong)  # the ring's head: not a hash
    history._write_pending(
        config,
        [],
        [],
        True,
        [("a", "q", "C", 1, now - 1, now, "w", None), ("b", "q", "C", 1, now - 3 * 3600, now - 2 * 3600, "w", None)],
    )
    assert r.get(wrong) == b"x"
    assert api.status("b").state == "succeeded" and api.status("a").state == "succeeded"  # in a new bucket
