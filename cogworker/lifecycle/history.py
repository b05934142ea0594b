"""Job status and history, as a lifecycle hook subscriber (the seeds' ``Status`` and
``History`` server middlewares). Both on by default (``configure(status=False,
history=False)`` turns them off); the cost, 0.4-6% of no-op throughput, is in docs/guides/status.md.
With history off, only the entries the attempts log reads are written (``_attempts_entry``).

- **status** (``status:<jid>``, a hash): the job's state (queued, scheduled, running,
  retrying, succeeded, dead), ``updated_at``, ``attempt``, ``queue``, ``class``, and while
  it runs the ``identity`` running it and ``started_at``. Kept ``status_ttl`` (24 h) after
  its last change (plus the wait, for a retry or a scheduled job).
- **history** (``history:<jid>``, a list capped at ``history_max``, kept ``history_ttl``):
  one JSON entry per execution: ``attempt``, ``started_at``, ``ended_at``, ``outcome``
  (succeeded, failed, orphaned, interrupted, timed_out, suspended, cancelled), ``went`` (succeeded, retrying,
  dead, queued), ``identity``, ``error_class``, ``error_message``, ``traceback``.

Off the hot path: a worker's events go into its ``Buffer`` (no Redis call), which a thread
of the worker writes once a second in one script call (``status_flush.lua``), so a reader
sees a worker's transitions up to about a second late. Events in processes without a
buffer (the master's reaped and hard-timed-out jobs, orphan recovery) are rare and
written at once. Enqueue-side states ride in the client's own pipeline (``enqueue_fields``).

The common path creates no key per job (docs/architecture.md#status-buckets): a job
pushed to a queue is one field of ``enq:<hour>`` (deleted as it finishes) and a success
on its first try, with no "running" written for it, one field of a bucket of the done
ring, ``done:<hour>:<seq>`` (its status and its history entry at once). Everything else
(running, retrying, dead, orphaned, a scheduled job, a success after any of those) is
written to ``status:<jid>``/``history:<jid>`` as before; readers (``api.status``/
``api.history``) merge the two.

Retention (docs/architecture.md#retention): the flush also trims what finished jobs leave,
by count (``status_max`` successes, ``status_max_failed`` dead jobs) and by age (the longer
of ``status_ttl``/``history_ttl``), a bounded amount per call: whole done buckets, and the
oldest of the ``retained:`` zsets with their keys.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from typing import Any

from ..config import Config, get_config
from ..core import hooks
from ..store import guard
from ..transitions import declare, retention
from .donering import HOUR, Done, enq_buckets, enq_spec, file_done, keep_seconds

FLUSH_INTERVAL = 1.0

# Every status write sets all of these fields (empty when one doesn't apply), so a write
# never needs a DEL first; updated_at travels on its own (the script compares it).
FIELDS = ("state", "attempt", "queue", "class", "identity", "started_at", "at", "error_class", "reason")

StatusWrite = tuple[str, float, int, dict[str, Any]]  # jid, updated_at, ttl, fields
# What a worker's event leaves in its buffer: the event and when (its status and history
# entry are built at flush time, off the job loop).
Pending = tuple["hooks.JobEvent", float]
PendingEntry = tuple["hooks.JobEvent", str, "float | None", float]  # event, outcome, started_at, ended_at
# The clock of the writes (the retained zsets' scores and the age bound): tests set it.
clock = time.time


def hour_of(t: float) -> int:
    """The epoch second the UTC hour holding ``t`` starts at (a bucket's name)."""
    return int(t // HOUR) * HOUR


def enq_ttl(config: Config) -> int:
    return config.status_ttl + HOUR


class Buffer:
    """One worker's pending status writes (the last event per jid) and history entries, and
    the runs it has going (``started``, noted by ``note_started``, no hook event): a run
    still going at a flush gets its "running" written then; one that ends before never
    does (docs/architecture.md#status-buckets)."""

    def __init__(self, identity: str = "") -> None:
        self.identity = identity
        self.lock = threading.Lock()
        self.status: dict[str, Pending] = {}
        self.entries: list[PendingEntry] = []
        self.done: list[Done] = []
        # jid -> (payload, queue, started_at): written by the job loop without the lock (a
        # dict item set is atomic); read with the lock held, by copy.
        self.started: dict[str, tuple[dict[str, Any], str, float]] = {}
        # Jids whose "running" this buffer wrote to status:<jid>: their end goes there too.
        self.running: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self, config: Config) -> tuple[list[Pending], list[PendingEntry], list[Done]]:
        with self.lock:
            status, entries, done = list(self.status.values()), self.entries, self.done
            self.status, self.entries, self.done = {}, [], []
            # Marked under the lock: a success filed after this sees it and goes to status:<jid>.
            for jid, (payload, queue, since) in self.started.copy().items() if config.status else ():
                if jid not in self.running:
                    self.running.add(jid)
                    status.append((hooks.JobEvent("started", payload, queue=queue, identity=self.identity), since))
        return status, entries, done

    def flush(self, config: Config) -> None:
        """Writes what is buffered in one call; on a Redis error it is dropped (logged by
        the policy): status and history are never worth holding a job up."""
        status, entries, done = self.take(config)
        if status or entries or done:
            guard.best_effort("writing job status/history", _write_pending, config, status, entries, True, done)

    def start(self, config: Config) -> None:
        """The flushing thread (a daemon: a process that dies loses at most a second)."""
        _noting[self.identity] = self
        if self._thread is None:  # always: with history off, failures are still written
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, args=(config,), name="cogworker-status", daemon=True)
            self._thread.start()

    def stop(self, config: Config) -> None:
        if _noting.get(self.identity) is self:
            del _noting[self.identity]
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self.flush(config)

    def _run(self, config: Config) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            self.flush(config)


