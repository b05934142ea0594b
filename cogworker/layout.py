"""The key layout on Redis Cluster (docs/architecture.md#cluster-layout): which hash tag
each queue's keys carry.

Two layouts. ``namespace`` (the default): every key of a namespace in one slot, as on one
Redis. ``queue``: each *shard* (a queue, or a group of queues named together in
``cluster_shards``) is a namespace of its own, ``{<tag>:<shard>}``, holding every key its
jobs touch (the queues, the in-progress lists, the fence, the beats, ``schedule``,
``retry``, ``dead``, the status buckets, results), so every script still runs in one
slot; the fleet's own keys (cron, stats, the shard registry, the masters' records) stay
under the namespace's tag. A leaf: only the names' rules and the errors.
"""

from __future__ import annotations

import os

from .errors import ConfigurationError
from .names import check_queue_name

LAYOUTS = ("namespace", "queue")


def layout_from_env() -> str:
    return validate_layout((os.environ.get("COGWORKER_CLUSTER_LAYOUT") or "namespace").strip().lower())


def shards_from_env() -> tuple[tuple[str, ...], ...]:
    """``COGWORKER_CLUSTER_SHARDS``: groups of queues that share a shard, ``;`` between
    groups and ``,`` within one (``critical,default;reports``)."""
    text = os.environ.get("COGWORKER_CLUSTER_SHARDS") or ""
    groups = [tuple(q.strip() for q in part.split(",") if q.strip()) for part in text.split(";")]
    return validate_shards(tuple(g for g in groups if g))


def validate_layout(value: object) -> str:
    if value not in LAYOUTS:
        raise ConfigurationError(f"cluster_layout must be 'namespace' or 'queue', got {value!r}")
    return value


def validate_shards(groups: object) -> tuple[tuple[str, ...], ...]:
    """Each group a non-empty sequence of queue names; no queue in two groups."""
    if isinstance(groups, str) or not isinstance(groups, (list, tuple)):
        raise ConfigurationError(f"cluster_shards must be a list of lists of queue names, got {groups!r}")
    seen: set[str] = set()
    out = []
    for group in groups:
        if isinstance(group, str) or not isinstance(group, (list, tuple)) or not group:
            raise ConfigurationError(
                f"cluster_shards: each group must be a non-empty list of queue names, got {group!r}"
            )
        for name in group:
            try:
                check_queue_name(name)
            except ConfigurationError as exc:
                raise ConfigurationError(f"cluster_shards: {exc}") from None
            if name in seen:
                raise ConfigurationError(f"cluster_shards: queue {name!r} is in two groups")
            seen.add(name)
        out.append(tuple(group))
    return tuple(out)


def shard_name(groups: tuple[tuple[str, ...], ...], queue: str) -> str:
    """The shard a queue's keys live in: its group's first queue, or its own name."""
    for group in groups:
        if queue in group:
            return group[0]
    return queue


def shard_namespace(fleet_namespace: str, shard: str) -> str:
    """The namespace of a shard: the fleet's tag with the shard's name inside it
    (``{cogworker}`` -> ``{cogworker:reports}``), so each shard hashes to a slot of its own
    and no two shards' keys can meet (the rest of the namespace is kept)."""
    start = fleet_namespace.find("{")
    end = fleet_namespace.find("}", start + 1)
    if start < 0 or end < 0:  # not tagged (callers pass the fleet's tagged namespace)
        return "{" + fleet_namespace + ":" + shard + "}"
    return fleet_namespace[:end] + ":" + shard + fleet_namespace[end:]


def by_shard(
    groups: tuple[tuple[str, ...], ...], queues: list[tuple[str, int | None]]
) -> list[tuple[str, list[tuple[str, int | None]]]]:
    """A worker's queues split by shard, each shard's in the order given, the shards in
    the order of their first queue."""
    out: dict[str, list[tuple[str, int | None]]] = {}
    for queue, weight in queues:
        out.setdefault(shard_name(groups, queue), []).append((queue, weight))
    return list(out.items())
