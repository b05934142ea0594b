"""The settle table: every decision (``fate``) is applied through ``TABLE``, one
transition per decision type, in every process (the worker and a prefork child for the
jobs they ran, what they still owe, the master for a dead child's jobs).

A transition writes its decision to a ``Target`` (an in-progress list, or a worker that
retries an ack until it is owed) and then fires the hooks of that write: after it went
through, never before, and never when the entry was no longer ours (docs/architecture.md#hooks).
An ack's transition in the ride-along mode writes nothing itself: it hands the ack to
the target's next fetch (``Target.carry``), which writes it in the job's one round trip;
``succeeded`` fires then, before that ack lands. ``payload`` given: the job's own
settlement, by the process that ran it (its ``succeeded`` fires, its log lines are
written); an owed decision applied again later passes none, so its hook fires once.
What a write raises (Redis away, ``Fenced``) is the caller's: the decision is then owed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from ..boundedjson import loads as json_loads
from ..config import logger
from . import hooks
from .fate import (
    REQUESTED,
    Ack,
    Cancel,
    Complete,
    Decision,
    Drop,
    Expire,
    File,
    GiveBack,
    Park,
    Suspend,
    max_retries,
)
from .workflow import Completion


class Target(Protocol):
    """Where a transition writes: ``InProgressList`` (its ``carry`` writes at once: it has
    no fetch to ride on), the worker's fetcher, or the worker (its ``acknowledge`` and
    ``complete`` retry, then owe; its ``carry`` holds the ack for its next fetch)."""

    identity: str
    config: Any

    def acknowledge(self, raw: bytes) -> None: ...

    def carry(self, raw: bytes, jid: str | None) -> None: ...

    def give_back(self, raw: bytes) -> bool: ...

    def file(self, raw: bytes, zset: str, score: float, entry: str | bytes) -> bool: ...

    def complete(self, raw: bytes, done: Completion) -> bool: ...

    def park_unsettled(self, raw: bytes, record: str) -> bool: ...

    def suspend(self, raw: bytes, entry: str, jid: str, cursor: str, done: int) -> bool: ...

    def cancelled(self, payload: dict[str, Any], event: dict[str, Any]) -> None: ...


Event = dict[str, Any]
Transition = Callable[[Target, bytes, Any, "dict[str, Any] | None", Event], bool]


def apply(to: Target, raw: bytes, decision: Decision, payload: dict[str, Any] | None = None, **event: Any) -> bool:
    """Writes ``decision`` for the entry ``raw`` through its transition; True if it took
    effect (the entry was still there, or the ack is handed to the next fetch).
    ``event``: more fields for the hooks (queue, error, duration, ...)."""
    return TABLE[type(decision)](to, raw, decision, payload, event)


def _ack(to: Target, raw: bytes, decision: Ack, payload: dict[str, Any] | None, event: Event) -> bool:
    if decision.ride:
        to.carry(raw, payload.get("jid") if payload is not None else None)
    else:
        to.acknowledge(raw)
    if payload is not None:
        # The success is final, only the ack's LREM is left (riding: not yet in Redis).
        hooks.fire("succeeded", payload, identity=to.identity, config=to.config, **event)
    return True


def _cancel(to: Target, raw: bytes, decision: Cancel, payload: dict[str, Any] | None, event: Event) -> bool:
    # Off the list since the cancel (cancel.lua): nothing to file, and no hook (the
    # operator's process fired ``cancelled``); the LREM left is a no-op, written as an ack.
    if decision.ride:
        to.carry(raw, payload.get("jid") if payload is not None else None)
    else:
        to.acknowledge(raw)
    if payload is not None:
        to.cancelled(payload, event)  # the worker's log line and history entry of the run
    return True


def _expire(to: Target, raw: bytes, decision: Expire, payload: dict[str, Any] | None, event: Event) -> bool:
    # Written at once, never riding: an expiry is rare, and its hook follows the write.
    to.acknowledge(raw)
    if payload is not None:
        logger.info(
            "expired: %s jid=%s was still waiting at its expiry; not run",
            payload.get("class"),
            payload.get("jid"),
            extra={"event": "job_expired", "jid": payload.get("jid"), "job_class": payload.get("class")},
        )
        hooks.fire("expired", payload, identity=to.identity, config=to.config, **event)
    return True


def _drop(to: Target, raw: bytes, decision: Drop, payload: dict[str, Any] | None, event: Event) -> bool:
    to.acknowledge(raw)
    return True


def _give_back(to: Target, raw: bytes, decision: GiveBack, payload: dict[str, Any] | None, event: Event) -> bool:
    done = to.give_back(raw)
    if done and hooks.wanted("given_back"):
        hooks.fire("given_back", payload or _parsed(raw), identity=to.identity, config=to.config, **event)
    return done


def _file(to: Target, raw: bytes, decision: File, payload: dict[str, Any] | None, event: Event) -> bool:
    if payload is not None:
        log_failure(payload, decision, event.get("queue"), event.get("duration"))
    done = to.file(raw, decision.zset, decision.score, decision.entry)
    if done:
        filed(to.config, decision, payload, identity=to.identity, **event)
    return done


def _complete(to: Target, raw: bytes, decision: Complete, payload: dict[str, Any] | None, event: Event) -> bool:
    done = to.complete(raw, decision.done)
    if done and payload is not None:
        hooks.fire("succeeded", payload, identity=to.identity, config=to.config, **event)
    return done


def _park(to: Target, raw: bytes, decision: Park, payload: dict[str, Any] | None, event: Event) -> bool:
    return to.park_unsettled(raw, decision.record)


def _suspend(to: Target, raw: bytes, decision: Suspend, payload: dict[str, Any] | None, event: Event) -> bool:
    job = payload or _parsed(decision.entry)
    done = to.suspend(raw, decision.entry, str(job.get("jid") or ""), decision.cursor, decision.done)
    if done and hooks.wanted("suspended"):
        hooks.fire("suspended", job, identity=to.identity, config=to.config, **event)
    if payload is not None:
        logger.info(
            "iterable jid=%s stopped after %d item(s), back on queue %s",
            job.get("jid"),
            decision.done,
            event.get("queue"),
        )
    return done


# The one table from decision type to transition (tests/test_settle_table.py checks that
# every decision type has exactly one entry, and that nothing else tests their types).
TABLE: dict[type, Transition] = {
    Ack: _ack,
    Cancel: _cancel,
    Drop: _drop,
    GiveBack: _give_back,
    File: _file,
    Complete: _complete,
    Park: _park,
    Suspend: _suspend,
    Expire: _expire,
}


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


def log_failure(
    payload: dict[str, Any], decision: File, queue: str | None = None, duration: float | None = None
) -> None:
    """One line (then its traceback) for a failed run: where it went, ``retry in 45s
    (attempt 3/25)`` at WARNING, or ``dead`` at ERROR (docs/architecture.md#logs); a retry
    the job asked for (``cogworker.Retry``) at INFO: no failure."""
    if decision.reason == REQUESTED:
        logger.info(
            "retry requested: %s jid=%s, runs again in %.0fs",
            payload.get("class"),
            payload.get("jid"),
            decision.delay,
            extra={"event": "job_retry_requested", "jid": payload.get("jid"), "job_class": payload.get("class")},
        )
        return
    if decision.retrying:
        where = f"retry in {decision.delay:.0f}s (attempt {payload.get('retry_count')}/{max_retries(payload)})"
    else:
        where = "dead"
    trace = payload.get("error_traceback")
    extra = {
        "event": "job_failed",
        "jid": payload.get("jid"),
        "job_class": payload.get("class"),
        "queue": queue or payload.get("queue"),
        "outcome": "retried" if decision.retrying else "dead",
        "duration_ms": None if duration is None else round(duration * 1000, 3),
        "traceback": trace,
    }
    logger.log(
        logging.WARNING if decision.retrying else logging.ERROR,
        "fail: %s jid=%s: %s: %s; %s%s",
        payload.get("class"),
        payload.get("jid"),
        payload.get("error_class"),
        payload.get("error_message"),
        where,
        "\n" + trace if trace else "",
        extra=extra,
    )


def _parsed(entry: str | bytes) -> dict[str, Any]:
    try:
        value = json_loads(entry)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
