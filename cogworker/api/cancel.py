"""Cancelling a job wherever it is, and reading a running job's progress
(docs/architecture.md#cancel).

``cancel(jid)`` finds the entry (an in-progress list, a queue, schedule, retry), then runs
``cancel.lua`` against the exact bytes it read there: the entry marked
(``cancelled:<jid>``) and removed in one step, or nothing if the entry moved meanwhile (a
fetch, the poller, its own end), and then it looks again. Whoever touches the entry first
wins, so the answer is what happened: True, it will not run (again); False, it was not
found waiting or running (finished, dead, unknown), and nothing was changed. In the queue
layout on a cluster each part is looked in (the job and its marks live in its queue's part).

``cancel(id)`` of a workflow (docs/architecture.md#workflows) cancels all of it: a chain's
id (its last step's jid, not pushed yet), a group's (``g-…``) or a chord's (its callback's
jid, which ``chord:{id}`` maps to its group). ``cancel_workflow.lua`` first writes what
stops the rest (the mark ``cancelled:<id>``, which ``complete.lua`` reads before it pushes
a chain's next step; a group's ``failed``, after which no chord callback fires), then
every job of it found waiting or running is cancelled as one job is, until a look finds
none (a step pushed meanwhile is found by the next look).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .. import routing, store
from ..config import Config, as_text, get_config
from ..core import hooks
from ..core.payload import priority_of
from ..core.workflow import GROUP_PREFIX
from ..transitions import declare, operator, settle
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
    unknown, or cancelled before): nothing changed.

    A workflow's id (a chain's, a group's, a chord's): all of it that waits or runs is
    cancelled, and nothing of it is pushed after; True if anything was stopped."""
    if not isinstance(jid, str) or not jid:
        raise ValueError(f"a jid is a non-empty string, not {jid!r}")
    config = config or get_config()
    for part in routing.parts(config):
        stopped = _cancel_group(part, jid)
        if stopped is not None:
            return stopped
    if _cancel_job(config, jid):
        return True  # a job, or a chain's last step (nothing of its chain comes after)
    return any(_cancel_chain(part, jid) for part in routing.parts(config))


def _cancel_job(config: Config, jid: str) -> bool:
    """One look reads each place in turn, so a job that moves between two reads (fetched
    after its queue was read, say) is missed by that look: gone counts only when two looks
    in a row miss it."""
    misses = 0
    for _ in range(ROUNDS):
        found = False
        for part in routing.parts(config):
            for record, owner in _places(part, jid):
                found = True
                if _cancel_entry(part, record, owner):
                    _fire(part, record)
                    return True
        misses = 0 if found else misses + 1
        if misses == 2:
            return False
    return False


def _cancel_group(config: Config, wid: str) -> bool | None:
    """Cancels group or chord ``wid`` if this part holds its state (None if not)."""
    client, keys = config.redis(), config.keys
    if wid.startswith(GROUP_PREFIX) and client.exists(keys.group(wid)):
        return _stop(config, Stop(wid, "group", [wid], lambda r: _wf(r).get("g") == wid, gid=wid))
    found = client.get(keys.chord(wid))
    if found is None:
        return None
    gid = as_text(found)
    member: Callable[[JobRecord], bool] = lambda r: _wf(r).get("g") == gid or r.jid == wid  # noqa: E731
    return _stop(config, Stop(wid, "chord", [gid, wid], member, gid=gid))


def _cancel_chain(config: Config, wid: str) -> bool:
    """Cancels chain ``wid`` if a step of it waits or runs here (a chain writes no record:
    its steps carry its id, ``wf.last``, but for the last, whose jid it is)."""
    # Only an earlier step names a chain (its wf.last): an entry whose own jid it is, with
    # no step before it left, is a job, which _cancel_job answered for.
    step = next((r for r, _ in _containing(config, wid) if _wf(r).get("last") == wid), None)
    if step is None:
        return False
    kept = _wf(step).get("lttl", _wf(step).get("ttl"))
    ttl = config.result_ttl
    if isinstance(kept, (int, float)) and not isinstance(kept, bool) and math.isfinite(kept) and kept >= 1:
        ttl = int(kept)
    _stop(config, Stop(wid, "chain", [wid], lambda r: _wf(r).get("last") == wid or r.jid == wid, ttl=ttl))
    return True


def _wf(record: JobRecord) -> dict[str, Any]:
    wf = record.payload.get("wf")
    return wf if isinstance(wf, dict) else {}


@dataclass(frozen=True)
class Stop:
    """A workflow to cancel: its id and kind, the ids its jobs' entries contain, which of
    those entries are its jobs, and its group (group, chord) or result TTL (chain)."""

    wid: str
    kind: str
    needles: list[str]
    member: Callable[[JobRecord], bool]
    gid: str = ""
    ttl: int = 0


