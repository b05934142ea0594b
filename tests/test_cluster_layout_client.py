"""The cluster's queue layout (docs/architecture.md#cluster-layout), the client's side and
cron, against a real Redis Cluster (3 masters, 3 replicas): each queue's jobs in its
shard's slot, every kind of enqueue routed there and fetched by a worker of that shard,
workflows and batches kept to one shard (refused in one line across shards), and cron's
slots fired once with two tickers, the claim on the fleet and the push in the shard."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest
from cluster_util import cluster, cluster_ns  # noqa: F401 (fixtures)
from core_util import RunningWorker, wait_for
from cron_util import T0, Clock

import cogworker
from cogworker import routing
from cogworker.cron import ticker as cron
from cogworker.cron.claims import InDoubt
from cogworker.errors import ConfigurationError
from cogworker.fleet.poller import Poller
from cogworker.testing.cluster import Cluster, key_slot

QUEUES = ["qa", "qb", "qc", "qd", "qe", "qf"]
ran: list[object] = []


@cogworker.job(results=True)
def add(x: int, y: int) -> int:
    return x + y


@cogworker.job(results=True)
def total(values: list[int]) -> int:
    return sum(values)


@cogworker.job
def record(tag: object) -> None:
    ran.append(tag)


@cogworker.job(unique_for=60)
def once(tag: object) -> None:
    ran.append(tag)


@pytest.fixture
def layout(cluster: Cluster, cluster_ns: str) -> Iterator[cogworker.Config]:  # noqa: F811
    cluster.wait_ok()
    cogworker.config._config = None
    ran.clear()
    yield cogworker.configure(
        redis_url=cluster.url,
        namespace=cluster_ns,
        socket_timeout=2.0,
        cluster_layout="queue",
        cluster_shards=(("wa", "wb"),),
    )
    cogworker.config._config = None


def listed(config: cogworker.Config, queue: str) -> list[dict[str, object]]:
    shard = config.shard(queue)
    return [json.loads(raw) for raw in shard.redis().lrange(shard.keys.queue(queue), 0, -1)]


def test_six_queues_six_slots_each_under_its_shards_tag(layout):
    for queue in QUEUES:
        record.options(queue=queue).enqueue(queue)
    slots = set()
    for queue in QUEUES:
        shard = layout.shard(queue)
        key = shard.keys.queue(queue)
        assert key.startswith(layout.keys.namespace[:-1] + ":" + queue + "}")
        assert [job["args"] for job in listed(layout, queue)] == [[queue]]
        assert not layout.redis().exists(layout.keys.queue(queue))  # nothing in the fleet's slot
        slots.add(key_slot(key))
        assert int(shard.redis().execute_command("CLUSTER", "KEYSLOT", key)) == key_slot(key)
    assert len(slots) == 6 and key_slot(layout.keys.shards) not in slots
    assert {m.decode() for m in layout.redis().smembers(layout.keys.shards)} == set(QUEUES)


def test_every_kind_of_enqueue_lands_in_its_shard_and_its_worker_runs_it(layout):
    big = "x" * 5000  # past PUSH_SCRIPT_MAX: the pipeline path
    record.options(queue="qa").enqueue("single")
    record.options(queue="qb").enqueue(big)
    record.options(queue="qc").enqueue_in(0.3, "scheduled")
    assert once.options(queue="qd").enqueue("unique") and once.options(queue="qd").enqueue("unique") is None
    record.options(queue="qe").enqueue_many([("bulk-e",), ("bulk-e2",)])
    assert asyncio.run(record.options(queue="qf").enqueue_async("async"))
    assert asyncio.run(record.options(queue="qb").enqueue_many_async([("async-bulk",)]))
    record.options(queue="qa").enqueue_many([("bulk-a",)])
    qc = layout.shard("qc")
    assert qc.redis().zcard(qc.keys.schedule) == 1 and not layout.redis().exists(layout.keys.schedule)
    qd = layout.shard("qd")
    assert qd.redis().exists(qd.keys.unique(listed(layout, "qd")[0]["unique_digest"]))
    for queue in QUEUES:  # each job's status: its shard's (enq: bucket; status:<jid> for a scheduled one)
        shard = layout.shard(queue)
        assert shard.redis().keys(shard.keys.namespace + ("*status:*" if queue == "qc" else "*enq:*")), queue
    time.sleep(0.35)
    assert Poller(qc).poll() == 1  # the fleet's duty, run for the shard here: its job onto "qc"
    by_queue = {
        "qa": {"single", "bulk-a"},
        "qb": {big, "async-bulk"},
        "qc": {"scheduled"},
        "qd": {"unique"},
        "qe": {"bulk-e", "bulk-e2"},
        "qf": {"async"},
    }
    expected = set().union(*by_queue.values())
    for queue in QUEUES:
        # Until its jobs ran (not merely left the queue: a worker stopped between its fetch
        # and its run hands the job back, and no worker is left for it on a slow machine).
        with RunningWorker(queues=[(queue, None)], config=layout.shard(queue), lookahead=False):
            wait_for(lambda q=queue: by_queue[q] <= set(map(str, ran)), 30)
    wait_for(lambda: set(ran) == expected, 10)
    assert sorted(map(str, ran)) == sorted(expected)


def test_workflows_across_shards_are_refused_in_one_line(layout):
    with pytest.raises(
        ConfigurationError,
        match="chain's jobs must be in one shard.*'qa' \\(shard 'qa'\\), 'qb' \\(shard 'qb'\\).*cluster_shards",
    ):
        cogworker.chain(add.s(1, 2).options(queue="qa"), add.s(3).options(queue="qb")).enqueue()
    with pytest.raises(ConfigurationError, match="group's jobs must be in one shard"):
        cogworker.group([add.s(1, 2).options(queue="qa"), add.s(3, 4).options(queue="qb")]).enqueue()
    with pytest.raises(ConfigurationError, match="chord's jobs must be in one shard"):
        cogworker.chord([add.s(1, 2).options(queue="wa")], total.s().options(queue="qc")).enqueue()
    assert not listed(layout, "qa") and not listed(layout, "wa")


def test_workflows_within_one_shard_run_end_to_end(layout):
    shard = layout.shard("wa")
    assert shard is layout.shard("wb") and shard.shard_name == "wa"
    with RunningWorker(queues=[("wa", None), ("wb", None)], config=shard, lookahead=False):
        cid = cogworker.chain(add.s(1, 2).options(queue="wa"), add.s(10).options(queue="wb")).enqueue()
        assert cogworker.result(cid, timeout=10) == 13
        gid = cogworker.group([add.s(i, i).options(queue="wb") for i in range(3)]).enqueue()
        assert cogworker.result(gid, timeout=10) == [0, 2, 4]
        chord = cogworker.chord([add.s(i, 1).options(queue="wa") for i in range(3)], total.s().options(queue="wb"))
        assert cogworker.result(chord.enqueue(), timeout=10) == 6
        jid = add.options(queue="wa").enqueue(20, 22)
        routing._placed.clear()  # not remembered: found by looking in every shard
        assert cogworker.result(jid, timeout=10) == 42
        assert asyncio.run(cogworker.result_async(cid, timeout=5)) == 13
        late = add.options(queue="wb").enqueue_in(0.3, 1, 1)
        routing._placed.clear()  # not there yet: looked for again until it is
        poller = threading.Timer(0.5, Poller(shard).poll)  # the fleet's duty, for this shard
        poller.start()
        assert cogworker.result(late, timeout=10) == 2
        poller.join()
    assert shard.redis().exists(shard.keys.result(cid)) and not layout.redis().exists(layout.keys.result(cid))


def test_a_batch_is_one_shards(layout):
    with cogworker.batch(on_complete=record.s("done").options(queue="wb")) as b:
        record.options(queue="wa").enqueue("one")
        record.options(queue="wb").enqueue_many([("two",)])
        with pytest.raises(
            ConfigurationError,
            match=f"batch {b.bid} is in shard 'wa'; a job of queue 'qa' \\(shard 'qa'\\) can't join it.*cluster_shards",
        ):
            record.options(queue="qa").enqueue("elsewhere")
    shard = layout.shard("wa")
    assert shard.redis().exists(shard.keys.batch(b.bid)) and not layout.redis().exists(layout.keys.batch(b.bid))
    with RunningWorker(queues=[("wa", None), ("wb", None)], config=shard, lookahead=False):
        wait_for(lambda: "done" in ran, 10)
    assert sorted(map(str, ran)) == ["done", "one", "two"]
    with cogworker.batch() as lazy:  # no callbacks: the first job's shard
        record.options(queue="qc").enqueue("c")
        with pytest.raises(ConfigurationError, match="is in shard 'qc'"):
            record.options(queue="qd").enqueue_many([("d",)])
    assert layout.shard("qc").redis().exists(layout.shard("qc").keys.batch(lazy.bid))

    async def joined() -> cogworker.batch:
        async with cogworker.batch() as scope:
            await record.options(queue="qe").enqueue_async("e")
            with pytest.raises(ConfigurationError, match="is in shard 'qe'"):
                await record.options(queue="qf").enqueue_async("f")
        return scope

    qe = layout.shard("qe")
    assert qe.redis().hget(qe.keys.batch(asyncio.run(joined()).bid), "total") == b"1"
    with pytest.raises(ConfigurationError, match="batch's jobs must be in one shard.*'qa' \\(shard 'qa'\\), 'qb'"):
        cogworker.batch(
            on_success=record.s(1).options(queue="qa"), on_death=record.s(2).options(queue="qb")
        ).__enter__()


def test_cron_fires_each_slot_once_with_two_tickers(layout):
    cogworker.periodic("* * * * *", "x.y", name="tick", queue="cronq")
    fleet, shard = layout, layout.shard("cronq")
    clock = Clock(T0 + 1)
    tickers = [cron.Ticker(fleet, [cron.entries["tick"]], clock=clock, monotonic=clock) for _ in range(2)]
    fleet.redis().set(fleet.keys.periodic_last_slot("tick"), T0 - 60)
    for minute in range(3):
        clock.t = T0 + 60 * minute + 1
        for t in tickers:
            t.tick()
    assert [job["periodic_slot"] for job in listed(layout, "cronq")] == [T0 + 120, T0 + 60, T0]
    assert fleet.redis().exists(fleet.keys.periodic_last_slot("tick"))  # the claims: the fleet's
    assert shard.redis().exists(shard.keys.periodic_pushed("tick", T0))  # the marks: the shard's
    assert not fleet.redis().exists(fleet.keys.periodic_pushed("tick", T0))


def test_cron_in_doubt_finds_the_mark_in_the_shard_and_never_pushes_twice(layout):
    entry = cogworker.periodic("* * * * *", "x.y", name="doubt", queue="cronq")
    fleet, shard = layout, layout.shard("cronq")
    clock = Clock(T0 + 1)
    t = cron.Ticker(fleet, [entry], clock=clock, monotonic=clock)
    fleet.redis().set(fleet.keys.periodic_last_slot("doubt"), T0 - 60)
    t.tick()
    [job] = listed(layout, "cronq")
    # As if that push's reply had been lost: the reclaim finds its mark in the shard.
    t._in_doubt.append(InDoubt(entry, T0, T0 + 60, [str(job["jid"])], claimed=True))
    t.tick()
    assert len(listed(layout, "cronq")) == 1 and not t._in_doubt
    # A push of a slot whose mark is there already (landed after the reclaim read it) is refused.
    lock = fleet.keys.periodic_lock("doubt", T0 + 60)
    shard.redis().set(shard.keys.periodic_pushed("doubt", T0 + 60), "landed-before", ex=60)
    clock.t = T0 + 61
    t.tick()
    assert len(listed(layout, "cronq")) == 1 and fleet.redis().exists(lock)
    record = json.loads(fleet.redis().hget(fleet.keys.periodic_schedule, "doubt"))
    assert record["last_jid"] == "landed-before" and record["last_slot"] == T0 + 60


def test_result_finds_a_jobs_shard_by_its_status_without_polling(layout):
    """An id this process didn't place: the shard that knows it is found from the job's
    queued field or status, before any result exists, in one pipeline per shard."""
    from cogworker.client import results

    queued = add.options(queue="qc").enqueue(1, 2)
    scheduled = add.options(queue="qd").enqueue_in(600, 1, 2)
    routing._placed.clear()
    soon = time.monotonic() + 0.01
    assert results._search(queued, layout.shards(), soon, 0.01).shard_name == "qc"
    assert results._search(scheduled, layout.shards(), soon, 0.01).shard_name == "qd"
    assert asyncio.run(results._search_async(queued, layout.shards(), soon, 0.01)).shard_name == "qc"
    with pytest.raises(cogworker.ResultTimeout):
        results._search("no-such-jid", layout.shards(), time.monotonic() + 0.2, 0.2)
