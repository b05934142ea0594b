"""What a Redis Cluster failover may lose, scaled down (``python -m bench.failover --target
cluster [--layout queue]`` is the 10-kill measurement; docs/operations/failover.md, "What a failover loses"): a
cluster of our own (3 masters, 3 replicas, cluster-node-timeout 1000 ms), a
``cogworker-prefork`` worker and a producer thread under load, both with
``wait_replicas=1``, every acknowledged enqueue and every job's start and end logged
outside Redis; in the namespace layout and in the queue layout. The master serving the
namespace's slot (in the queue layout: the job queue's shard's, ``{cogworker:default}``) is
SIGKILLed twice, each time right after its replica was SIGSTOPped with 100 KB jobs in
flight (the nemesis that loses acknowledged enqueues without ``wait_replicas``: the
replica's socket buffers fill and the rest of the stream dies with the master); the
replica takes over, the killed node comes back as its replica; then another master is
killed (the whole cluster answers CLUSTERDOWN until its replica takes over). The promises: no
acknowledged enqueue lost, no job run twice at once, and the same worker rides the three
failovers out and goes on working."""

from __future__ import annotations

import time

import pytest

import cogworker
from bench import failover
from cogworker.testing.cluster import cluster_support

pytestmark = pytest.mark.skipif(cluster_support() is not None, reason=str(cluster_support()))

KILLS = 2


def _waited(done, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _started(run: failover.Run, tag: str) -> bool:
    return any(line.split()[:2] == ["start", tag] for line in run.log.read_text().splitlines())


@pytest.mark.parametrize("layout", ["namespace", "queue"])
def test_wait_replicas_loses_nothing_acknowledged_through_cluster_failovers(layout):
    from bench.apps import failover_app

    run = failover.start_run("cluster", wait=1, procs=2, job_seconds=0.002, layout=layout)
    try:
        run.worker.wait_ready()
        if layout == "queue":  # the master killed is the job queue's shard's, not the fleet's slot's
            assert run.target.locate == cogworker.get_config().shard("default").keys.queue("default")
        producer = failover.start_producer(run, rate=200, payload_kb=100)
        for _ in range(KILLS):
            time.sleep(1.0)
            before = len(run.acked)
            failover.one_kill(run, pause=0.3, link_break=0)
            assert run.worker.alive(), run.worker.output()[-4000:]
            # The load goes on across the kill: with wait_replicas=1 nothing is acknowledged from
            # the replica's pause until the killed node is back as the new master's replica, which
            # one_kill returns on; the next acknowledgement may come a moment after.
            assert _waited(lambda before=before: len(run.acked) > before, 15), run.refused
        # Another master dies: with cluster-require-full-coverage the namespace's master
        # answers CLUSTERDOWN until that one's replica takes over, an outage to ride out too.
        run.target.victim = "other"
        before = len(run.acked)
        failover.one_kill(run, pause=0, link_break=0)
        assert run.worker.alive(), run.worker.output()[-4000:]
        assert _waited(lambda: len(run.acked) > before, 15), run.refused
        run.stop.set()
        producer.join(30)
        assert failover.drained_within(time.monotonic() + 60), run.worker.output()[-4000:]
        # The same worker goes on: a job enqueued after both failovers runs.
        jid = failover_app.work.enqueue("after-the-failovers")
        assert jid
        deadline = time.monotonic() + 30
        while not _started(run, "after-the-failovers") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _started(run, "after-the-failovers"), run.worker.output()[-4000:]
        assert run.worker.alive()
        figures = failover.analyse(run.acked, run.log, run.kills)
    finally:
        run.stop.set()
        run.worker.stop()
        run.target.cleanup()
    assert len(run.kills) == KILLS + 1 and all(seconds < 30 for seconds in run.failovers)
    assert figures["acknowledged"] > 0 and any(at > run.kills[-1] for _, at in run.acked)
    assert figures["lost"] == 0, figures
    assert figures["twice_at_once"] == 0, figures