_buffers: weakref.WeakValueDictionary[str, Buffer] = weakref.WeakValueDictionary()
_noting: dict[str, Buffer] = {}  # the started buffers, by identity (a plain dict: asked per job)


def buffering(identity: str) -> Buffer:
    """The buffer ``identity``'s own events go into (held by its worker, forgotten with it)."""
    buffer = _buffers.get(identity)
    if buffer is None:
        buffer = _buffers[identity] = Buffer(identity)
    return buffer


def note_started(config: Config, identity: str, queue: str, payload: dict[str, Any]) -> None:
    """A run begins (called by ``execute``, per job: no hook event is built for it). Only
    its worker's buffer hears of it; its "running" is written if it is still going at the
    next flush."""
    buffer = _noting.get(identity)
    if buffer is not None and (config.status or config.history):
        buffer.started[payload["jid"]] = (payload, queue, time.time())


def write(config: Config, status: list[StatusWrite], entries: list[tuple[str, str]]) -> None:
    """Status hashes (each compared with the stored one: an older one is skipped) and
    history entries, in one script call."""
    rows = [
        (jid, ttl, updated_at, True, [fields.get(name, "") for name in FIELDS])
        for jid, updated_at, ttl, fields in status
    ]
    _run(config, rows, entries)


def _write_pending(
    config: Config, status: list[Pending], entries: list[PendingEntry], buffered: bool, done: list[Done] | None = None
) -> None:
    rows = [_status_row(config, event, now, buffered) for event, now in status] if config.status else []
    gone: dict[int, list[str]] = {}  # enq spec -> the jids that finished: their enq: field goes
    for row, (event, _) in zip(rows, status, strict=True):
        if row[4][0] in ("succeeded", "dead"):
            gone.setdefault(enq_spec(event.payload.get("enqueued_at")), []).append(row[0])
    # With status off, rows don't say who finished: the history entries do (for the bounds).
    ended = (
        ""
        if config.status
        else "\n".join(
            f"{1 if went == 'succeeded' else 2}\t{event.payload['jid']}"
            for event, *_ in entries
            if (went := _state(event)) in ("succeeded", "dead")
        )
    )
    at = clock()
    if done:
        file_done(config, done, at)
    _run(
        config,
        rows,
        [
            (event.payload["jid"], json.dumps(_entry(event, outcome, started_at, now)))
            for event, outcome, started_at, now in entries
        ],
        bool(done),
        gone,
        ended,
        at,
    )


StatusRow = tuple[str, int, float, bool, list[Any]]  # jid, ttl, updated_at, compare, FIELDS' values


# The jobs the last flush said the next may shed (its hint), per namespace (its retained
# set): their keys are given to the next flush, which then takes one call, as when the
# script named them itself (a job shed that wasn't hinted costs a second).
_hints: dict[str, list[str]] = {}


