"""The queue layout on a cluster (docs/architecture.md#cluster-layout): which shard a
workflow's jobs go to, and where this process put the ids whose results it may wait for.

The scripts that settle a job write its result, push a chain's next step and count its
group, chord or batch in the same step, and a script runs in one slot: so every job of a
chain, group, chord or batch must be in one shard. Refused at enqueue, in one line.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..config import Config
from ..errors import ConfigurationError

PLACED_MAX = 10_000  # ids remembered (the oldest forgotten first): result() looks elsewhere for others
_placed: dict[str, str] = {}
_lock = threading.Lock()  # enqueues from several threads: the trim must not race


def one_shard(config: Config, queues: Iterable[str], what: str) -> Config:
    """The config of the one shard ``queues`` are in (named in the fleet's registry); the
    config itself when not sharded. ConfigurationError if they span several."""
    if not config.sharded:
        return config
    shards = {queue: config.shard(queue).shard_name for queue in queues}
    if len(set(shards.values())) > 1:
        listed = ", ".join(f"{queue!r} (shard {shard!r})" for queue, shard in shards.items())
        raise ConfigurationError(f"a {what}'s jobs must be in one shard of the cluster's queue layout, not {listed}: "
                                 f"list these queues together in cluster_shards (COGWORKER_CLUSTER_SHARDS)")
    into = config.shard(next(iter(shards), "default"))
    into.note_shard()
    return into


def remember(ident: str, config: Config) -> None:
    """``ident``'s result will be in ``config``'s shard (kept for result(); bounded)."""
    if config.shard_name is None:
        return
    with _lock:
        if len(_placed) >= PLACED_MAX:
            del _placed[next(iter(_placed))]
        _placed[ident] = config.shard_name


def placed(ident: str) -> str | None:
    """The shard this process put ``ident``'s job in, if it remembers."""
    return _placed.get(ident)
