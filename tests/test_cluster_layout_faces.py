"""The operator's faces in the queue layout on a real Redis Cluster
(docs/architecture.md#cluster-layout): the API, the ``cogworker`` command, a web page and
the /metrics sampler merge what every shard holds. The data is written straight into each
shard's keys (as the enqueue, the settlements and the beat write them), six queues whose
shards sit two on each of the three masters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from api_util import entry, failed
from cluster_util import cluster, cluster_ns  # noqa: F401 (fixtures)
from prefork_harness import TESTS

import cogworker
from cogworker import api
from cogworker.core import heartbeat
from cogworker.metrics.exporter import sample_redis
from cogworker.testing.cluster import Cluster


@dataclass
class Sharded:
    config: cogworker.Config
    queues: list[str]  # two per master, in master order
    url: str
    namespace: str

    def shard(self, queue: str) -> cogworker.Config:
        return self.config.shard(queue)

    def push(self, queue: str, payload: str) -> None:
        """As the enqueue writes a job: its queue's list and the ``queues`` set, in its shard."""
        part = self.shard(queue)
        part.redis().lpush(part.keys.queue(queue), payload)
        part.redis().sadd(part.keys.queues, queue)
        part.note_shard()

    def file(self, queue: str, kind: str, payload: str, score: float) -> None:
        """As the settlements file a job into ``retry``/``dead``/``schedule``: in its shard."""
        part = self.shard(queue)
        part.redis().zadd(getattr(part.keys, kind), {payload: score})
        part.note_shard()


@pytest.fixture
def sharded(cluster: Cluster, cluster_ns: str) -> Iterator[Sharded]:  # noqa: F811
    cluster.wait_ok()
    cogworker.config._config = None
    config = cogworker.configure(
        redis_url=cluster.url, namespace=cluster_ns, cluster_layout="queue", socket_timeout=2.0
    )
    assert config.sharded
    by_master: dict[str, list[str]] = {}
    for i in range(200):  # names whose shards land two on each master
        name = f"q{i}"
        found = by_master.setdefault(cluster.owner(config.shard(name).keys.namespace).node_id, [])
        if len(found) < 2:
            found.append(name)
        if len(by_master) == 3 and all(len(v) == 2 for v in by_master.values()):
            break
    queues = [q for names in by_master.values() for q in names]
    assert len(queues) == 6
    yield Sharded(config, queues, cluster.url, cluster_ns)
    cogworker.config._config = None


def test_queues_sizes_and_pause_across_shards(sharded: Sharded, cluster: Cluster) -> None:  # noqa: F811
    for i, q in enumerate(sharded.queues):
        for n in range(i + 1):
            sharded.push(q, entry("apps.jobs.add", [n], queue=q))
    assert len({cluster.owner(sharded.shard(q).keys.namespace).node_id for q in sharded.queues}) == 3
    assert [q.name for q in api.queues()] == sorted(sharded.queues)
    assert {q.name: q.size() for q in api.queues()} == {q: i + 1 for i, q in enumerate(sharded.queues)}
    assert api.stats().enqueued == sum(range(1, 7))
    target = sharded.queues[3]
    api.queue(target).pause()
    part = sharded.shard(target)
    assert part.redis().smembers(part.keys.paused) == {target.encode()}  # its own shard's set, read by its fetch
    assert [q.name for q in api.queues() if q.paused()] == [target]
    assert [j.args for j in api.queue(target).jobs(0, 10)] == [[0], [1], [2], [3]]
    api.queue(target).resume()
    assert not any(q.paused() for q in api.queues())
    with pytest.raises(cogworker.errors.NotFound):
        api.queue("never-pushed")


def test_dead_and_retry_pages_merge_by_score(sharded: Sharded) -> None:
    four = sharded.queues[:4]
    base = time.time() - 1000
    jids = []
    for i in range(20):  # interleaved over four shards: a page must take from each
        payload = failed("apps.jobs.charge", [i], queue=four[i % 4])
        jids.append(json.loads(payload)["jid"])
        sharded.file(four[i % 4], "dead", payload, base + i)
        sharded.file(four[(i + 1) % 4], "retry", failed("apps.jobs.charge", [i], queue=four[(i + 1) % 4]), base + i)
    dead, retry = api.DeadSet(), api.RetrySet()
    assert dead.size() == 20 and retry.size() == 20
    assert [r.jid for r in dead.jobs(0, 20)] == jids[::-1]  # newest first
    assert [r.jid for r in dead.jobs(5, 5)] == jids[::-1][5:10]
    assert [r.args for r in retry.jobs(3, 4)] == [[3], [4], [5], [6]]  # soonest first
    assert [r.args for r in dead.filter(queue=four[2], limit=10)] == [[18], [14], [10], [6], [2]]
    # A retry goes onto its own queue, in its own shard.
    record = dead.jobs(0, 1)[0]
    assert record.queue == four[3] and dead.retry(record)
    part = sharded.shard(four[3])
    assert json.loads(part.redis().lindex(part.keys.queue(four[3]), 0))["jid"] == jids[19]
    assert dead.retry(jids[0]) and dead.size() == 18
    assert api.queue(four[0]).find(jids[0]) is not None
    assert retry.kill(retry.jobs(0, 1)[0]) and dead.size() == 19 and retry.size() == 19
    assert retry.retry_all() == 19 and retry.size() == 0
    assert sum(api.queue(q).size() for q in four) == 21
    assert dead.clear() == 19 and dead.size() == 0


