"""What happened to a fetched job -> what to do with its in-progress entry: the one place
that decides a job's fate.

``decide(config, payload_or_raw, outcome)`` turns an *outcome* (what happened) into a
*decision* (what to write). Every process goes through it: the worker and a prefork child
for the jobs they run, the master for a dead child's jobs, orphan recovery for repeat
orphans. ``settlement.apply`` writes a decision and then fires the lifecycle hooks.

Decisions are small frozen values that cross the child -> master pipe as they are
(``to_wire``/``from_wire``); ``Owed`` is what a process still owes Redis, kept as
``raw -> Decision`` by the worker and as ``jid -> Decision`` by the master.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from ..boundedjson import loads as json_loads
from ..config import Config
from ..errors import Retry, Shutdown
from . import workflow
from .payload import default_backoff, error_class_name, error_message, error_traceback, jid_in
from .payload import parse_payload as parse_payload  # re-exported: its home was here
from .workflow import Completion

MAX_INTERRUPTS = 3
REQUESTED = "requested"  # a filing's reason when the job raised cogworker.Retry (not counted)
INTERRUPT_DELAY = 30  # seconds, times the interruption count
RAW_PAYLOAD_LIMIT = 100_000

Backoff = Callable[[int, BaseException], float]
# Whether a job's error is retried at all (its ``retry_on``/``no_retry_on``: ``JobDef.retries``).
Retryable = Callable[[BaseException], bool]

# -- outcomes: what happened to a fetched job ---------------------------------------------


class Succeeded(NamedTuple):  # made per job: a named tuple costs half a frozen dataclass
    duration: float = 0.0
    value: Any = None  # what the job returned (kept only for a job of a workflow)


@dataclass(frozen=True)
class Raised:
    """It ran and raised ``error``; ``backoff(count, error)``: the delay before the next try;
    ``retries(error)``: whether it is retried at all (None: any error is, while retries last)."""

    error: BaseException
    backoff: Backoff = default_backoff
    duration: float = 0.0
    retries: Retryable | None = None


@dataclass(frozen=True)
class Cancelled:
    """It ran, and an operator cancelled it meanwhile (``api.cancel``): ``cancel.lua``
    already took its entry off the list and marked it, whatever it then did (returned,
    raised ``CancelledError`` or anything else). Not retried, not dead."""

    duration: float = 0.0


@dataclass(frozen=True)
class NeverStarted:
    """Fetched, not run: a stop, quiet, a look-ahead returned, a stop-now before it ran."""


NEVER_STARTED = NeverStarted()  # fieldless: one instance serves (the worker's default outcome, per job)


@dataclass(frozen=True)
class Abandoned:
    """A stop-now during its run: handed back, not failed."""


@dataclass(frozen=True)
class Orphaned:
    """Its process died running it (``counted``: an orphaning is counted for it), or it
    was only listed."""

    counted: bool = False


@dataclass(frozen=True)
class TimedOut:
    """Killed past its hard timeout: filed as failed (through its backoff), not orphaned."""

    error: BaseException
    backoff: Backoff = default_backoff


@dataclass(frozen=True)
class Expired:
    """Still waiting at its ``expires_at``: not run, off the list, recorded as expired."""

    expires_at: float


@dataclass(frozen=True)
class Unreadable:
    why: str


@dataclass(frozen=True)
class FilingFailed:
    """It ran and failed, but filing that failure failed: an interruption record."""

    error: BaseException


@dataclass(frozen=True)
class Leaving:
    """Its process leaves for good with ``owed`` (its settlement) still not written: an
    ack is dropped (dropping the entry is the ack), a filing parked (never re-run)."""

    owed: Decision


@dataclass(frozen=True)
class Suspended:
    """An iterable job stopped at a ``yield`` (a stop, quiet, recycling): ``cursor`` (its
    JSON text) and ``done`` (items done over all its runs) are where it resumes. Neither a
    failure nor a retry (docs/architecture.md#iterable)."""

    cursor: str
    done: int
    duration: float = 0.0


Outcome = (
    Succeeded
    | Raised
    | Cancelled
    | NeverStarted
    | Abandoned
    | Orphaned
    | TimedOut
    | Unreadable
    | FilingFailed
    | Leaving
    | Suspended
    | Expired
)

# -- decisions: what to write ------------------------------------------------------------
#
# Each decision type has one transition, the function that writes it (``settlement.TABLE``).
# Two facts about each are read by the worker and its reporter, never re-derived from the
# outcome: ``ran`` (what the run counts as: a success True, a failure False, None for no
# run of its own), ``told_after`` (the process's record says the job finished only once
# the write went through: until then a death re-runs it, as for any job still running) and
# ``ack_due`` (the record says it ran and must be dropped, never requeued, until its
# ack is known to have landed).


@dataclass(frozen=True)
class Ack:
    """Succeeded: off the list. ``ride``: the ride-along mode, the ack held for this
    process's next fetch, which writes it in its own round trip (one round trip a job)."""

    ride: bool = False
    ran: ClassVar[bool | None] = True
    told_after: ClassVar[bool] = False
    ack_due: ClassVar[bool] = True

    def to_wire(self) -> Any:
        return "ack"


@dataclass(frozen=True)
class Cancel:
    """Ran, and an operator cancelled it meanwhile: ``cancel.lua`` already took its entry
    off the list and marked it, so what is left is a no-op LREM (``ride``: on the next
    fetch, as an ack). Neither a success nor a failure."""

    ride: bool = False
    ran: ClassVar[bool | None] = None
    told_after: ClassVar[bool] = False
    ack_due: ClassVar[bool] = True

    def to_wire(self) -> Any:
        return "drop"


@dataclass(frozen=True)
class GiveBack:
    """Never ran: back on its queue."""

    ran: ClassVar[bool | None] = None
    told_after: ClassVar[bool] = False
    ack_due: ClassVar[bool] = False

    def to_wire(self) -> Any:
        return "give_back"


@dataclass(frozen=True)
class Drop:
    """Finished, only the ack is missing: dropping the entry is the ack."""

    ran: ClassVar[bool | None] = None
    told_after: ClassVar[bool] = False
    ack_due: ClassVar[bool] = True

    def to_wire(self) -> Any:
        return "drop"


@dataclass(frozen=True)
class File:
    """``entry`` into ``zset`` (retry or dead) at ``score``, off the in-progress list.
    ``reason``: "failed" | "interrupted" | "timed_out" | "bad_payload" | "process_died" |
    "requested" (the job raised ``cogworker.Retry``: no failure)."""

    zset: str
    score: float
    entry: str
    retrying: bool
    delay: float = 0.0
    reason: str = "failed"
    told_after: ClassVar[bool] = True
    ack_due: ClassVar[bool] = False

    @property
    def ran(self) -> bool | None:
        """A failure, but for a retry the job asked for: no run of its own to count."""
        return None if self.reason == REQUESTED else False

    def record(self) -> str:
        """What ``unsettled`` holds for it: any live process can file it from this alone."""
        return json.dumps({"set": self.zset, "score": self.score, "payload": self.entry})

    def to_wire(self) -> Any:
        return ("file", self.zset, self.score, self.entry, self.retrying, self.delay, self.reason)


@dataclass(frozen=True)
class Park:
    """Into ``unsettled``: a failure that can't be filed now, never re-run."""

    record: str
    ran: ClassVar[bool | None] = None
    told_after: ClassVar[bool] = True
    ack_due: ClassVar[bool] = False

    def to_wire(self) -> Any:
        return ("park", self.record)


@dataclass(frozen=True)
class Suspend:
    """Back on its queue with its cursor: ``entry`` (the payload with ``iter_cursor`` and
    ``iter_done``) pushed, its checkpoint saved and the listed entry removed, in one
    script (``suspend.lua``)."""

    entry: str
    cursor: str
    done: int
    ran: ClassVar[bool | None] = None
    told_after: ClassVar[bool] = False
    ack_due: ClassVar[bool] = False

    def to_wire(self) -> Any:
        return ("suspend", self.entry, self.cursor, self.done)


@dataclass(frozen=True)
class Expire:
    """Expired before it ran (``expires``): off the list (``ack.lua``), no run, the
    ``expired`` hook (its status, history entry and count)."""

    ran: ClassVar[bool | None] = None
    told_after: ClassVar[bool] = False
    ack_due: ClassVar[bool] = True

    def to_wire(self) -> Any:
        return "expire"


@dataclass(frozen=True)
class Complete:
    """A workflow job's success: its ack, with its result, its chain's next step and its
    group's counter, in one script (``complete.lua``; docs/architecture.md#workflows).
    Never dropped like a plain ack: owed until it lands, applied by the master for a dead
    child. Told after the write: a child killed before it landed left the job running in
    its record, so it runs again, and its result and callbacks are written once."""

    done: Completion
    ran: ClassVar[bool | None] = True
    told_after: ClassVar[bool] = True
    ack_due: ClassVar[bool] = True

    def to_wire(self) -> Any:
        return ("complete", *self.done)


Decision = Ack | Cancel | GiveBack | Drop | File | Park | Suspend | Complete | Expire
DECISIONS: tuple[type[Decision], ...] = (Ack, Cancel, GiveBack, Drop, File, Park, Suspend, Complete, Expire)
ACK, GIVE_BACK, DROP, EXPIRE = Ack(), GiveBack(), Drop(), Expire()
RIDE = Ack(ride=True)  # a success whose ack rides on the next fetch
CANCEL, CANCEL_RIDE = Cancel(), Cancel(ride=True)
_PLAIN: dict[str, Decision] = {"ack": ACK, "give_back": GIVE_BACK, "drop": DROP, "expire": EXPIRE}


def from_wire(value: Any) -> Decision:
    if isinstance(value, str):
        return _PLAIN[value]
    if value[0] == "file":
        return File(*value[1:])
    if value[0] == "suspend":
        return Suspend(*value[1:])
    if value[0] == "complete":
        return Complete(Completion(*value[1:]))
    return Park(value[1])


# -- the decision ------------------------------------------------------------------------


def decide(config: Config, job: dict[str, Any] | bytes, outcome: Outcome, ride: bool = False) -> Decision:
    """The one decision. ``job``: the payload as run (updated in place with the failure
    fields when it failed), or the entry as fetched when it was never parsed. ``ride``:
    this process has a next fetch for an ack to ride on (the ride-along mode)."""
    if isinstance(outcome, Succeeded):
        if isinstance(job, dict) and isinstance(job.get("wf"), dict):
            # Raises TypeError when its value can't be kept: the caller fails the job with it.
            return Complete(workflow.completion(job, outcome.value, config.result_ttl))
        return RIDE if ride else ACK
    if isinstance(outcome, Cancelled):
        return CANCEL_RIDE if ride else CANCEL
    if isinstance(outcome, (NeverStarted, Abandoned, Orphaned)):
        return GIVE_BACK
    if isinstance(outcome, Raised):
        if isinstance(outcome.error, Shutdown):  # raised at a shutdown deadline: an interruption
            return GIVE_BACK
        return route_failure(config, _payload(job), outcome.error, outcome.backoff, outcome.retries)
    if isinstance(outcome, TimedOut):
        return timed_out(config, _payload(job), outcome.error, outcome.backoff)
    if isinstance(outcome, Leaving):
        return _on_leaving(outcome.owed)
    if isinstance(outcome, Suspended):
        return suspension(_payload(job), outcome)
    if isinstance(outcome, Expired):
        return EXPIRE
    if isinstance(outcome, Unreadable):
        raw = _raw(job)
        return plain_dead(config, raw, "cogworker.BadPayload", outcome.why, jid_in(raw), reason="bad_payload")
    if isinstance(outcome, FilingFailed):
        return filing_failed(config, _raw(job), outcome.error)
    raise TypeError(f"not an outcome: {outcome!r}")


def undecided(outcome: Outcome, exc: Exception) -> Outcome | None:
    """``decide`` raised ``exc``: a success whose value can't be kept is a failure with
    it (the outcome returned, decided in turn); a failure that can't be recorded (None)
    is filed as an interruption (``filing_failed``). Anything else raises ``exc``."""
    if isinstance(outcome, Succeeded):
        return Raised(exc, default_backoff, outcome.duration)
    if isinstance(outcome, Raised):
        return None
    raise exc


def timed_out(config: Config, payload: dict[str, Any], error: BaseException, backoff: Backoff) -> File:
    """Killed past its hard timeout: filed as failed through its backoff, reason ``timed_out``."""
    return _with_reason(route_failure(config, payload, error, backoff), "timed_out")


def filing_failed(config: Config, raw: bytes, error: BaseException) -> File:
    """It ran and failed, but filing that failed: an interruption record, or (not even
    the fetched entry can be rebuilt into one) the simplest dead one."""
    try:
        return interruption(config, raw, error)
    except Exception:
        return plain_dead(config, raw, error_class_name(error), error_message(error), jid_in(raw), reason="interrupted")


def owed_by_dead(owes: dict[str, Decision], acks: Iterable[str]) -> dict[str, Decision]:
    """What a dead child still owes Redis, by jid: an owed filing or completion as it is
    (a completion carries its result and callbacks: applied, never dropped), an ack
    (owed, due, or riding on a fetch) dropped: dropping the entry is the ack."""
    decisions: dict[str, Decision] = {jid: how for jid, how in owes.items() if isinstance(how, (File, Complete))}
    for jid, how in owes.items():
        if isinstance(how, (Ack, Cancel, Drop, Expire)):
            decisions[jid] = DROP
    for jid in acks:
        if not isinstance(decisions.get(jid), Complete):
            decisions[jid] = DROP
    return decisions


def dropped(decision: Decision) -> bool:
    """Written by the leaving process's requeue script, which drops the entry (the ack)."""
    return isinstance(decision, Drop)


def refused(decision: Decision) -> Decision | None:
    """What to write when Redis refuses ``decision`` on another process's behalf: a
    filing is parked in ``unsettled`` (never re-run); anything else stays listed (None)."""
    return Park(decision.record()) if isinstance(decision, File) else None


def suspension(payload: dict[str, Any], outcome: Suspended) -> Suspend:
    """The job as it goes back on its queue: its payload carries the cursor, so it resumes
    there even once its checkpoint record has expired (a long wait in its queue)."""
    payload.update(iter_cursor=json_loads(outcome.cursor), iter_done=outcome.done)
    return Suspend(json.dumps(payload), outcome.cursor, outcome.done)


def _on_leaving(owed: Decision) -> Decision:
    if isinstance(owed, (Ack, Cancel, Drop, Expire)):
        return DROP
    if isinstance(owed, File):
        return Park(owed.record())
    return owed


def _with_reason(filing: File, reason: str) -> File:
    return File(filing.zset, filing.score, filing.entry, filing.retrying, filing.delay, reason)


def _payload(job: dict[str, Any] | bytes) -> dict[str, Any]:
    return job if isinstance(job, dict) else json_loads(job)


def _raw(job: dict[str, Any] | bytes) -> bytes:
    return job if isinstance(job, bytes) else json.dumps(job).encode()


def max_retries(payload: dict[str, Any]) -> int:
    retry = payload.get("retry", 25)
    if retry is False:
        return 0
    if retry is True:
        return 25
    try:
        return max(0, int(retry))
    except (TypeError, ValueError):
        return 25


def route_failure(
    config: Config, payload: dict[str, Any], error: BaseException, backoff: Backoff, retries: Retryable | None = None
) -> File:
    """The retry/dead record for a job that ran and raised ``error``; ``payload`` is
    updated with the failure fields (it is the job as it will be stored). ``retries``:
    whether this error is retried at all (the job's ``retry_on``/``no_retry_on``); a
    ``cogworker.Retry`` always is, at its own delay, and not counted unless it asks."""
    if isinstance(error, Retry) and not error.count:
        return requested(config, payload, error)
    now = time.time()
    count = int(payload.get("retry_count") or 0) + 1
    payload.update(
        retry_count=count, error_class=error_class_name(error), error_message=error_message(error), failed_at=now
    )
    _with_traceback(config, payload, error)
    if isinstance(error, Retry):
        if count <= max_retries(payload):
            return File(config.keys.retry, now + error.in_, json.dumps(payload), True, error.in_)
    elif count <= max_retries(payload) and (retries is None or retries(error)):
        delay = float(backoff(count, error))
        return File(config.keys.retry, now + delay, json.dumps(payload), True, delay)
    return File(config.keys.dead, now, json.dumps(payload), False)


def requested(config: Config, payload: dict[str, Any], error: Retry) -> File:
    """A job raised ``cogworker.Retry(in_=...)``: into ``retry`` at that delay, its
    ``retry_count`` and failure fields untouched (no failure). Not limited by its retry
    budget, so ``retries_requested`` caps it: past ``Retry.MAX_REQUESTED`` it is dead."""
    now = time.time()
    asked = int(payload.get("retries_requested") or 0) + 1
    payload["retries_requested"] = asked
    if asked > Retry.MAX_REQUESTED:
        payload.update(
            retry_count=int(payload.get("retry_count") or 0) + 1,
            error_class=error_class_name(error),
            error_message=f"asked to be retried (cogworker.Retry) more than {Retry.MAX_REQUESTED} times",
            failed_at=now,
        )
        payload.pop("error_traceback", None)
        return File(config.keys.dead, now, json.dumps(payload), False)
    return File(config.keys.retry, now + error.in_, json.dumps(payload), True, error.in_, reason=REQUESTED)


def _with_traceback(config: Config, payload: dict[str, Any], error: BaseException) -> None:
    """``error_traceback``: the failure's own (capped), or none (an error built by the
    master, a hard timeout, has no frames: an older one from a previous try is dropped)."""
    text = error_traceback(error, config.traceback_lines)
    if text is None:
        payload.pop("error_traceback", None)
    else:
        payload["error_traceback"] = text


def interruption(config: Config, raw: bytes, error: BaseException) -> File:
    """The record for a job that ran and failed, but whose failure could not be filed.

    Built from the payload as fetched (always JSON) plus the failure fields, never from
    the in-memory job: whatever made that one fail to serialize must not do it again.
    Never back on the queue: a write that fails every time would re-run it forever.
    """
    payload = json_loads(raw)
    count = int(payload.get("interrupted_count") or 0) + 1
    attempt = int(payload.get("retry_count") or 0) + 1
    now = time.time()
    payload.update(
        interrupted_count=count,
        retry_count=attempt,
        error_class=error_class_name(error),
        error_message=error_message(error),
        failed_at=now,
    )
    _with_traceback(config, payload, error)
    if attempt > max_retries(payload) or count > MAX_INTERRUPTS:
        return File(config.keys.dead, now, json.dumps(payload), False, reason="interrupted")
    delay = INTERRUPT_DELAY * count
    return File(config.keys.retry, now + delay, json.dumps(payload), True, delay, reason="interrupted")


def plain_dead(
    config: Config, raw: bytes, error_class: str, message: str, jid: str | None = None, reason: str = "bad_payload"
) -> File:
    """The simplest dead entry: for what isn't a job at all, or can't be built into one."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    entry: dict[str, Any] = {
        "error_class": error_class,
        "error_message": message,
        "failed_at": time.time(),
        "raw_payload": text[:RAW_PAYLOAD_LIMIT],
    }
    if jid:
        entry["jid"] = jid
    return File(config.keys.dead, entry["failed_at"], json.dumps(entry), False, reason=reason)


class Owed:
    """What a process still owes Redis: ``raw -> Decision`` (an ``Ack`` or a ``File``).

    Kept so that the process's own reconcile finishes them instead of mistaking the
    entry for a stray and re-running a job that already ran.
    """

    def __init__(self) -> None:
        self.items: dict[bytes, Decision] = {}

    def add(self, raw: bytes, decision: Decision) -> None:
        self.items[raw] = decision

    def pop(self, raw: bytes) -> None:
        self.items.pop(raw, None)

    def __contains__(self, raw: object) -> bool:
        return raw in self.items

    def __len__(self) -> int:
        return len(self.items)

    def acks(self) -> list[bytes]:
        return [raw for raw, how in self.items.items() if isinstance(how, Ack)]

    def filings(self) -> dict[bytes, File]:
        return {raw: how for raw, how in self.items.items() if isinstance(how, File)}
