"""The shards a prefork master serves (docs/architecture.md#cluster-layout).

In the queue layout on a Redis Cluster each shard (a queue, or a group of queues named
together in ``cluster_shards``) is a namespace of its own, in a slot of its own, so a
child works the queues of one shard: its in-progress list, fence and beat live there, and
every script it runs stays in that slot. The master splits its children over its shards:
each gets one, then each next child goes where it is shortest by the shard's weight (the
sum of its queues' weights, 1 for a queue without one). Everywhere else (and in the
namespace layout) there is one shard, the master's own config, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .. import layout
from ..config import Config
from ..errors import ConfigurationError

MAX_SHARDS = 255  # a slot byte names a child's shard


@dataclass(frozen=True)
class Shard:
    number: int
    name: str | None  # None: the one shard of the namespace layout
    queues: list[tuple[str, int | None]]
    config: Config  # the master's (short timeouts)
    child_config: Config
    weight: float

    @property
    def queue_names(self) -> list[str]:
        return [q for q, _ in self.queues]


def plan(queues: list[tuple[str, int | None]], config: Config, child_config: Config, procs: int) -> list[Shard]:
    """The shards of ``queues``; a master with fewer children than shards would leave
    one unserved: refused."""
    if not config.sharded:
        return [Shard(0, None, queues, config, child_config, 1.0)]
    groups = layout.by_shard(config.cluster_shards, queues)
    if len(groups) > MAX_SHARDS:
        raise ConfigurationError(f"{len(groups)} shards: a master serves at most {MAX_SHARDS}")
    if procs < len(groups):
        raise ConfigurationError(
            f"--procs {procs}: the queues are in {len(groups)} cluster shards ({', '.join(n for n, _ in groups)}), "
            f"and each shard needs a child of its own (queue layout): give --procs {len(groups)} or more, or "
            "group queues into shards with COGWORKER_CLUSTER_SHARDS"
        )
    return [
        Shard(i, name, qs, config.shard_named(name), child_config.shard_named(name), float(sum(w or 1 for _, w in qs)))
        for i, (name, qs) in enumerate(groups)
    ]


def next_shard(shards: list[Shard], working: Iterable[int]) -> Shard:
    """Where the next child goes: the shard with the fewest children for its weight."""
    counts = [0] * len(shards)
    for number in working:
        counts[number] += 1
    return min(shards, key=lambda s: (counts[s.number] / s.weight, s.number))


def spare(shards: list[Shard], working: list[tuple[int, int]], n: int) -> list[int]:
    """``n`` children to let go (``working``: (key, shard) pairs, newest last), from
    the shards with the most children for their weight, never a shard's last one."""
    counts = [0] * len(shards)
    for _, number in working:
        counts[number] += 1
    chosen: list[int] = []
    pool = list(working)
    for _ in range(n):
        candidates = [s for s in shards if counts[s.number] > 1] or [s for s in shards if counts[s.number] > 0]
        if not candidates:
            break
        shard = max(candidates, key=lambda s: ((counts[s.number] - 1) / s.weight, -s.number))
        key = next(k for k, number in reversed(pool) if number == shard.number)
        pool.remove((key, shard.number))
        counts[shard.number] -= 1
        chosen.append(key)
    return chosen
