"""Applies a decision (``fate``) to an in-progress list, then fires the lifecycle hooks.

The write comes first; the hooks fire only once it went through (``True``), never when
the entry was no longer ours. What the write raises (Redis away, ``Fenced``) is the
caller's to handle: the decision is then owed, and applied again later.
"""

from __future__ import annotations

from typing import Any

from ..boundedjson import loads as json_loads
from . import hooks
from .fate import Ack, Complete, Decision, Drop, File, GiveBack, Park, Suspend
from .inprogress import InProgressList


def apply(lst: InProgressList, raw: bytes, decision: Decision, payload: dict[str, Any] | None = None,
          **event: Any) -> bool:
    """Writes ``decision`` for the entry ``raw`` of ``lst``; True if it was still there.
    ``payload``: the job as stored (parsed from the entry if needed for a hook);
    ``event``: more fields for the hook (queue, error, duration, ...)."""
    if isinstance(decision, (Ack, Drop)):
        lst.acknowledge(raw)
        return True
    if isinstance(decision, GiveBack):
        done = lst.give_back(raw)
        if done and hooks.wanted("given_back"):
            hooks.fire("given_back", payload or _parsed(raw), identity=lst.identity, config=lst.config, **event)
        return done
    if isinstance(decision, File):
        done = lst.file(raw, decision.zset, decision.score, decision.entry)
        if done:
            filed(lst.config, decision, payload, identity=lst.identity, **event)
        return done
    if isinstance(decision, Complete):
        return lst.complete(raw, decision.done)
    if isinstance(decision, Park):
        return lst.park_unsettled(raw, decision.record)
    if isinstance(decision, Suspend):
        job = payload or _parsed(decision.entry)
        done = lst.suspend(raw, decision.entry, str(job.get("jid") or ""), decision.cursor, decision.done)
        if done and hooks.wanted("suspended"):
            hooks.fire("suspended", job, identity=lst.identity, config=lst.config, **event)
        return done
    raise TypeError(f"not a decision: {decision!r}")


def filed(config: Any, decision: File, payload: dict[str, Any] | None = None, **event: Any) -> None:
    """The hooks of a filing that went through (``retrying``, or ``dead`` with its reason)."""
    name = "retrying" if decision.retrying else "dead"
    if not hooks.wanted(name):
        return
    job = payload if payload is not None else _parsed(decision.entry)
    event.setdefault("traceback", job.get("error_traceback"))
    if decision.retrying:
        hooks.fire(name, job, delay=decision.delay, reason=decision.reason, config=config, **event)
    else:
        hooks.fire(name, job, reason=decision.reason, config=config, **event)


def _parsed(entry: str | bytes) -> dict[str, Any]:
    try:
        value = json_loads(entry)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