def test_locate_status_cancel_result_in_a_later_shard(sharded: Sharded) -> None:
    for q in sharded.queues:  # every shard known, a job in each
        sharded.push(q, entry("apps.jobs.add", [0], queue=q))
    queue = max(sharded.queues, key=lambda q: sharded.shard(q).shard_name or "")  # the last a find walks
    payload = entry("apps.jobs.add", [1], queue=queue)
    jid = json.loads(payload)["jid"]
    sharded.push(queue, payload)
    part = sharded.shard(queue)
    assert [p.shard_name for p in sharded.config.shards()] == sorted(sharded.queues)
    assert part.shard_name == sharded.config.shards()[-1].shard_name
    part.redis().hset(
        part.keys.status(jid), mapping={"state": "queued", "updated_at": time.time(), "attempt": 1, "queue": queue}
    )
    part.redis().set(part.keys.progress(jid), json.dumps({"fraction": 0.5, "message": "half", "at": time.time()}))
    found = api.locate(jid)
    assert found.source == f"queue:{queue}" and found.shard == part.shard_name
    assert api.status(jid).state == "queued" and api.progress(jid).fraction == 0.5
    assert api.cancel(jid) and api.queue(queue).size() == 1
    assert api.cancelled(jid)["was"] == "queue" and api.status(jid).state == "cancelled"
    assert not api.cancel(jid)
    with pytest.raises(cogworker.errors.NotFound):
        api.locate(jid)
    retrying = failed("apps.jobs.add", [2], queue=queue)
    sharded.file(queue, "retry", retrying, time.time() + 60)
    assert api.cancel(json.loads(retrying)["jid"]) and api.RetrySet().size() == 0
    part.redis().hset(
        part.keys.result(jid), mapping={"status": "succeeded", "value": "42", "expires_at": time.time() + 60}
    )
    assert api.result(jid).value == 42


def _records(sharded: Sharded) -> tuple[heartbeat.BeatRecord, ...]:
    """A master beating in the fleet, its two children in their shards (one in two shards,
    running a job in the second), as the prefork master and its children write them."""
    pid = os.getpid()
    master = heartbeat.BeatRecord("m-1", "master", pid, sharded.queues[:3], extra={"procs": 2, "children": 2})
    one = heartbeat.BeatRecord("c-1", "child", pid + 1, sharded.queues[:2], extra={"ppid": pid})
    busy = heartbeat.BeatRecord(
        "c-1",
        "child",
        pid + 1,
        sharded.queues[:2],
        busy=1,
        extra={"ppid": pid},
        running={"jid": "j-running", "class": "apps.jobs.add", "queue": sharded.queues[1], "run_at": time.time()},
    )
    two = heartbeat.BeatRecord("c-2", "child", pid + 2, sharded.queues[2:3], extra={"ppid": pid})
    heartbeat.beat(sharded.config.fleet, [master])
    heartbeat.beat(sharded.shard(sharded.queues[0]), [one])
    heartbeat.beat(sharded.shard(sharded.queues[1]), [busy])
    heartbeat.beat(sharded.shard(sharded.queues[2]), [two])
    for q in sharded.queues[:3]:
        sharded.shard(q).note_shard()
    return master, one, two


def test_processes_merge_the_fleet_and_every_shard(sharded: Sharded) -> None:
    _records(sharded)
    found = api.processes()
    assert [(p.identity, p.kind) for p in found] == [("m-1", "master"), ("c-1", "child"), ("c-2", "child")]
    assert found[1].running is not None and found[1].running.jid == "j-running" and found[1].busy == 1
    assert api.stats().processes == 3 and api.stats().busy == 1
    assert api.quiet_process("m-1") and not api.quiet_process("c-1")  # masters take requests in the fleet


