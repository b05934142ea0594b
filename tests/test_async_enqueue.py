"""The asyncio enqueue API (``enqueue_async`` and friends, on ``redis.asyncio``): the
same payloads as the sync API, the same client middleware (run around the awaited
write, seeing its real result), unique locks, schedule, bulk; and a job enqueued either
way runs identically."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from apps import core_jobs
from core_util import queued, ran, run_worker_until

import cogworker

VARYING = ("jid", "created_at", "enqueued_at")


def same(a, b):
    return {k: v for k, v in a.items() if k not in VARYING} == {k: v for k, v in b.items() if k not in VARYING}


def test_async_payloads_are_the_sync_ones_and_run_identically(config):
    async def main():
        return [
            await core_jobs.record.enqueue_async("a"),
            await core_jobs.record.options(retry=2, timeout=9).enqueue_async("b"),
            *await core_jobs.record.enqueue_many_async([("c",), (("d",), {})]),
        ]

    sync_jids = [
        core_jobs.record.enqueue("a"),
        core_jobs.record.options(retry=2, timeout=9).enqueue("b"),
        *core_jobs.record.enqueue_many([("c",), (("d",), {})]),
    ]
    async_jids = asyncio.run(main())
    entries = {job["jid"]: job for job in queued(config.redis(), config)}
    assert len(entries) == 8
    for s, a in zip(sync_jids, async_jids, strict=True):
        assert same(entries[s], entries[a]), (entries[s], entries[a])
    r = config.redis()
    assert r.smembers(config.keys.queues) == {b"default"} and r.xlen(config.keys.wake) >= 2
    assert run_worker_until(lambda: len(ran(r)) == 8)
    assert sorted(ran(r)) == sorted(f"record:{t}" for t in "abcd" for _ in range(2))


def test_async_schedule_and_unique(config):
    r = config.redis()

    async def main():
        later = await core_jobs.record.enqueue_in_async(60, "later")
        at = await core_jobs.record.enqueue_at_async(time.time() + 120, "at")
        first = await core_jobs.charge.enqueue_async(7, amount=3)
        duplicate = await core_jobs.charge.enqueue_async(7, amount=3)
        many = await core_jobs.charge.enqueue_many_async([((8,), {}), ((8,), {})])
        return later, at, first, duplicate, many

    later, at, first, duplicate, many = asyncio.run(main())
    assert later and at and first and duplicate is None and many[0] and many[1] is None
    scheduled = {json.loads(raw)["jid"]: score for raw, score in r.zrange(config.keys.schedule, 0, -1, withscores=True)}
    assert set(scheduled) == {later, at} and scheduled[later] < scheduled[at]
    [charge_sync] = [core_jobs.charge.options(queue="critical").enqueue(9, amount=3)]
    jobs = {job["jid"]: job for job in queued(config.redis(), config, "critical")}
    assert set(jobs) == {first, many[0], charge_sync}
    assert jobs[first]["unique_digest"] and r.get(config.keys.unique(jobs[first]["unique_digest"])) == first.encode()
    assert same({**jobs[first], "args": [9], "unique_digest": ""}, {**jobs[charge_sync], "unique_digest": ""})


def test_async_enqueue_runs_the_client_middleware_around_the_write(config):
    seen = []

    def stamp(payload, call_next):
        payload["tenant"] = "acme"
        if payload["args"] == ["drop"]:
            return None
        result = call_next()
        seen.append((payload["args"][0], result))
        return result

    cogworker.client_middleware.add(stamp)
    try:

        async def main():
            kept = await core_jobs.record.enqueue_async("keep")
            with pytest.raises(cogworker.EnqueueDropped):  # not a unique job: never None
                await core_jobs.record.enqueue_async("drop")
            dropped = None
            unique_first = await core_jobs.charge.enqueue_async(1)
            unique_again = await core_jobs.charge.enqueue_async(1)
            many = await core_jobs.record.enqueue_many_async([("m1",), ("m2",)])
            return kept, dropped, unique_first, unique_again, many

        kept, dropped, unique_first, unique_again, many = asyncio.run(main())
    finally:
        cogworker.client_middleware.remove(stamp)
    assert dropped is None and unique_again is None
    # Each middleware saw the write's real result: the jid, or None for the duplicate.
    assert seen == [("keep", kept), (1, unique_first), (1, None), ("m1", many[0]), ("m2", many[1])]
    r = config.redis()
    assert all(job["tenant"] == "acme" for job in queued(r, config) + queued(r, config, "critical"))
    assert {job["args"][0] for job in queued(config.redis(), config)} == {"keep", "m1", "m2"}