def _run(
    config: Config,
    rows: list[StatusRow],
    entries: list[tuple[str, str]],
    done: bool = False,
    gone: dict[int, list[str]] | None = None,
    ended: str = "",
    now: float | None = None,
) -> None:
    """status_flush.lua: the status rows, the history entries and the retained zsets' trim
    (run after first-try successes too, ``done``, so that the age bound keeps trimming)."""
    k = config.keys
    rows = rows if config.status else []
    if not (rows or entries or done or gone):
        return
    jids = _hints.get(k.retained_succeeded, [])
    enq = [f"enq:{hour}" for spec in (gone or {}) for hour in enq_buckets(spec)]
    _hints[k.retained_succeeded] = retention.status_flush(
        config.redis(),
        k,
        statuses=[k.status(jid) for jid, *_ in rows],
        histories=[k.history(jid) for jid, _ in entries],  # already only the attempts-log ones when history is off
        retained_succeeded=k.retained_succeeded,
        retained_failed=k.retained_failed,
        declared=declare.declare(k, [*enq, *(f"{kind}:{jid}" for jid in jids for kind in ("status", "history"))]),
        history_max=config.history_max,
        history_ttl=config.history_ttl,
        now=repr(clock() if now is None else now),
        status_max=config.status_max,
        status_max_failed=config.status_max_failed,
        keep=keep_seconds(config),
        rows=[
            [jid, ttl, repr(updated_at), 1 if compare else 0, *values] for jid, ttl, updated_at, compare, values in rows
        ],
        entries=[entry for _, entry in entries],
        gone=[(spec, "\n".join(jids)) for spec, jids in (gone or {}).items()],
        ended=ended,
    )


def status_fields(
    payload: dict[str, Any], state: str, queue: str | None, now: float, reason: str | None = None
) -> dict[str, Any]:
    # A failure counts its attempt into retry_count; a process dying under the job doesn't.
    counted = state in ("retrying", "dead") and reason not in ("process_died", "requested")
    attempt = int(payload.get("retry_count") or 0) + (0 if counted else 1)
    return {
        "state": state,
        "updated_at": repr(now),
        "attempt": attempt,
        "queue": queue or payload.get("queue") or "",
        "class": payload.get("class") or "",
    }


_STATE = {
    "started": "running",
    "succeeded": "succeeded",
    "retrying": "retrying",
    "dead": "dead",
    "given_back": "queued",
    "orphaned": "queued",
    "suspended": "queued",
    "cancelled": "cancelled",
    "expired": "expired",
}


def _state(event: hooks.JobEvent) -> str:
    """Where the event sent the job: an orphan parked past ``max_orphanings`` (reason
    ``process_died``) goes to dead, not back on its queue."""
    if event.name == "orphaned" and event.reason == "process_died":
        return "dead"
    return _STATE[event.name]


def _outcome(event: hooks.JobEvent, ran_here: bool) -> str | None:
    """The history outcome of the execution this event ends, or None (no execution)."""
    name = event.name
    if name == "succeeded":
        return "succeeded"
    if name in ("retrying", "dead"):
        # "requested": it raised cogworker.Retry, a retry it asked for, not a failure.
        return {"failed": "failed", "interrupted": "failed", "timed_out": "timed_out", "requested": "retried"}.get(
            event.reason or ""
        )
    if name == "orphaned":
        if event.counted:
            return "orphaned"
        # Uncounted: its master killed the process running it (a shutdown's deadline): a
        # run that ended there; else it never started.
        return "interrupted" if event.reason == "killed" else None
    if name == "given_back":
        return "interrupted" if ran_here else None  # a stop-now during its run; else it never ran
    if name == "expired":  # not run: its entry says it expired
        return "expired"
    if name in ("suspended", "cancelled"):  # stopped at a yield (back on its queue); stopped by a cancel
        return name
    return None


def _attempts_entry(event: hooks.JobEvent) -> bool:
    """Whether the event ends an execution the attempts log keeps (``stats.attempts``): a
    failure, or a success after failures. With ``history`` off, only these are written."""
    if event.name == "succeeded":
        return bool(event.payload.get("retry_count"))
    return event.name in ("retrying", "dead") and event.reason in ("failed", "interrupted", "timed_out")


def _on_event(event: hooks.JobEvent) -> None:
    config = event.config or get_config()
    jid = event.payload.get("jid")
    if not isinstance(jid, str) or not jid or not (config.status or config.history or _attempts_entry(event)):
        return
    buffer = (_noting.get(event.identity) or _buffers.get(event.identity)) if event.identity else None
    now = time.time()
    if buffer is None:  # rare (the master, orphan recovery): written at once
        outcome = _outcome(event, False)
        keep = outcome is not None and (config.history or _attempts_entry(event))
        entries: list[PendingEntry] = [(event, outcome, None, now)] if keep and outcome else []
        _write_pending(config, [(event, now)], entries, False)
        return
    with buffer.lock:
        run = buffer.started.pop(jid, None)
        started_at = run[2] if run is not None else None
        buffer.running.discard(jid)
        if config.status:
            buffer.status[jid] = (event, now)
        outcome = _outcome(event, started_at is not None)
        if outcome is not None and (config.history or _attempts_entry(event)):
            buffer.entries.append((event, outcome, started_at, now))


