"""bench/cluster.py's queue-layout row: the fill, the pause, the resume and the busy check,
each on the queue's own shard (``cfg.shard(q)``: ``{cogworker:q3}``, a slot of its own).

The client's enqueue and ``api.Queue(q).pause()`` do not route to shards yet, so these write
with the shard's keys directly: the same writes as ``enqueue_many`` (the queued statuses'
bucket, one LPUSH per 500 payloads built by ``BoundJob.payload``, the known queues, the
wake) and as ``api.Queue`` (SADD/SREM ``paused``, the wake on resume), each on the client
of the master serving the shard's slot.
"""

from __future__ import annotations

import time
from typing import Any

CHUNK = 500  # payloads per LPUSH, as the other rows' fill


def shards(url: str, namespace: str, queues: list[str]) -> list[tuple[str, Any]]:
    """``(queue, its shard's Config)`` for each queue, the fleet in the queue layout."""
    import cogworker
    cogworker.config._config = None
    fleet = cogworker.configure(redis_url=url, namespace=namespace, cluster_layout="queue")
    if not fleet.sharded:
        raise RuntimeError(f"{url}: not a cluster, the queue layout is off")
    return [(queue, fleet.shard(queue)) for queue in queues]


def fill(url: str, namespace: str, queues: list[str], jobs: int) -> None:
    """Each queue paused (its shard's ``paused``) and filled with ``jobs`` no-op jobs."""
    from bench.apps import failover_app
    from cogworker import store
    from cogworker.client import enqueue
    from cogworker.client import status as status_enqueue
    from cogworker.core.payload import dumps
    for queue, shard in shards(url, namespace, queues):
        client, keys = shard.redis(), shard.keys
        client.sadd(keys.paused, queue)
        bound = failover_app.noop.options(queue=queue)
        for start in range(0, jobs, CHUNK):
            now = time.time()
            payloads = [bound.payload((i,), {}, now) for i in range(start, min(jobs, start + CHUNK))]
            pipe = store.pipeline(client)
            if status_enqueue.writes_enqueue(shard, payloads[0]):
                enqueue.hset(pipe, status_enqueue.enqueue_bucket(shard, payloads, now))
            pipe.lpush(keys.queue(queue), *[dumps(p) for p in payloads])
            pipe.sadd(keys.queues, queue)
            pipe.xadd(keys.wake, {"w": 1}, maxlen=100, approximate=True)
            pipe.execute()


def resume(found: list[tuple[str, Any]]) -> None:
    """Each queue resumed on its shard, and the shard's idle workers woken."""
    for queue, shard in found:
        client = shard.redis()
        client.srem(shard.keys.paused, queue)
        client.xadd(shard.keys.wake, {"w": 1}, maxlen=100, approximate=True)


def busy(found: list[tuple[str, Any]]) -> bool:
    """A job still waits on a queue or sits on an in-progress list of its shard (the
    shards' clients are made by ``shards``, before the clock: a poll opens no connection)."""
    from cogworker.testing.servers import PreforkWorker
    if any(shard.redis().llen(shard.keys.queue(queue)) for queue, shard in found):
        return True
    return any(PreforkWorker._busy(shard.redis(), shard.keys.namespace) for _, shard in found)
