"""The deployments bench/failover.py puts under its nemesis, behind one interface: a
Sentinel deployment (a master, a replica, 3 sentinels) and a Redis Cluster (3 masters,
3 replicas), each on loopback, of our own. Each says its URL and namespace, which node is
the master of the namespace now, and how to kill it, wait for its replica to take over and
bring the killed node back as a replica of the new master (so the next round has one)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol


class Target(Protocol):
    """One deployment under the nemesis: ``namespace`` the fleet's, ``jobs_namespace``
    the one whose keys hold the jobs (the job queue's shard's, in the queue layout)."""

    name: str
    namespace: str
    jobs_namespace: str

    def url(self) -> str: ...
    def master_client(self) -> Any: ...
    def lagging_replica(self) -> Any: ...
    def kill_master(self) -> Any: ...
    def wait_failover(self, killed: Any, timeout: float) -> None: ...
    def rejoin(self, killed: Any, timeout: float) -> None: ...
    def cleanup(self) -> None: ...


class SentinelTarget:
    """cogworker.testing.sentinel's deployment; the namespace is the default one."""

    name, namespace = "Sentinel", "cogworker"
    jobs_namespace = namespace

    def __init__(self) -> None:
        from cogworker.testing.sentinel import Sentinels

        self.deployment = Sentinels().start()

    def url(self) -> str:
        return self.deployment.url()

    def master_client(self) -> Any:
        return self.deployment.master.client()

    def lagging_replica(self) -> Any:
        return self.deployment.replica

    def kill_master(self) -> Any:
        return self.deployment.kill_master()

    def wait_failover(self, killed: Any, timeout: float) -> None:
        self.deployment.wait_failover(killed.port, timeout=timeout)

    def rejoin(self, killed: Any, timeout: float) -> None:
        self.deployment.rejoin(killed, timeout=timeout)

    def cleanup(self) -> None:
        self.deployment.cleanup()


class ClusterTarget:
    """cogworker.testing.cluster's 3 masters + 3 replicas. The namespace is one hash tag,
    so one master owns all of it: that master is the one killed, each round whichever
    node serves the tag's slot then. In the queue layout (``layout="queue"``) the job
    queue's shard, ``{cogworker:default}``, is a slot of its own: the master serving it is
    the one killed (``locate``: the key whose slot's master that is)."""

    name, namespace = "Cluster", "{cogworker}"

    def __init__(self, node_timeout: int = 1000, victim: str = "owner", layout: str = "namespace") -> None:
        from cogworker.testing.cluster import Cluster

        self.layout = layout
        self.locate, self.jobs_namespace = job_queue_key(self.namespace, layout)
        if layout == "queue":
            self.name = f"{self.name}, queue layout"
        # "owner": the master serving the namespace; "other": one that doesn't (with
        # cluster-require-full-coverage yes the whole cluster answers CLUSTERDOWN until
        # its replica takes over, the namespace's master too).
        self.victim = victim
        if victim == "other":
            self.name = self.name.replace("Cluster", "Cluster, another master killed", 1)
        self.deployment = Cluster(node_timeout=node_timeout).start()
        # A node that never serves the namespace's slot: never killed, so every process
        # started later (a replaced child) still finds the cluster through it.
        owner = self.owner()
        self._url_port = next(
            s.port
            for s in self.deployment.servers
            if s.port != owner.port and s.port != self.deployment.replica_of(owner).port
        )

    def url(self) -> str:
        return f"redis://127.0.0.1:{self._url_port}/0"

    def owner(self) -> Any:
        return self.deployment.owner(self.locate)

    def master_client(self) -> Any:
        return self.owner().server.client()

    def lagging_replica(self) -> Any:
        return self.deployment.replica_of(self.owner()).server

    def kill_master(self) -> Any:
        owner = self.owner()
        if self.victim == "other":
            owner = next(
                m for m in self.deployment.masters() if m.node_id != owner.node_id and m.port != self._url_port
            )
        self.deployment.kill(owner.port)
        return owner

    def wait_failover(self, killed: Any, timeout: float) -> None:
        self.deployment.wait_failover(killed, timeout=timeout)

    def rejoin(self, killed: Any, timeout: float) -> None:
        """The killed node back (empty, with its nodes.conf: a replica of the promoted
        one), and online there: until then WAIT on the new master counts no replica."""
        self.deployment.rejoin(killed.server, timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            master = self.deployment.owner_of_slot(killed.slots[0][0])
            if online_replicas(master.server.client()) >= 1:
                return
            time.sleep(0.05)
        raise AssertionError(f"the rejoined node was no online replica within {timeout}s")

    def cleanup(self) -> None:
        self.deployment.cleanup()


def online_replicas(client: Any) -> int:
    """How many replicas the master behind ``client`` counts as online (synced)."""
    with contextlib.suppress(Exception):
        info = client.info("replication")
        return sum(
            1
            for key, value in info.items()
            if key.startswith("slave") and isinstance(value, dict) and value.get("state") == "online"
        )
    return 0


def job_queue_key(namespace: str, layout: str, queue: str = "default") -> tuple[str, str]:
    """The key of ``queue``'s list, and the namespace that holds its jobs, in ``layout``
    (``config.shard(queue).keys.queue(queue)``: the shard's, in the queue layout)."""
    import cogworker

    config = cogworker.Config(
        redis_url="redis://127.0.0.1:1/0", namespace=namespace, redis_cluster=True, cluster_layout=layout
    )
    shard = config.shard(queue)
    return shard.keys.queue(queue), shard.keys.namespace


def _other(layout: str = "namespace") -> ClusterTarget:
    return ClusterTarget(victim="other", layout=layout)


def _sentinel(layout: str = "namespace") -> SentinelTarget:
    if layout != "namespace":
        raise ValueError("the queue layout is a Redis Cluster's: --target sentinel has one namespace")
    return SentinelTarget()


def _cluster(layout: str = "namespace") -> ClusterTarget:
    return ClusterTarget(layout=layout)


TARGETS: dict[str, Callable[..., Target]] = {"sentinel": _sentinel, "cluster": _cluster, "cluster-other": _other}
