"""Cancelling a job wherever it is, and reading a running job's progress
(docs/architecture.md#cancel).

``cancel(jid)`` finds the entry (an in-progress list, a queue, schedule, retry), then runs
``cancel.lua`` against the exact bytes it read there: the entry marked
(``cancelled:<jid>``) and removed in one step, or nothing if the entry moved meanwhile (a
fetch, the poller, its own end), and then it looks again. Whoever touches the entry first
wins, so the answer is what happened: True, it will not run (again); False, it was not
found waiting or running (finished, dead, unknown), and nothing was changed. In the queue
layout on a cluster each shard is looked in (the job and its marks live in its queue's shard).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from .. import store
from ..config import Config, as_text, get_config
from ..core import hooks
from ..store import lua
from . import shards
from .queues import Queue, queue_names
from .records import JobRecord, checked
from .sets import RetrySet, ScheduledSet
from .status import Progress, json_object, parse_progress

ROUNDS = 5  # looks, while the entry keeps moving away between a read and the script


def cancel(jid: str, config: Config | None = None) -> bool:
    """True if ``jid`` will not run (again): a queued, scheduled or retrying job is
    removed; a running one is told (``current_job().cancelled``, or ``CancelledError``
    at its next await, on its worker's next beat) and ends as ``cancelled``: not
    retried, not dead. False if it is not waiting or running (already finished, dead,
    unknown, or cancelled before): nothing changed."""
    if not isinstance(jid, str) or not jid:
        raise ValueError(f"a jid is a non-empty string, not {jid!r}")
    config = config or get_config()
    for _ in range(ROUNDS):
        found = False
        for part in shards.parts(config):
            for record, owner in _places(part, jid):
                found = True
                if _cancel_entry(part, record, owner):
                    _fire(part, record)
                    return True
        if not found:
            return False
    return False


def _places(config: Config, jid: str) -> Iterator[tuple[JobRecord, str]]:
    """Where ``jid`` is, as (entry, the in-progress list's owner or ""): running first
    (a job moves from a queue to a list, never back unrun but by a give-back)."""
    client, keys = config.redis(), config.keys
    with checked(client, keys.in_progress_identities, "set"):
        identities = sorted(as_text(i) for i in client.smembers(keys.in_progress_identities))
    pipe = store.pipeline(client)
    for identity in identities:
        pipe.lrange(keys.in_progress(identity), 0, -1)
    for identity, rows in zip(identities, pipe.execute(raise_on_error=False), strict=True):
        if not isinstance(rows, list):
            continue  # a key of another type: not a list any job is on
        for raw in rows:
            if jid.encode() in raw:
                record = JobRecord.parse(raw, f"in_progress:{identity}")
                if record.jid == jid:
                    yield record, identity
    for name in queue_names(config):
        queued = Queue(name, config).find(jid)
        if queued is not None:
            yield queued, ""
    for jobset in (ScheduledSet(config), RetrySet(config)):
        waiting = jobset.find(jid)
        if waiting is not None:
            yield waiting, ""


def _cancel_entry(config: Config, record: JobRecord, owner: str) -> bool:
    keys = config.keys
    jid = record.jid or ""
    if record.source in ("schedule", "retry"):
        kind, key = "zset", getattr(keys, record.source)
    elif owner:
        kind, key = "list", keys.in_progress(owner)
    else:
        kind, key = "list", keys.queue(record.source.split(":", 1)[1])
    digest = record.payload.get("unique_digest")
    lock = keys.unique(digest) if isinstance(digest, str) and digest else keys.stats_cancelled
    where = "running" if owner else record.source.split(":", 1)[0]
    mark = json.dumps({"at": time.time(), "was": where, "queue": record.queue, "class": record.job_class,
                       "identity": owner or None})
    ttl = max(1, int(config.status_ttl))
    with checked(config.redis(), key, "list" if kind == "list" else "sorted set"):
        done = lua.run(config.redis(), "cancel", [key, keys.cancelled(jid), keys.stats_cancelled, lock, keys.ahead],
                       [kind, record.raw, mark, ttl, jid if lock != keys.stats_cancelled else "", owner,
                        keys.workflow_prefix, repr(time.time())])
    return int(done) == 1


def _fire(config: Config, record: JobRecord) -> None:
    if hooks.wanted("cancelled"):
        hooks.fire("cancelled", record.payload, queue=record.queue, config=config)


def cancelled(jid: str, config: Config | None = None) -> dict[str, Any] | None:
    """The cancel mark of ``jid`` (``at``, ``was``: queue/schedule/retry/running, ...), or
    None: never cancelled, or longer ago than ``status_ttl``."""
    config = config or get_config()
    return shards.first(shards.parts(config), lambda part: json_object(part.redis().get(part.keys.cancelled(jid))))


def progress(jid: str, config: Config | None = None) -> Progress | None:
    """The last progress ``jid`` reported (``current_job().progress``), or None."""
    config = config or get_config()
    return shards.first(shards.parts(config), lambda part: parse_progress(part.redis().get(part.keys.progress(jid))))