def _cli(sharded: Sharded, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(TESTS), "COGWORKER_CLUSTER_LAYOUT": "queue"}
    env.pop("COGWORKER_REDIS_URL", None)
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args, "--redis-url", sharded.url, "--namespace", sharded.namespace],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=str(TESTS),
    )


def _json(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_cli_web_and_metrics_over_shards(sharded: Sharded) -> None:
    for i, q in enumerate(sharded.queues):
        sharded.push(q, entry("apps.jobs.add", [i], queue=q))
        sharded.file(q, "dead", failed("apps.jobs.charge", [i], queue=q), time.time() - 100 + i)
        sharded.shard(q).redis().incrby(sharded.shard(q).keys.limits_over, 2)
    _records(sharded)
    stats = _json(_cli(sharded, "stats", "--json"))
    assert stats["stats"]["dead_size"] == 6 and stats["stats"]["enqueued"] == 6
    assert sorted(q["name"] for q in stats["queues"]) == sorted(sharded.queues)
    rows = {r["name"]: r for r in _json(_cli(sharded, "queues", "--json"))["queues"]}
    assert set(rows) == set(sharded.queues) and all(r["size"] == 1 for r in rows.values())
    dead = _json(_cli(sharded, "jobs", "dead", "--limit", "4", "--json"))
    assert dead["size"] == 6 and [j["args"] for j in dead["jobs"]] == [[5], [4], [3], [2]]
    procs = _json(_cli(sharded, "processes", "--json"))["processes"]
    assert [p["identity"] for p in procs] == ["m-1", "c-1", "c-2"]
    health = _json(_cli(sharded, "health", "--json"))
    assert health["healthy"] is True, health
    _web_page_shows(sharded)
    sample = sample_redis(sharded.config, sharded.queues[:4])
    assert {q: n for q, (n, _) in sample.queues.items()} == dict.fromkeys(sharded.queues[:4], 1)
    assert sample.dead == 6 and sample.limit_deferrals == 12 and api.deferrals() == 12


def _web_page_shows(sharded: Sharded) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from cogworker.web import create_app

    with TestClient(create_app(config=sharded.config), base_url="http://localhost") as client:
        page = client.get("/queues")
        assert page.status_code == 200 and all(q in page.text for q in sharded.queues)
        dead = client.get("/dead")
        assert dead.status_code == 200 and "6" in dead.text and "apps.jobs.charge" in dead.text
        assert client.get(f"/queues/{sharded.queues[5]}").status_code == 200
        assert client.get("/").status_code == 200


def test_unsettled_limiters_batches_and_history_over_shards(sharded: Sharded) -> None:
    a, b = sharded.shard(sharded.queues[0]), sharded.shard(sharded.queues[3])
    now = time.time()
    for part, n in ((a, 2), (b, 3)):
        part.note_shard()
        for i in range(n):
            record = {"set": "dead", "score": now, "payload": failed("apps.jobs.charge", [i], queue=part.shard_name)}
            part.redis().rpush(part.keys.unsettled, json.dumps(record))
        part.redis().zadd(part.keys.limits, {"api": now - n, f"own-{n}": now - 10 * n})
        part.redis().hset(part.keys.limit_keys("api")[0], mapping={"kind": "concurrency", "n": 5, "over": n})
        part.redis().hset(part.keys.limit_keys(f"own-{n}")[0], mapping={"kind": "concurrency", "n": 1})
        for i in range(n):
            bid = f"b{n}-{i}"
            part.redis().zadd(part.keys.batches, {bid: now - 100 + 10 * i + n})
            part.redis().hset(part.keys.batch(bid), mapping={"total": 1, "pending": 1, "created_at": now})
            part.redis().hset(part.keys.batch_jobs(bid), f"j-{bid}", "pending")
        attempt = {"attempt": 1, "ended_at": now, "outcome": "failed"}
        part.redis().rpush(part.keys.history(f"h-{n}"), json.dumps(attempt))
    whole = api.unsettled()
    assert len(whole) == 5 and api.unsettled(0, 2) + api.unsettled(2, 3) == whole
    rows = {info.name: info for info in api.limiters()}
    assert set(rows) == {"api", "own-2", "own-3"} and rows["api"].over == 5
    assert [info.bid for info in api.batches()] == ["b3-2", "b3-1", "b2-1", "b3-0", "b2-0"]
    assert [info.bid for info in api.batches(limit=2, offset=1)] == ["b3-1", "b2-1"]
    assert api.batch_count() == 5 and api.batch("b3-1") is not None
    assert api.batch_jobs("b3-1") == [("j-b3-1", "pending")]
    assert [h.outcome for h in api.history("h-3")] == ["failed"] and api.history("nobody") == []
