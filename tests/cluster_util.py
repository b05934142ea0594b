"""Helpers for the cluster tests: one real Redis Cluster (3 masters, 3 replicas) per
session, skipped with the reason only when this machine can't start one, and cogworker
configured against it with a ``{ns}`` namespace of the test's own (emptied first)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import cogworker
from cogworker.testing.cluster import Cluster, cluster_support


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    why = cluster_support()
    if why:
        pytest.skip(why)
    deployment = Cluster().start(timeout=30)  # a cluster stuck past it is made again (once)
    yield deployment
    deployment.cleanup()


@pytest.fixture
def cluster_ns() -> str:
    """A namespace of this test's own, already a hash tag (one slot)."""
    return "{cw-" + uuid.uuid4().hex[:8] + "}"


@pytest.fixture
def cluster_config(cluster: Cluster, cluster_ns: str) -> Iterator[cogworker.Config]:
    cluster.wait_ok()
    cogworker.config._config = None
    yield cogworker.configure(redis_url=cluster.url, namespace=cluster_ns, socket_timeout=2.0)
    cogworker.config._config = None


@pytest.fixture(params=["namespace", "queue"])
def layout_config(request, cluster: Cluster, cluster_ns: str) -> Iterator[cogworker.Config]:
    """``cluster_config`` in each key layout (docs/architecture.md#cluster-layout): the
    namespace in one slot, then each queue a shard of its own."""
    cluster.wait_ok()
    cogworker.config._config = None
    yield cogworker.configure(
        redis_url=cluster.url, namespace=cluster_ns, socket_timeout=2.0, cluster_layout=request.param
    )
    cogworker.config._config = None
