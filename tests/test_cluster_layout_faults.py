"""The queue layout on Redis Cluster under faults (docs/architecture.md#cluster-layout):
the job queue's shard's slot (``{<ns>:default}``, a slot of its own, not the fleet's)
migrated key by key (ASK, TRYAGAIN meanwhile) then handed over (MOVED) to another master
while a prefork worker in the queue layout works it and the client enqueues: every job
runs exactly once, and the fleet's slot stays where it was. (The shard's master killed
under load: tests/test_cluster_failover.py, over both layouts.) Against a real cluster
(3 masters, 3 replicas), scaled down from tests/test_cluster.py's namespace-layout move."""

from __future__ import annotations

import os
import sys
import time

import pytest
from apps import sentinel_app
from cluster_util import cluster, cluster_ns  # noqa: F401 (fixtures)
from prefork_harness import Master, wait_for
from sentinel_util import finish, runs, try_enqueue

import cogworker
from cogworker.testing.cluster import key_slot

LAYOUT = {"COGWORKER_CLUSTER_LAYOUT": "queue"}


@pytest.fixture
def sharded(cluster, cluster_ns):  # noqa: F811
    cluster.wait_ok()
    cogworker.config._config = None
    yield cogworker.configure(redis_url=cluster.url, namespace=cluster_ns, socket_timeout=2.0,
                              cluster_layout="queue")
    cogworker.config._config = None


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "runs.log"
    os.environ["COGWORKER_TEST_LOG"] = str(path)
    yield path
    os.environ.pop("COGWORKER_TEST_LOG", None)


def test_the_shards_slot_moves_under_a_running_worker_nothing_lost_nothing_twice(cluster, sharded, log):  # noqa: F811
    shard = sharded.shard("default")
    slot, fleet_slot = key_slot(shard.keys.queue("default")), key_slot(sharded.keys.shards)
    assert slot != fleet_slot and shard.keys.namespace != sharded.keys.namespace
    fleet_owner = cluster.owner_of_slot(fleet_slot).node_id
    master = Master(cluster.url, module="apps.cluster_app", procs=2,
                    args=["--namespace", sharded.namespace, "-q", "default"],
                    env={"COGWORKER_TEST_LOG": str(log), **LAYOUT})
    tags = [f"m{i}" for i in range(200)]
    try:
        master.wait_children(2, timeout=60)
        for tag in tags[:100]:
            sentinel_app.logged.enqueue(tag, 0.02)
        assert shard.redis().llen(shard.keys.queue("default")) > 0  # in the shard's keys, not the fleet's
        wait_for(lambda: sum(runs(log)[1].values()) >= 20, 30, 0.05, "some jobs ran")
        source = cluster.owner_of_slot(slot)
        target = next(node for node in cluster.masters() if node.node_id != source.node_id)
        cluster.move_slot(slot, target, batch=5)
        moved_at = time.time()
        for tag in tags[100:]:
            wait_for(lambda tag=tag: try_enqueue(tag, 0.02), 30, 0.05, "an enqueue after the move")
        wait_for(lambda: len(runs(log)[1]) == len(tags), 60, 0.2, "every job ran")
        assert cluster.owner_of_slot(slot).node_id == target.node_id
        assert cluster.owner_of_slot(fleet_slot).node_id == fleet_owner  # the fleet's slot did not move
        assert master.alive()
    finally:
        output = finish(master)
    sys.stderr.write("".join(line + "\n" for line in output.splitlines() if "Redis" in line))  # the outages, if any
    started, ended = runs(log)
    assert set(ended) == set(tags) and max(ended.values()) == 1 and max(started.values()) == 1, output[-3000:]
    ends = [float(line.split()[3]) for line in log.read_text().splitlines() if line.startswith("end m")]
    assert sum(1 for at in ends if at < moved_at) < 100 < len(ends)  # jobs enqueued before ran after the move