def _on_success(event: hooks.JobEvent) -> None:
    """The common case, per job: a success in a worker, on its first try, with no
    "running" written for it (nor a scheduled status): one ``done:`` record, buffered.
    Any other goes to ``_on_event`` (docs/architecture.md#status-buckets)."""
    payload = event.payload
    if payload.get("retry_count") or payload.get("at"):
        return _on_event(event)
    config = event.config or get_config()
    if not (config.status or config.history):
        return None  # off: a first-try success writes nothing (one after failures went to _on_event)
    buffer = _noting.get(event.identity)  # type: ignore[arg-type]
    jid = payload.get("jid")
    if buffer is None or not jid:
        return _on_event(event)
    with buffer.lock:
        if jid not in buffer.running:
            run = buffer.started.pop(jid, None)
            buffer.done.append(
                (
                    jid,
                    event.queue or payload.get("queue") or "",
                    payload.get("class") or "",
                    1,
                    run[2] if run is not None else None,
                    time.time(),
                    event.identity,
                    payload.get("enqueued_at"),
                )
            )
            return
    _on_event(event)


def _status_row(config: Config, event: hooks.JobEvent, now: float, buffered: bool) -> StatusRow:
    """The status write of ``event``, in FIELDS' order. A success filed by the worker that
    ran it is not compared with the stored status: nothing newer than it can be there (the
    job is done; its only possible rerun, after a lost ack, ends in succeeded too). Every
    other write is compared (another process may have moved the job on since)."""
    payload = event.payload
    state = _state(event)
    fields = status_fields(payload, state, event.queue, now, event.reason)
    ttl = config.status_ttl
    running = state == "running"
    at = ""
    if state == "retrying":
        ttl += int(event.delay or 0)
        at = repr(now + (event.delay or 0))
    failed = state in ("retrying", "dead") and event.reason != "requested"
    values = [
        state,
        fields["attempt"],
        fields["queue"],
        fields["class"],
        (event.identity or "") if running else "",
        repr(now) if running else "",
        at,
        (event.error_class or payload.get("error_class") or "") if failed else "",
        (event.reason or "") if state in ("retrying", "dead") else "",
    ]
    compare = not (buffered and state == "succeeded")
    return payload["jid"], ttl, now, compare, values


def _entry(event: hooks.JobEvent, outcome: str, started_at: float | None, now: float) -> dict[str, Any]:
    payload = event.payload
    failed = outcome in ("failed", "timed_out")
    attempt = int(payload.get("retry_count") or 0) + (0 if failed else 1)
    went = _state(event)
    if started_at is None and event.duration is not None:
        started_at = now - event.duration
    return {
        "attempt": attempt,
        "started_at": started_at,
        "ended_at": now,
        "outcome": outcome,
        "went": went,
        "identity": event.identity,
        "queue": event.queue or payload.get("queue"),
        "error_class": (event.error_class or payload.get("error_class")) if failed else None,
        "error_message": (event.error_message or payload.get("error_message")) if failed else None,
        "traceback": (event.traceback or payload.get("error_traceback")) if failed else None,
    }


def _wanted(payload: dict[str, Any]) -> bool:
    """Asked before an event is built: with status and history off, only failures and a
    success after failures are written (the attempts log), so most jobs build no event."""
    config = get_config()
    return bool(config.status or config.history or payload.get("retry_count"))


def note_cancelled(payload: dict[str, Any], queue: str, identity: str, duration: float, config: Config) -> None:
    """A running job ended cancelled: its entry (not a hook: the operator's process fired it)."""
    _on_event(hooks.JobEvent("cancelled", payload, queue=queue, identity=identity, duration=duration, config=config))


def subscribers() -> list[hooks.Subscription]:
    """Status, history and the done ring's hooks, for a process to install (``hooks.install``).
    "started" is not one: execute tells the worker's buffer (``note_started``)."""
    return [
        hooks.Subscription(("retrying", "dead", "expired"), _on_event),
        # No filter to call per job: it asks the config itself.
        hooks.Subscription(("succeeded",), _on_success),
        hooks.Subscription(("given_back", "orphaned", "suspended"), _on_event, when=_wanted),
    ]
