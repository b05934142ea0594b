"""bench/cluster.py's queue-layout row: the busy check, on each queue's own shard
(``cfg.shard(q)``: ``{cogworker:q3}``, a slot of its own), with the shards' clients made
before the clock starts. The fill, the pause and the resume go through the client and the
API as in the other rows: they route each queue to its shard.
"""

from __future__ import annotations

from typing import Any


def shards(url: str, namespace: str, queues: list[str]) -> list[tuple[str, Any]]:
    """``(queue, its shard's Config)`` for each queue, the fleet in the queue layout."""
    import cogworker

    cogworker.config._config = None
    fleet = cogworker.configure(redis_url=url, namespace=namespace, cluster_layout="queue")
    if not fleet.sharded:
        raise RuntimeError(f"{url}: not a cluster, the queue layout is off")
    return [(queue, fleet.shard(queue)) for queue in queues]


def busy(found: list[tuple[str, Any]]) -> bool:
    """A job still waits on a queue or sits on an in-progress list of its shard (the
    shards' clients are made by ``shards``, before the clock: a poll opens no connection)."""
    from cogworker.testing.servers import PreforkWorker

    if any(shard.redis().llen(shard.keys.queue(queue)) for queue, shard in found):
        return True
    return any(PreforkWorker._busy(shard.redis(), shard.keys.namespace) for _, shard in found)
