"""Where jobs live (docs/architecture.md#cluster-layout): the one seam the client, the
faces (API, CLI, web UI, metrics) and the processes ask "which part holds this queue or
job" and "every part", so that no other module needs to know how parts are made.

The scripts that settle a job write its result, push a chain's next step and count its
group, chord or batch in the same step, and a script runs in one slot: so every job of a
chain, group, chord or batch must be in one part (``one_part``: refused at enqueue, in
one line). This process remembers which part it put an id in (``remember``, ``placed``),
so ``result()`` asks that part alone.

A *part* is a namespace that holds jobs: their queues, in-progress lists, sets, records.
Outside the queue layout on a Redis Cluster there is one part, the configured namespace
(every answer below is the config itself, so the callers' path and cost are what they
were). In the queue layout each shard (a queue, or a group of ``cluster_shards``) is a
part of its own, under a hash tag of its own (``layout.py`` names them; ``Config`` makes
and caches each part's config); the fleet's own keys (cron, stats, the registry of parts,
the masters' records) stay in the configured namespace, ``config.fleet``.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from . import layout
from .config import Config
from .errors import ConfigurationError

T = TypeVar("T")
S = TypeVar("S")

PLACED_MAX = 10_000  # ids remembered (the oldest forgotten first): result() looks elsewhere for others
_placed: dict[str, str] = {}
_lock = threading.Lock()  # enqueues from several threads: the trim must not race


def split(config: Config) -> bool:
    """Whether jobs live in more than one part (the queue layout, on a cluster)."""
    return config.sharded


def merged(config: Config) -> bool:
    """Whether ``config`` is the fleet's view of a split layout: its reads span every part."""
    return config.sharded and config.shard_name is None


def holder(config: Config, queue: str) -> Config:
    """The part whose keys hold ``queue``'s jobs (one part: the config itself)."""
    return config.shard(queue)


def named(config: Config, name: str) -> Config:
    """The part called ``name`` (as ``name_of`` gives it; one part: the config itself)."""
    return config.shard_named(name)


def name_of(config: Config) -> str | None:
    """A part's name; None for the fleet's view or the one part of an unsplit layout."""
    return config.shard_name


def parts(config: Config) -> list[Config]:
    """The configs whose keys hold jobs: every part (the fleet's view), else the config
    itself (one namespace, or one part already)."""
    return config.shards() if merged(config) else [config]


def all_parts(config: Config) -> list[Config]:
    """Every part of ``config``'s fleet, even asked from one part (a jid's history may be
    in any of them); one part: the config itself."""
    return config.shards()


def everywhere(config: Config) -> list[Config]:
    """The fleet and every part: for what both may hold (process records, counters)."""
    if not merged(config):
        return [config]
    return [config, *config.shards()]


def by_holder(config: Config, queues: Iterable[str]) -> list[tuple[Config, list[str]]]:
    """``queues`` grouped by the part that holds each, in their first queue's order."""
    grouped: dict[str, tuple[Config, list[str]]] = {}
    for queue in queues:
        part = holder(config, queue)
        grouped.setdefault(part.keys.namespace, (part, []))[1].append(queue)
    return list(grouped.values())


def announce(config: Config) -> None:
    """Lists this part in the fleet's registry, once per process, so the faces find it
    (nothing to do for one part). Best effort: a failure is tried again next time."""
    config.note_shard()


def first(places: Iterable[S], read: Callable[[S], T | None]) -> T | None:
    """The first part's answer that is not None (a jid lives in one part)."""
    for part in places:
        found = read(part)
        if found is not None:
            return found
    return None


def merge_pages(
    pages: list[list[T]], key: Callable[[T], float], newest_first: bool, offset: int, limit: int
) -> list[T]:
    """One page of the whole from each part's first ``offset + limit`` entries (each
    already in order): merged by ``key`` and cut, so k parts cost k pages."""
    joined = heapq.merge(*pages, key=key, reverse=newest_first)
    return list(joined)[offset : offset + limit]


def place(config: Config, queue: str) -> Config:
    """The part a job of ``queue`` is pushed to, listed in the fleet's registry."""
    into = holder(config, queue)
    announce(into)
    return into


def one_part(config: Config, queues: Iterable[str], what: str) -> Config:
    """The one part ``queues`` are in (listed in the fleet's registry); the config itself
    in an unsplit layout. ConfigurationError if they span several."""
    if not split(config):
        return config
    names = {queue: name_of(holder(config, queue)) for queue in queues}
    if len(set(names.values())) > 1:
        listed = ", ".join(f"{queue!r} (shard {name!r})" for queue, name in names.items())
        raise ConfigurationError(
            f"a {what}'s jobs must be in one shard of the cluster's queue layout, not {listed}: "
            f"list these queues together in cluster_shards (COGWORKER_CLUSTER_SHARDS)"
        )
    return place(config, next(iter(names), "default"))


def worker_part(config: Config, queues: list[tuple[str, int | None]]) -> Config:
    """The part a single-process worker works: in the queue layout, its queues' one part;
    queues of several need a process each (``cogworker-prefork`` gives each part children
    of its own)."""
    if not split(config):
        return config
    groups = layout.by_shard(config.cluster_shards, queues)
    if len(groups) > 1:
        raise ConfigurationError(
            f"the queues are in {len(groups)} cluster shards ({', '.join(name for name, _ in groups)}), and one "
            "worker works one shard (queue layout): run one worker per shard, use cogworker-prefork, or group "
            "the queues into one shard with COGWORKER_CLUSTER_SHARDS"
        )
    return named(config, groups[0][0])


def remember(ident: str, config: Config) -> None:
    """``ident``'s result will be in part ``config`` (kept for result(); bounded)."""
    name = name_of(config)
    if name is None:
        return
    with _lock:
        if len(_placed) >= PLACED_MAX:
            del _placed[next(iter(_placed))]
        _placed[ident] = name


def placed(ident: str) -> str | None:
    """The part this process put ``ident``'s job in, if it remembers."""
    return _placed.get(ident)


def join_batch(held: str | None, config: Config, bid: str, queue: str) -> str | None:
    """The part of batch ``bid`` once a job of ``queue`` joins it from part ``config``:
    the batch's (``held``), or this one when not known yet. ConfigurationError if they
    differ (every job of a batch is in the batch's part)."""
    name = name_of(config)
    if held is None or held == name:
        return name
    raise ConfigurationError(
        f"batch {bid} is in shard {held!r}; a job of queue {queue!r} (shard {name!r}) can't "
        f"join it: list the queues of one batch together in cluster_shards"
    )
