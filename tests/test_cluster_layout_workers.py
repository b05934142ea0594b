"""The queue layout on Redis Cluster, the workers' side (docs/architecture.md#cluster-layout):
a prefork master whose queues are in several shards (slots on different masters) gives
each shard children of its own; a killed child's job runs again from its shard; a dead
host's jobs are recovered once in each shard; the single-process runner works one shard;
the bad settings are one line. Against a real cluster (3 masters, 3 replicas)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cluster_util import cluster, cluster_ns  # noqa: F401 (fixtures)
from prefork_harness import TESTS, Master, wait_for
from sentinel_util import finish, runs

import cogworker
from cogworker.core.payload import new_jid
from cogworker.testing.cluster import key_slot

QUEUES = ["q1", "q2", "q3", "q4", "q5", "q6"]
LAYOUT = {"COGWORKER_CLUSTER_LAYOUT": "queue"}


@pytest.fixture
def sharded(cluster, cluster_ns):  # noqa: F811
    cluster.wait_ok()
    cogworker.config._config = None
    yield cogworker.configure(redis_url=cluster.url, namespace=cluster_ns, socket_timeout=2.0, cluster_layout="queue")
    cogworker.config._config = None


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "runs.log"
    os.environ["COGWORKER_TEST_LOG"] = str(path)
    yield path
    os.environ.pop("COGWORKER_TEST_LOG", None)


def push(config, queue, tag, seconds=0.0):
    """A job of ``apps.cluster_app.logged``, written where the queue layout puts it."""
    shard = config.shard(queue)
    payload = {
        "class": "apps.sentinel_app.logged",
        "args": [tag, seconds],
        "kwargs": {},
        "jid": new_jid(),
        "queue": queue,
        "retry": 0,
        "created_at": time.time(),
        "enqueued_at": time.time(),
    }
    shard.redis().lpush(shard.keys.queue(queue), json.dumps(payload))
    shard.redis().xadd(shard.keys.wake, {"w": 1})


def start(cluster, config, log, procs, queues, env=None):  # noqa: F811
    args = ["--namespace", config.namespace]
    for queue in queues:
        args += ["-q", queue]
    return Master(
        cluster.url,
        module="apps.cluster_app",
        procs=procs,
        args=args,
        env={"COGWORKER_TEST_LOG": str(log), **LAYOUT, **(env or {})},
    )


def test_each_shard_is_a_slot_of_its_own_and_a_master_works_them_all(cluster, sharded, log):  # noqa: F811
    slots = {q: key_slot(sharded.shard(q).keys.queue(q)) for q in QUEUES}
    assert len(set(slots.values())) == len(QUEUES)
    # Every key of a shard in its slot; the fleet's own keys in the fleet's.
    shard = sharded.shard("q1")
    assert {
        key_slot(k)
        for k in (
            shard.keys.queue("q1"),
            shard.keys.in_progress("x"),
            shard.keys.fenced("x"),
            shard.keys.last_beat,
            shard.keys.dead,
            shard.keys.schedule,
            shard.keys.wake,
            shard.keys.paused,
        )
    } == {slots["q1"]}
    assert key_slot(sharded.keys.shards) == key_slot(sharded.keys.periodic_schedule) != slots["q1"]
    # A shard's config with shorter timeouts (a master's, a scraper's) is still that shard's.
    quick = shard.with_timeouts(0.5)
    assert quick.keys.namespace == shard.keys.namespace and quick.fleet.keys.namespace == sharded.keys.namespace
    assert quick.socket_timeout == 0.5 and quick.shard("q2").keys.queue("q2") == sharded.shard("q2").keys.queue("q2")
    owners = {cluster.owner_of_slot(slot).port for slot in slots.values()}
    assert len(owners) >= 2, "the six queues' slots should spread over the masters"
    master = start(cluster, sharded, log, procs=6, queues=QUEUES)
    try:
        master.wait_children(6, timeout=60)
        for i in range(60):
            push(sharded, QUEUES[i % 6], f"j{i}")
        wait_for(lambda: sum(runs(log)[1].values()) == 60, 60, 0.1, "every job of every shard ran")
        started, ended = runs(log)
        assert set(started.values()) == {1} and set(ended.values()) == {1}
        shards = {s.shard_name for s in sharded.shards()}
        assert set(QUEUES) <= shards
        # Each child's records (and list) live in its shard: one child per shard here.
        for q in QUEUES:
            members = sharded.shard(q).redis().smembers(sharded.shard(q).keys.in_progress_identities)
            assert len(members) == 1, (q, members)
    finally:
        out = finish(master)
    assert "CROSSSLOT" not in out and "Traceback" not in out, out[-3000:]


def test_a_killed_childs_job_runs_again_in_its_shard(cluster, sharded, log):  # noqa: F811
    master = start(cluster, sharded, log, procs=2, queues=["q1", "q2"])
    try:
        master.wait_children(2, timeout=60)
        push(sharded, "q2", "victim", 2.0)
        wait_for(lambda: runs(log)[0]["victim"] == 1, 30, 0.05, "the job started")
        for pid in master.child_pids():
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: runs(log)[1]["victim"] == 1, 60, 0.1, "the job ran again, to its end")
        assert runs(log)[0]["victim"] == 2
        # Acked after its end (the body logs its end before the ack, which rides on the
        # child's next fetch): the counter goes with the ack.
        shard = sharded.shard("q2")
        wait_for(lambda: shard.redis().keys(shard.keys.orphanings_prefix + "*") == [], 10, 0.05, "the counter acked")
    finally:
        finish(master)


def test_a_dead_hosts_jobs_are_recovered_once_in_each_shard(cluster, sharded, log):  # noqa: F811
    first = start(cluster, sharded, log, procs=2, queues=["q3", "q4"])
    try:
        first.wait_children(2, timeout=60)
        push(sharded, "q3", "orphan3", 1.0)
        push(sharded, "q4", "orphan4", 1.0)
        wait_for(lambda: runs(log)[0]["orphan3"] == 1 and runs(log)[0]["orphan4"] == 1, 30, 0.05, "both started")
        first.signal_group(signal.SIGKILL)  # the whole host: master and children
        second = start(cluster, sharded, log, procs=2, queues=["q3", "q4"])
        try:
            wait_for(
                lambda: runs(log)[1]["orphan3"] == 1 and runs(log)[1]["orphan4"] == 1,
                60,
                0.2,
                "both orphans recovered and run",
            )
            started, _ = runs(log)
            assert started["orphan3"] == 2 and started["orphan4"] == 2
            for q in ("q3", "q4"):
                shard = sharded.shard(q)
                assert cluster_scan(cluster, shard.keys.fenced_prefix + "*"), q  # the dead child fenced there
        finally:
            finish(second)
    finally:
        first.stop()


def cluster_scan(cluster, pattern):  # noqa: F811
    """Keys matching ``pattern`` on any master (SCAN runs per node)."""
    import redis

    found = []
    for node in cluster.masters():
        found += list(redis.Redis(port=node.port).scan_iter(match=pattern, count=1000))
    return found


def test_fewer_children_than_shards_and_a_runner_of_two_shards_are_one_line(cluster, sharded, log):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": str(TESTS), **LAYOUT, "COGWORKER_TEST_LOG": str(log)}
    base = ["--redis-url", cluster.url, "--namespace", sharded.namespace, "-q", "q1", "-q", "q2"]
    done = subprocess.run(
        [sys.executable, "-m", "cogworker.prefork.cli", "--procs", "1", *base, "apps.cluster_app"],
        env=env,
        cwd=str(TESTS),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "each shard needs a child of its own" in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0 or "Traceback" not in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "cogworker.worker", *base, "apps.cluster_app"],
        env=env,
        cwd=str(TESTS),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "one worker works one shard" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_runner_works_its_one_shard(cluster, sharded, log):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": str(TESTS), **LAYOUT, "COGWORKER_TEST_LOG": str(log)}
    push(sharded, "q5", "solo")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cogworker.worker",
            "--redis-url",
            cluster.url,
            "--namespace",
            sharded.namespace,
            "-q",
            "q5",
            "apps.cluster_app",
        ],
        env=env,
        cwd=str(TESTS),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: runs(log)[1]["solo"] == 1, 60, 0.1, "the runner ran its shard's job")
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, out
    shard = sharded.shard("q5")
    assert shard.redis().llen(shard.keys.queue("q5")) == 0


@pytest.mark.parametrize(
    "env, said",
    [
        ({"COGWORKER_CLUSTER_LAYOUT": "queues"}, "cluster_layout must be 'namespace' or 'queue', got 'queues'"),
        ({**LAYOUT, "COGWORKER_CLUSTER_SHARDS": "a,b;b,c"}, "cluster_shards: queue 'b' is in two groups"),
        ({**LAYOUT, "COGWORKER_CLUSTER_SHARDS": "a,b\u200b"}, "cluster_shards"),
    ],
)
def test_bad_layout_settings_are_one_line(cluster, sharded, env, said):  # noqa: F811
    """A bad COGWORKER_CLUSTER_LAYOUT or COGWORKER_CLUSTER_SHARDS: the prefork master, the
    runner and the command each refuse it in one line, before anything runs."""
    full = {**os.environ, "PYTHONPATH": str(TESTS), **env}
    full.pop("COGWORKER_TEST_LOG", None)
    for cmd in (["cogworker.prefork.cli", "--procs", "1"], ["cogworker.worker"]):
        done = subprocess.run(
            [sys.executable, "-m", *cmd, "--redis-url", cluster.url, "apps.cluster_app"],
            env=full,
            cwd=str(TESTS),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    with pytest.raises(cogworker.ConfigurationError):
        cogworker.Config(redis_url=cluster.url, cluster_layout="sideways")
    with pytest.raises(cogworker.ConfigurationError):
        cogworker.Config(redis_url=cluster.url, cluster_shards=[["a"], ["a"]])


def test_a_registry_key_of_another_type_refuses_no_job_and_stops_no_worker(cluster, sharded, log, caplog):  # noqa: F811
    """The fleet's ``shards`` key holding a string (garbage): an enqueue still lands in its
    shard, a worker still starts and runs it, the faces still see the declared and known
    shards; each says so in one logged line."""
    from apps import cluster_app

    fleet = sharded.fleet
    fleet.redis().set(fleet.keys.shards, "garbage")
    jid = cluster_app.logged.options(queue="q6").enqueue("through")
    assert jid and sharded.shard("q6").redis().llen(sharded.shard("q6").keys.queue("q6")) == 1
    assert "q6" in [s.shard_name for s in sharded.shards()]  # known to this process
    assert "the shard registry" in caplog.text and "holds another type" in caplog.text
    master = start(cluster, sharded, log, procs=1, queues=["q6"])
    try:
        wait_for(lambda: runs(log)[1]["through"] == 1, 60, 0.1, "the job ran")
    finally:
        out = finish(master)
    assert "holds another type" in out and "Traceback" not in out, out[-3000:]
    assert fleet.redis().get(fleet.keys.shards) == b"garbage"  # a bad key is reported, not overwritten


def test_a_stalled_shard_master_stalls_only_its_shard_and_loses_nothing(cluster, sharded, log):  # noqa: F811
    """One shard's master SIGSTOPped (0.6 s, three times: under the node timeout, so a stall,
    not a failover) while a master of two children works two shards on different masters:
    the other shard's jobs go on meanwhile, and every job of both runs exactly once."""
    from apps import cluster_app

    owners = {q: cluster.owner(sharded.shard(q).keys.queue(q)) for q in QUEUES}
    stalled = QUEUES[0]
    other = next(q for q in QUEUES if owners[q].port != owners[stalled].port)
    master = start(cluster, sharded, log, procs=2, queues=[stalled, other])
    tags = {q: [f"{q}-{i}" for i in range(150)] for q in (stalled, other)}
    try:
        master.wait_children(2, timeout=60)
        for q in (stalled, other):
            cluster_app.logged.options(queue=q).enqueue_many([(t, 0.005) for t in tags[q]])
        progress = []
        for _ in range(3):
            before = sum(runs(log)[1][t] for t in tags[other])
            cluster.pause(owners[stalled].port)
            try:
                time.sleep(0.6)
                progress.append(sum(runs(log)[1][t] for t in tags[other]) - before)
            finally:
                cluster.resume(owners[stalled].port)
            time.sleep(0.3)
        wait_for(lambda: all(runs(log)[1][t] == 1 for q in tags for t in tags[q]), 90, 0.1, "every job ran")
    finally:
        out = finish(master)
    started, ended = runs(log)
    every = [t for q in tags for t in tags[q]]
    assert all(started[t] == 1 and ended[t] == 1 for t in every), out[-3000:]
    assert any(done > 0 for done in progress), progress  # the other shard worked while this one was stalled
