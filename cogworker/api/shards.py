"""Reading over shards (docs/architecture.md#cluster-layout): in the queue layout each
shard is a namespace of its own, so what an operator asks of "the system" is asked of
every shard and merged. Outside it (one namespace) each helper sees the config alone, so
the callers' path and cost are what they were."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import TypeVar

from ..config import Config

T = TypeVar("T")
S = TypeVar("S")


def merged(config: Config) -> bool:
    """Whether ``config`` is the fleet of a queue layout: its reads span every shard."""
    return config.sharded and config.shard_name is None


def parts(config: Config) -> list[Config]:
    """The configs whose keys hold jobs: every shard's (the fleet's view), else the config
    itself (one namespace, or one shard already)."""
    return config.shards() if merged(config) else [config]


def everywhere(config: Config) -> list[Config]:
    """The fleet and every shard: for what both may hold (process records, counters)."""
    if not merged(config):
        return [config]
    return [config, *config.shards()]


def first(places: Iterable[S], read: Callable[[S], T | None]) -> T | None:
    """The first shard's answer that is not None (a jid lives in one shard)."""
    for part in places:
        found = read(part)
        if found is not None:
            return found
    return None


def merge_pages(pages: list[list[T]], key: Callable[[T], float], newest_first: bool,
                offset: int, limit: int) -> list[T]:
    """One page of the whole from each shard's first ``offset + limit`` entries (each
    already in order): merged by ``key`` and cut, so k shards cost k pages."""
    joined = heapq.merge(*pages, key=key, reverse=newest_first)
    return list(joined)[offset:offset + limit]
