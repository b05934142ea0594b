"""Redis Cluster (docs/architecture.md#cluster): every face of cogworker against a
redis:// URL naming one node of a real cluster on loopback (3 masters, 3 replicas, one
cluster for the session), with a ``{cw-...}`` namespace of the test's own: the worker,
a prefork master and children, the client (sync and async), the API, the CLI, the web UI
over HTTP, /metrics, the features (retries, scheduled jobs, the dead set, unique jobs,
pause), a killed child's and a dead host's jobs, cron with two masters, wait_replicas,
and the namespace's slot moved to another master under a running worker; the prefork
tests run in both key layouts (``layout_config``: the namespace in one slot, then each queue
a shard of its own, docs/architecture.md#cluster-layout)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from apps import sentinel_app
from cluster_util import cluster, cluster_config, cluster_ns, layout_config  # noqa: F401 (fixtures)
from prefork_harness import TESTS, Master, wait_for
from redis_server import free_port
from sentinel_util import enqueue_async, finish, runs, scraped, try_enqueue

import cogworker
from cogworker import api
from cogworker.store import cluster as cluster_mode
from cogworker.store import errors as redis_errors
from cogworker.testing.cluster import key_slot


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "runs.log"
    os.environ["COGWORKER_TEST_LOG"] = str(path)  # the enqueueing side's registry: nothing runs here
    yield path
    os.environ.pop("COGWORKER_TEST_LOG", None)


def start(cluster, config, log, procs=1, args=()):  # noqa: F811
    return Master(
        cluster.url,
        module="apps.cluster_app",
        procs=procs,
        args=["--namespace", config.namespace, *args],
        env={"COGWORKER_TEST_LOG": str(log), "COGWORKER_CLUSTER_LAYOUT": config.cluster_layout},
    )


def test_cluster_mode_is_detected_and_the_namespace_is_one_hash_tag(cluster, cluster_config, caplog):  # noqa: F811
    assert cluster_config.cluster and cluster_config.keys.namespace == cluster_config.namespace
    cogworker.config._config = None
    with caplog.at_level(logging.WARNING, logger="cogworker"):
        config = cogworker.configure(redis_url=cluster.url, namespace="plain-ns")
        assert config.keys.namespace == "{plain-ns}" and config.keys.namespace == "{plain-ns}"
    assert caplog.text.count("is used as '{plain-ns}'") == 1
    slots = {
        key_slot(key)
        for key in (
            config.keys.queue("a"),
            config.keys.dead,
            config.keys.last_beat,
            config.keys.fenced_prefix + "x",
            config.keys.paused,
        )
    }
    assert slots == {key_slot("{plain-ns}")}
    # An answer kept from another server that had this address (a free port coming back, in
    # tests): configure() asks again (a stale "plain" made every command a MOVED forever).
    cluster_mode._detected[cluster.url] = False
    assert cogworker.configure(redis_url=cluster.url, namespace="plain-ns").cluster
    # Said explicitly: no question asked, and off means off.
    assert not cogworker.Config(redis_url=cluster.url, namespace="n", redis_cluster=False).cluster
    assert cogworker.Config(redis_url="redis://127.0.0.1:1/0", redis_cluster=True).keys.namespace == "{cogworker}"
    with pytest.raises(cogworker.ConfigurationError) as caught:
        os.environ["COGWORKER_REDIS_CLUSTER"] = "maybe"
        try:
            cogworker.Config()
        finally:
            del os.environ["COGWORKER_REDIS_CLUSTER"]
    assert "COGWORKER_REDIS_CLUSTER must be 1, 0 or auto" in str(caught.value)


def test_every_face_works_on_the_cluster(cluster, layout_config, log):  # noqa: F811
    from apps import cluster_app

    url, ns = cluster.url, layout_config.namespace
    default = layout_config.shard("default")  # the namespace's config itself, outside the queue layout
    sentinel_app.logged.enqueue("sync")
    asyncio.run(enqueue_async("async"))
    cluster_app.logged.enqueue_many([("bulk-1",), ("bulk-2",)])
    cluster_app.blob.enqueue("big", "x" * 200_000)
    owner = cluster.owner(default.keys.queue("default"))
    assert owner.server.client().llen(default.keys.queue("default")) == 5  # on the slot's master
    assert api.stats().enqueued == 5 and any(q.name == "default" for q in api.queues())
    port = free_port()
    master = start(cluster, layout_config, log, procs=2, args=["--metrics-port", str(port)])
    try:
        wait_for(
            lambda: all(runs(log)[1][tag] == 1 for tag in ("sync", "async", "bulk-1", "bulk-2", "big:200000")),
            60,
            0.05,
            "every job ran",
        )
        wait_for(
            lambda: any(name == "cogworker_jobs_total" for name, _ in scraped(port) or {}),
            60,
            0.2,
            "/metrics counting the jobs",
        )
        # Results, a chord (a group's callback) and the blocking waits for them (BLPOP).
        assert cogworker.result(cluster_app.add.enqueue(2, 3), timeout=30) == 5
        chord = cogworker.chord([cluster_app.add.s(i, i) for i in range(3)], cluster_app.total.s()).enqueue()
        assert cogworker.result(chord, timeout=30) == 6
        _cli_and_web_work(url, ns, layout_config.cluster_layout)
    finally:
        output = finish(master)
    assert "Traceback" not in output, output[-3000:]
    sentinel_app.logged.enqueue("runner")
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cogworker.worker",
            "apps.cluster_app",
            "--redis-url",
            url,
            "--namespace",
            ns,
            "-q",
            "default",
        ],
        cwd=str(TESTS),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(TESTS), "COGWORKER_CLUSTER_LAYOUT": layout_config.cluster_layout},
    )
    try:
        wait_for(lambda: runs(log)[1]["runner"] == 1, 60, 0.05, "the runner ran its job")
    finally:
        runner.terminate()
        runner.communicate(timeout=40)
    _keys_where_the_layout_puts_them(cluster, layout_config, owner)


def _keys_where_the_layout_puts_them(cluster, config, owner):  # noqa: F811
    """The namespace layout: every key of the namespace on the one master serving its slot.
    The queue layout: each shard's keys in its own slot (the default queue's on ``owner``),
    and the fleet's own keys (the shard registry, the counters) in the namespace's."""
    ns = config.keys.namespace
    if config.cluster_layout == "namespace":
        found = [key for node in cluster.masters() for key in node.server.client().scan_iter(match=f"{ns}:*")]
        assert found and all(key_slot(key) == key_slot(ns) for key in found)
        assert all(
            node.node_id == owner.node_id
            for node in cluster.masters()
            if any(True for _ in node.server.client().scan_iter(match=f"{ns}:*"))
        )
        return
    default = config.shard("default").keys.namespace
    found = [key for key in owner.server.client().scan_iter(match=f"{default}:*")]
    assert len(found) > 3 and all(key_slot(key) == key_slot(default) for key in found)
    fleet = [key for node in cluster.masters() for key in node.server.client().scan_iter(match=f"{ns}:*")]
    assert config.keys.shards.encode() in fleet and all(key_slot(key) == key_slot(ns) for key in fleet)
    assert not any(b":queue:" in key or b":in_progress" in key for key in fleet), fleet


def _cli_and_web_work(url, ns, layout="namespace"):
    env = {**os.environ, "PYTHONPATH": str(TESTS), "COGWORKER_CLUSTER_LAYOUT": layout}
    env.pop("COGWORKER_REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "cogworker", "stats", "--redis-url", url, "--namespace", ns],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=str(TESTS),
    )
    assert result.returncode == 0 and "default" in result.stdout, result.stdout + result.stderr
    health = subprocess.run(
        [sys.executable, "-m", "cogworker", "health", "--redis-url", url, "--namespace", ns],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=str(TESTS),
    )
    assert health.returncode == 0, health.stdout + health.stderr
    pytest.importorskip("starlette")
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "cogworker", "web", "--port", str(port), "--redis-url", url, "--namespace", ns],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page = wait_for(lambda: _get(f"http://127.0.0.1:{port}/"), 30, 0.1, "the web UI answering")
        assert "default" in page
    finally:
        web.terminate()
        web.wait(10)


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode() if response.status == 200 else None
    except OSError:
        return None


def test_retries_scheduled_dead_unique_and_pause(cluster, layout_config, log):  # noqa: F811
    from apps import cluster_app

    cluster_app.flaky.enqueue("flaky")
    cluster_app.doomed.enqueue("doomed")
    assert cluster_app.once.enqueue("once") and cluster_app.once.enqueue("once") is None  # the lock holds
    cluster_app.logged.enqueue_in(1.0, "later")
    api.Queue("default").pause()
    master = start(cluster, layout_config, log, procs=2)  # default and slowq: two shards in the queue layout
    try:
        master.wait_children(2, timeout=60)
        time.sleep(1.5)
        assert not runs(log)[0], "a paused queue's jobs started"
        api.Queue("default").resume()
        wait_for(
            lambda: runs(log)[1]["flaky"] == 1 and runs(log)[1]["once"] == 1 and runs(log)[1]["later"] == 1,
            60,
            0.1,
            "the retried, unique and scheduled jobs",
        )
        wait_for(lambda: api.stats().dead_size == 1, 30, 0.1, "the doomed job in the dead set")
        started, _ = runs(log)
        assert started["flaky"] == 2 and started["once"] == 1 and started["doomed"] == 1
    finally:
        finish(master)


def _running_slow(cluster, config, log, tag, seconds):  # noqa: F811
    """A master of one child on queue slowq, returned once its ``sleepy(tag, seconds)`` started."""
    from apps import cluster_app

    master = start(cluster, config, log, args=["-q", "slowq"])
    try:
        master.wait_children(1, timeout=60)
        cluster_app.sleepy.enqueue(tag, seconds)
        wait_for(lambda: runs(log)[0][tag] == 1, 30, 0.05, "the job started")
    except BaseException:
        master.stop()
        raise
    return master


def test_a_killed_childs_job_runs_again(cluster, layout_config, log):  # noqa: F811
    master = _running_slow(cluster, layout_config, log, "victim", 3.0)
    try:
        for pid in master.child_pids():
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: runs(log)[1]["victim"] == 1, 60, 0.1, "the job ran again, to its end")
        assert runs(log)[0]["victim"] == 2
    finally:
        finish(master)


def test_a_dead_hosts_jobs_are_recovered_once(cluster, layout_config, log):  # noqa: F811
    first = _running_slow(cluster, layout_config, log, "orphan", 1.0)
    try:
        first.signal_group(signal.SIGKILL)  # the whole host: master and children
        second = start(cluster, layout_config, log, args=["-q", "slowq"])
        try:
            wait_for(lambda: runs(log)[1]["orphan"] == 1, 60, 0.2, "the orphan recovered and run")
            assert runs(log)[0]["orphan"] == 2
            shard = layout_config.shard("slowq")  # the namespace itself, outside the queue layout
            fenced = list(shard.redis().scan_iter(match=shard.keys.fenced_prefix + "*"))
            assert fenced  # the dead process is fenced
        finally:
            finish(second)
    finally:
        first.stop()


def test_cron_with_two_masters_fires_each_slot_once(cluster, layout_config):  # noqa: F811
    import json

    masters = [
        Master(
            cluster.url,
            module="apps.cron_mixed",
            procs=1,
            args=["--namespace", layout_config.namespace, "-q", "default"],
            env={"COGWORKER_CLUSTER_LAYOUT": layout_config.cluster_layout},
        )
        for _ in range(2)
    ]
    shard = layout_config.shard("cronq")  # where the slots' pushes land
    r, key = shard.redis(), shard.keys.queue("cronq")
    try:
        wait_for(lambda: r.llen(key) >= 8, 30, 0.2, "8 seconds of firings")
    except AssertionError:
        raise AssertionError("\n".join(master.output()[-3000:] for master in masters)) from None
    finally:
        for master in masters:
            master.stop()
    fired = sorted(
        json.loads(raw)["periodic_slot"]
        for raw in r.lrange(key, 0, -1)
        if json.loads(raw)["periodic_pjid"] == "healthy"
    )
    assert fired == list(range(fired[0], fired[-1] + 1)), fired


def test_wait_replicas_waits_on_the_writes_connection(cluster, cluster_ns):  # noqa: F811
    """WAIT counts the replicas that acknowledged its own connection's writes: ours follows
    the write on its connection, on the slot's master, so the replica holds the job when the
    enqueue returns, and a stopped replica is seen as one (NotReplicated)."""
    cogworker.config._config = None
    config = cogworker.configure(redis_url=cluster.url, namespace=cluster_ns, wait_replicas=1, wait_timeout=0.5)
    try:
        assert sentinel_app.logged.enqueue("replicated")
        owner = cluster.owner(config.keys.queue("default"))
        replica = cluster.replica_of(owner)
        reader = cogworker.store.Client(host="127.0.0.1", port=replica.port, single_connection_client=True)
        reader.execute_command("READONLY")  # this connection may read the replica's own copy
        assert reader.llen(config.keys.queue("default")) == 1  # the replica had it when enqueue returned
        cluster.pause(replica.port)
        try:
            with pytest.raises(cogworker.store.ConnectionError) as caught:
                sentinel_app.logged.enqueue("unreplicated")
            assert "0 of the 1 replica(s)" in str(caught.value) and redis_errors.is_outage(caught.value)
        finally:
            cluster.resume(replica.port)
            reader.close()
    finally:
        cogworker.config._config = None


def test_moved_ask_and_tryagain_are_outages(cluster):  # noqa: F811
    for reply in (
        "ASK 3999 127.0.0.1:6381",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
    ):
        assert redis_errors.classify(reply) == redis_errors.MOVING and redis_errors.is_outage(
            redis_errors.as_error(reply)
        )
    assert redis_errors.is_outage(cluster_mode.SlotMoved("moved"))
    # A client not in cluster mode (said so, or the cluster was away at its start) on a node
    # that doesn't serve the slot: MOVED, an outage whose line says what to set.
    owner = cluster.owner("{plain-client}")
    other = next(node for node in cluster.masters() if node.node_id != owner.node_id)
    config = cogworker.Config(
        redis_url=f"redis://127.0.0.1:{other.port}/0", namespace="{plain-client}", redis_cluster=False
    )
    with pytest.raises(cogworker.store.RedisError) as caught:
        config.redis().llen(config.keys.queue("default"))
    assert redis_errors.is_outage(caught.value) and "COGWORKER_REDIS_CLUSTER=1" in redis_errors.describe(caught.value)
    assert cluster_mode.tagged("a") == "{a}" and cluster_mode.tagged("x{a}") == "x{a}"
    assert cluster_mode.tagged("{}") == "{{}}" and not cluster_mode.has_tag("{}")


def test_the_slot_moves_under_a_running_worker_nothing_lost_nothing_twice(cluster, layout_config, log):  # noqa: F811
    """The job queue's slot (the namespace's; in the queue layout, its shard's, not the
    fleet's) migrated key by key (ASK, TRYAGAIN meanwhile) then handed over (MOVED) while 2
    children work and the client enqueues: every job runs exactly once."""
    master = start(cluster, layout_config, log, procs=2, args=["-q", "default"])
    tags = [f"m{i}" for i in range(300)]
    shard = layout_config.shard("default")
    slot, fleet_slot = key_slot(shard.keys.queue("default")), key_slot(layout_config.keys.shards)
    fleet_owner = cluster.owner_of_slot(fleet_slot).node_id
    try:
        master.wait_children(2, timeout=60)
        for tag in tags[:150]:
            sentinel_app.logged.enqueue(tag, 0.02)
        assert shard.redis().llen(shard.keys.queue("default")) > 0  # in the shard's keys (the namespace's)
        wait_for(lambda: sum(runs(log)[1].values()) >= 20, 30, 0.05, "some jobs ran")
        source = cluster.owner_of_slot(slot)
        target = next(node for node in cluster.masters() if node.node_id != source.node_id)
        cluster.move_slot(slot, target, chunk=5)
        moved_at = time.time()
        for tag in tags[150:]:
            wait_for(lambda tag=tag: try_enqueue(tag, 0.02), 30, 0.05, "an enqueue after the move")
        wait_for(lambda: len(runs(log)[1]) == len(tags), 90, 0.2, "every job ran")
        assert cluster.owner_of_slot(slot).node_id == target.node_id
        assert slot == fleet_slot or cluster.owner_of_slot(fleet_slot).node_id == fleet_owner  # the fleet's stays
    finally:
        output = finish(master)
    sys.stderr.write("".join(line + "\n" for line in output.splitlines() if "Redis" in line))  # the outages, if any
    started, ended = runs(log)
    assert set(ended) == set(tags) and max(ended.values()) == 1 and max(started.values()) == 1, output[-3000:]
    ends = [float(line.split()[3]) for line in log.read_text().splitlines() if line.startswith("end m")]
    assert sum(1 for at in ends if at < moved_at) < 150 < len(ends)  # jobs enqueued before ran after the move


def test_a_failover_of_the_namespaces_master_is_ridden_out(cluster, cluster_config, log):  # noqa: F811
    """The namespace's master SIGKILLed while 2 children work through a backlog: its replica
    takes over, the worker rides the outage out, every job the replica held runs to its
    end (one running at the kill may run again), and enqueues after it run too."""
    master = start(cluster, cluster_config, log, procs=2)
    backlog = [f"in-flight-{i}" for i in range(40)]
    try:
        master.wait_children(2, timeout=60)
        for tag in backlog:
            sentinel_app.logged.enqueue(tag, 0.1)
        owner = cluster.owner(cluster_config.keys.namespace)
        direct = owner.server.client()
        direct.set(cluster_config.keys.namespace + ":probe", 1)  # WAIT counts up to this connection's write,
        assert direct.execute_command("WAIT", 1, 5000) == 1  # so every enqueue above is on the replica now
        wait_for(lambda: sum(runs(log)[1].values()) >= 5, 60, 0.05, "some of the backlog ran")
        killed = cluster.kill(owner.port)
        cluster.wait_failover(owner)
        tags = [f"after-{i}" for i in range(5)]
        for tag in tags:
            wait_for(lambda tag=tag: try_enqueue(tag, 0.02), 30, 0.1, "an enqueue after the failover")
        wait_for(
            lambda: all(runs(log)[1][t] >= 1 for t in backlog + tags),
            90,
            0.1,
            "the worker followed the new master and ran everything",
        )
        assert master.alive()
        cluster.rejoin(killed)
    finally:
        output = finish(master)
    assert "Traceback" not in output, output[-3000:]
    started, _ = runs(log)
    again = sum(started[t] - 1 for t in backlog)
    sys.stderr.write(f"run again after the failover: {again} of {len(backlog)}\n")
    # Replication is asynchronous: at most what each child was running, or had just acked, at the kill.
    assert again <= 4, started
