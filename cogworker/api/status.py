"""A job's status and history, as the hook subscribers of ``cogworker.history`` wrote
them: ``status(jid)`` and ``history(jid)``. A worker's writes are buffered and land about
a second after the transition; a job pushed to a queue or ``schedule`` has its status at once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..config import Config, as_text, get_config

STATES = ("queued", "scheduled", "running", "retrying", "succeeded", "dead")


@dataclass(frozen=True)
class JobStatus:
    """``state``: one of ``STATES``; ``attempt``: the execution it is about (1 = the first;
    for queued/scheduled the next one); ``identity``/``started_at``: while running;
    ``at``: when a retrying or scheduled job is due; ``reason``: why it went to retry/dead."""

    jid: str
    state: str
    updated_at: float
    attempt: int
    queue: str | None
    job_class: str | None = None
    identity: str | None = None
    started_at: float | None = None
    at: float | None = None
    error_class: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Attempt:
    """One execution: ``outcome`` succeeded, failed, orphaned, interrupted or timed_out;
    ``went``: where the job went after it (succeeded, retrying, dead, queued)."""

    attempt: int
    started_at: float | None
    ended_at: float
    outcome: str
    identity: str | None
    queue: str | None = None
    went: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    traceback: str | None = None


def status(jid: str, config: Config | None = None) -> JobStatus | None:
    """The job's last known status, or None (unknown jid, expired, or status turned off)."""
    config = config or get_config()
    raw = config.redis().hgetall(config.keys.status(jid))
    if not raw:
        return None
    fields = {as_text(k): as_text(v) for k, v in raw.items()}
    return JobStatus(jid=jid, state=fields.get("state", "?"), updated_at=float(fields.get("updated_at") or 0),
                     attempt=int(fields.get("attempt") or 0), queue=fields.get("queue") or None,
                     job_class=fields.get("class") or None, identity=fields.get("identity") or None,
                     started_at=_float(fields.get("started_at")), at=_float(fields.get("at")),
                     error_class=fields.get("error_class") or None, reason=fields.get("reason") or None)


def history(jid: str, config: Config | None = None) -> list[Attempt]:
    """The job's executions, oldest first (at most ``history_max``); [] if none is known.
    An entry that isn't readable is skipped."""
    config = config or get_config()
    found = []
    for raw in config.redis().lrange(config.keys.history(jid), 0, -1):
        entry = _entry(raw)
        if entry is not None:
            found.append(entry)
    return found


def _entry(raw: bytes | str) -> Attempt | None:
    try:
        data: dict[str, Any] = json.loads(raw)
        return Attempt(attempt=int(data.get("attempt") or 0), started_at=_float(data.get("started_at")),
                       ended_at=float(data["ended_at"]), outcome=str(data["outcome"]),
                       identity=data.get("identity"), queue=data.get("queue"), went=data.get("went"),
                       error_class=data.get("error_class"), error_message=data.get("error_message"),
                       traceback=data.get("traceback"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _float(value: Any) -> float | None:
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None