def _stop(config: Config, stop: Stop) -> bool:
    """``cancel_workflow.lua`` first (what stops the rest), then every job of it found
    waiting or running, look after look, until a look finds none."""
    keys = config.keys
    mark_ttl = max(1, int(config.status_ttl))
    mark = json.dumps({"at": time.time(), "was": "workflow", "workflow": stop.kind})
    stopped = operator.cancel_workflow(
        config.redis(),
        keys,
        mark_key=keys.cancelled(stop.wid),
        index=keys.cancelled_workflows,
        # A group's keys (group, chord), or its chain's result; any key for those unused.
        group=keys.group(stop.gid) if stop.gid else keys.cancelled_workflows,
        result=keys.cancelled_workflows if stop.gid else keys.result(stop.wid),
        result_wait=keys.cancelled_workflows if stop.gid else keys.result_wait(stop.wid),
        group_wait=keys.group_wait(stop.gid) if stop.gid else keys.cancelled_workflows,
        results_index=keys.retained_results,
        declared=[],
        id=stop.wid,
        kind=stop.kind,
        mark=mark,
        ttl=mark_ttl,
        now=repr(time.time()),
        most=max(1, int(config.status_max)),
        result_ttl=stop.ttl,
    )
    for _ in range(ROUNDS):
        found = [(r, owner) for n in stop.needles for r, owner in _containing(config, n) if stop.member(r)]
        if not found:
            break
        for record, owner in found:
            if _cancel_entry(config, record, owner):
                stopped = True
                _fire(config, record)
    return stopped


def _containing(config: Config, needle: str) -> Iterator[tuple[JobRecord, str]]:
    """Every entry containing ``needle``: running first, then queued, then waiting."""
    yield from _running(config, needle)
    for name in queue_names(config):
        for queued in Queue(name, config).containing(needle):
            yield queued, ""
    for jobset in (ScheduledSet(config), RetrySet(config)):
        for waiting in jobset.containing(needle):
            yield waiting, ""


def _running(config: Config, needle: str) -> Iterator[tuple[JobRecord, str]]:
    """The entries of every in-progress list containing ``needle``, with the list's owner."""
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
            if needle.encode() in raw:
                yield JobRecord.parse(raw, f"in_progress:{identity}"), identity


def _places(config: Config, jid: str) -> Iterator[tuple[JobRecord, str]]:
    """Where ``jid`` is, as (entry, the in-progress list's owner or ""), read in the order
    a job moves (schedule or retry, a queue, an in-progress list), so one look finds a job
    that moves forward between two reads; a move back (a failed run to retry) can slip
    past one look, and ``_cancel_job`` looks again."""
    for jobset in (ScheduledSet(config), RetrySet(config)):
        waiting = jobset.find(jid)
        if waiting is not None:
            yield waiting, ""
    for name in queue_names(config):
        queued = Queue(name, config).find(jid)
        if queued is not None:
            yield queued, ""
    for record, owner in _running(config, jid):
        if record.jid == jid:
            yield record, owner


def _cancel_entry(config: Config, record: JobRecord, owner: str) -> bool:
    keys = config.keys
    jid = record.jid or ""
    if record.source in ("schedule", "retry"):
        kind, key = "zset", getattr(keys, record.source)
    elif owner:
        kind, key = "list", keys.in_progress(owner)
    else:
        # The list it waits on: its queue's, or its priority level's (as the payload says).
        kind, key = "list", keys.job_queue(record.source.split(":", 1)[1], priority_of(record.payload))
    digest = record.payload.get("unique_digest")
    lock = keys.unique(digest) if isinstance(digest, str) and digest else keys.stats_cancelled
    where = "running" if owner else record.source.split(":", 1)[0]
    mark = json.dumps(
        {"at": time.time(), "was": where, "queue": record.queue, "class": record.job_class, "identity": owner or None}
    )
    ttl = max(1, int(config.status_ttl))
    declared = declare.of_entry(keys, record.raw)  # its workflow's and batch's keys
    with checked(config.redis(), key, "list" if kind == "list" else "sorted set"):
        return operator.cancel(
            config.redis(),
            keys,
            where=key,
            mark_key=keys.cancelled(jid),
            counter=keys.stats_cancelled,
            lock=lock,
            ahead=keys.ahead,
            index=keys.retained_cancelled,
            **settle.settling_keys(keys),
            declared=declared,
            kind=kind,
            entry=record.raw,
            mark=mark,
            ttl=ttl,
            lock_owner=jid if lock != keys.stats_cancelled else "",
            list_owner=owner,
            workflows="1",
            now=repr(time.time()),
            keep=config.status_max,
        )


def _fire(config: Config, record: JobRecord) -> None:
    if hooks.wanted("cancelled"):
        hooks.fire("cancelled", record.payload, queue=record.queue, config=config)


def cancelled(jid: str, config: Config | None = None) -> dict[str, Any] | None:
    """The cancel mark of ``jid`` (``at``, ``was``: queue/schedule/retry/running, ...), or
    None: never cancelled, or longer ago than ``status_ttl``."""
    config = config or get_config()
    return routing.first(routing.parts(config), lambda part: json_object(part.redis().get(part.keys.cancelled(jid))))


def progress(jid: str, config: Config | None = None) -> Progress | None:
    """The last progress ``jid`` reported (``current_job().progress``), or None."""
    config = config or get_config()
    return routing.first(routing.parts(config), lambda part: parse_progress(part.redis().get(part.keys.progress(jid))))
