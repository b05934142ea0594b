"""Process records: who is alive, what they run (docs/architecture.md#redis-keys: ``processes``, ``process:*``,
``last_beat``, ``workers:*``). One script per beat, whatever the number of processes;
it skips (and names) processes that were declared dead."""

from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from .. import store
from ..config import Config, logger
from ..store import errors as redis_errors
from ..transitions import process
from ..transitions.process import Beat


@dataclass
class BeatRecord:
    """What a process's beat writes about it (its record in ``processes``); the operator
    API reads it back as ``api.ProcessRecord``."""

    identity: str
    role: str  # master | child | worker
    pid: int
    queues: list[str]
    started_at: float = field(default_factory=time.time)
    busy: int = 0
    rss: int = 0
    # What it runs now (the UI's workers view): {"jid", "class", "queue", "run_at", "payload"}
    running: dict[str, Any] | None = None
    owns_list: bool = True
    state: str = ""  # "", "quiet" or "stopping" (masters and single-process workers)
    # More fields of the record: a master's ``procs`` (its target) and ``children`` (live
    # ones, booted: their first fetch made), for ``cogworker health``.
    extra: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        return {
            "host": socket.gethostname(),
            "pid": self.pid,
            "role": self.role,
            "queues": ",".join(self.queues),
            "busy": self.busy,
            "rss": self.rss,
            "started_at": self.started_at,
            "beat_at": time.time(),
            "state": self.state,
            **self.extra,
        }


def process_ttl(config: Config) -> int:
    # Several missed beats before the record lapses, but no longer than the orphan
    # threshold: orphan recovery also waits for it to lapse.
    ttl = max(math.ceil(config.heartbeat_interval * 6), 10)
    return max(1, min(ttl, math.ceil(config.orphan_threshold)))


def clock() -> float:
    """Seconds on a clock that runs through a suspend as well as a freeze (SIGSTOP): a
    process's proof that it was alive lapses with either."""
    return time.clock_gettime(_CLOCK)


_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def _text(mapping: dict[str, Any]) -> str:
    # As redis-py would write each value: strings as they are, numbers by repr.
    return json.dumps({k: v if isinstance(v, str) else repr(v) for k, v in mapping.items()})


def beat(config: Config, records: list[BeatRecord], client: Any = None) -> Beat:
    """One script for every record; returns the identities it refused because they were
    declared dead (fenced), and the running jobs that were cancelled."""
    keys = config.keys
    beating, marks = [], []
    for rec in records:
        running = ""
        if rec.running:
            running = _text(
                {k: v if isinstance(v, (str, int, float)) else json.dumps(v) for k, v in rec.running.items()}
            )
            marks += [process.Mark(keys.cancelled(jid), jid, rec.identity) for jid in running_jids(running)]
        beating.append(
            process.Beating(
                keys.process(rec.identity),
                keys.workers(rec.identity),
                keys.fenced(rec.identity),
                rec.identity,
                "1" if rec.owns_list else "0",
                _text(rec.fields()),
                running,
            )
        )
    return process.beat(
        client or config.redis(),
        processes=keys.processes,
        last_beat=keys.last_beat,
        identities=keys.in_progress_identities,
        beating=beating,
        marks=marks,
        ttl=process_ttl(config),
    )


def running_jids(running: str) -> list[str]:
    """The jobs a record says run now (``running``, as the beat writes it): its job, and
    with --concurrency the others in flight ("also", comma-separated)."""
    fields = json.loads(running)
    jid, also = fields.get("jid"), fields.get("also")
    if not isinstance(jid, str):
        return []
    return [j for j in f"{jid},{also if isinstance(also, str) else ''}".split(",") if j]


CONTROLS = ("quiet", "stop")


def take_control(config: Config, identity: str, client: Any = None) -> str | None:
    """An operator's request to this process (``api.quiet_process``/``stop_process``), read
    and deleted in one command (GETDEL), so it is acted on once; None if there is none."""
    key = config.keys.control(identity)
    try:
        raw = (client or config.redis()).getdel(key)
    except store.ResponseError as exc:
        if redis_errors.classify(exc) != redis_errors.WRONGTYPE:
            raise
        # Not a request (someone else's key): never a reason to skip the beat itself.
        logger.error("%s: key %s holds another type than a string: no request read", identity, key)
        return None
    value = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    return value if value in CONTROLS else None


def deregister(config: Config, identity: str, client: Any = None) -> bool:
    """Drop a process's records; True if its in-progress list was empty and it is forgotten."""
    keys = config.keys
    return process.forget(
        client or config.redis(),
        in_progress=keys.in_progress(identity),
        identities=keys.in_progress_identities,
        last_beat=keys.last_beat,
        processes=keys.processes,
        process=keys.process(identity),
        workers=keys.workers(identity),
        ahead=keys.ahead,
        identity=identity,
    )


def rss_of(pid: int | None = None) -> int:
    import psutil

    try:
        return psutil.Process(pid or os.getpid()).memory_info().rss
    except (psutil.Error, OSError):  # the process may be gone by now
        return 0
