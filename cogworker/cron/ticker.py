"""Periodic (cron) jobs: entries registered at import, each slot fired once fleet-wide.

No leader: every master runs a ``Ticker``; one Lua claim per slot (a per-slot NX lock,
``last_slot`` and, for ``unique`` entries, the running lock) lets exactly one of them
push the slot's job (cron/claims.py). A claim whose push fails, or whose reply is lost,
is settled before the entry moves on, so the slot isn't lost.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .. import store
from ..boundedjson import loads as json_loads
from ..config import Config, logger
from ..core.payload import JobOptions, dumps
from ..core.registry import JobDef, registry
from ..errors import ConfigurationError
from ..names import JOB_NAME_MAX, check_job_name, problem, shown
from ..store import EncodableT, guard
from ..store import errors as redis_errors
from .claims import (  # noqa: F401 (the running lock's names, re-exported: their home was here)
    QUEUED_TTL,
    RUNNING_GRACE,
    RUNNING_TTL,
    TICK_INTERVAL,
    InDoubt,
    SlotClaims,
    as_int,
    extend_running_lock,
    release_running_lock,
    running_ttl,
)
from .control import disable, disabled, enable, run_now, schedule  # noqa: F401 (re-exported: their home was here)
from .entry import Entry
from .expr import check_cron, cron_iter

entries: dict[str, Entry] = {}

NOT_READY_WAIT = 0.2
OUTAGE_WAIT = 0.5
PUBLISH_RETRY = 60.0  # a schedule that couldn't be published at boot is tried again this often


def periodic(
    cron: str,
    job: JobDef | str,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    name: str | None = None,
    queue: str | None = None,
    unique: bool = False,
    tz: str = "UTC",
    catch_up: bool | None = None,
) -> Entry:
    """Register a cron entry (at import time, in the app module). Returns the entry.

    ``cron``: five fields, or six with **seconds first** (``"*/10 * * * * *"`` = every
    10 s), as Quartz, Spring and sidekiq-cron read them (see ``check_cron``). ``name``
    (the pjid) defaults to one derived from the job, the schedule and the arguments.
    ``unique``: skip a slot while the previous run is still queued or running.
    ``catch_up`` (None = the master's setting, on by default): a slot missed while no
    master ran fires once at boot; off, it is skipped.
    """
    job_name = job.name if isinstance(job, JobDef) else job
    if not isinstance(job_name, str) or not job_name:
        raise ConfigurationError(f"periodic: job must be a @job function or a job name, got {job!r}")
    check_job_name(job_name)
    if name is not None and problem(name, JOB_NAME_MAX) is not None:
        raise ConfigurationError(f"periodic entry for {job_name}: name {shown(name)} {problem(name, JOB_NAME_MAX)}")
    label = name or job_name
    _check_options(label, cron, tz, args, kwargs, catch_up)
    args = tuple(args)
    kwargs = dict(kwargs or {})
    dumps([list(args), kwargs])  # TypeError now, at import, not at the first slot
    known = job if isinstance(job, JobDef) else registry.get(job_name)
    opts = known.opts if known is not None else None
    if queue is not None:
        try:
            JobOptions.build(queue=queue)
        except ConfigurationError as exc:
            raise ConfigurationError(f"periodic entry {label!r}: {exc}") from None
    pjid = name or derived_name(job_name, cron, args, kwargs)
    if pjid in entries:
        raise ConfigurationError(f"periodic entry {pjid!r} is registered twice; give each a distinct name=")
    if known is not None:
        try:
            known.check_arguments(args, kwargs)  # at import, not at every slot in a worker
        except TypeError as exc:
            raise TypeError(f"periodic entry {pjid!r}: {exc}") from None
    entry = Entry(
        pjid,
        cron,
        job_name,
        args,
        kwargs,
        queue or (opts.queue if opts else "default"),
        opts.retry if opts else 25,
        bool(unique),
        tz,
        catch_up,
    )
    entries[pjid] = entry
    return entry


def _check_options(label: str, cron: str, tz: str, args: Any, kwargs: Any, catch_up: Any) -> None:
    """``periodic``'s arguments, checked at import: one clear error each."""
    check_cron(label, cron)
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(f"periodic entry {label!r}: unknown time zone {tz!r}") from None
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise ConfigurationError(f"periodic entry {label!r}: args must be a tuple or list, got {args!r}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ConfigurationError(f"periodic entry {label!r}: kwargs must be a dict, got {kwargs!r}")
    if catch_up is not None and not isinstance(catch_up, bool):
        raise ConfigurationError(f"periodic entry {label!r}: catch_up must be True, False or None")


def derived_name(job_name: str, cron: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    digest = hashlib.sha1(dumps([cron, list(args), kwargs]).encode()).hexdigest()[:10]
    return f"{job_name}@{digest}"


def run_options(entry: Entry) -> dict[str, Any]:
    """The job options a run of the entry gets, published with its schedule so that
    ``run_now`` (from a process that didn't import the app) enqueues the same job."""
    known = registry.get(entry.job_name)
    return {"retry": entry.retry, "timeout": known.opts.timeout if known is not None else None}


# -- the ticker ------------------------------------------------------------------------------


class Ticker(SlotClaims):
    """Fires the entries' slots. Call ``tick()`` in a loop, sleeping at most
    ``seconds_to_next()`` in between; ``publish()`` once at boot. Thread-safe. ``tick``
    never raises: one entry failing never stops the others.

    ``ready``: ticking waits until it returns True (the master's first orphan-recovery
    pass). ``catch_up``: this master's default for entries that don't set their own.
    ``clock``/``monotonic``: injectable for tests.
    """

    def __init__(
        self,
        config: Config,
        entry_list: Sequence[Entry],
        *,
        ready: Callable[[], bool] | None = None,
        catch_up: bool = True,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config.fleet  # periodic:* is the fleet's (a slot's push goes to its queue's part)
        self.entries = list(entry_list)
        self.ready = ready or (lambda: True)
        self.catch_up = catch_up
        self.clock = clock
        self.monotonic = monotonic
        self.published = False
        self._publish_at = 0.0  # monotonic; when tick may (re)try publishing
        self._lock = threading.RLock()
        self._checked: dict[str, int] = {}  # pjid -> the last slot this process looked at
        self._checked_next: dict[str, float] = {}  # pjid -> the fire time after that one
        self._slot: dict[str, int] = {}  # pjid -> its current slot at the last look
        self._next_fire: dict[str, float] = {}  # pjid -> the fire time after that slot
        self._in_doubt: list[InDoubt] = []
        # When a tick last ended with the entry looked at (clock), and when it last
        # couldn't be (Redis away, the entry failing or in doubt): a slot that came
        # outside a healthy stretch was missed by this process.
        self._ok_at: dict[str, float] = {}
        self._trouble_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}  # monotonic
        self._outage_since: float | None = None
        self._warned_unreadable = False

    # -- schedule arithmetic ----------------------------------------------------------------

    def slot_and_next(self, entry: Entry, now: float) -> tuple[int, float]:
        """The current slot (croniter's previous fire time, ``now`` itself included) and
        the next fire time after it."""
        tz = ZoneInfo(entry.tz)
        prev = cron_iter(entry.cron, datetime.fromtimestamp(now, tz)).get_prev(float)
        following = cron_iter(entry.cron, datetime.fromtimestamp(prev, tz)).get_next(float)
        if following <= now:  # croniter's previous is strictly before a start on a fire time
            prev = following
            following = cron_iter(entry.cron, datetime.fromtimestamp(prev, tz)).get_next(float)
        return int(prev), following

    def seconds_to_next(self) -> float:
        """How long the caller may sleep before the next ``tick``."""
        with self._lock:
            if not self.ready():
                return NOT_READY_WAIT
            now, mono = self.clock(), self.monotonic()
            blocked = {d.entry.pjid for d in self._in_doubt}
            wait = TICK_INTERVAL
            for entry in self.entries:
                # Never looked at, or a claim in doubt: at once (or after its backoff).
                at = now if entry.pjid in blocked else self._next_fire.get(entry.pjid, now)
                retry_at = self._retry_at.get(entry.pjid)
                if retry_at is not None and retry_at > mono:
                    at = max(at, now + retry_at - mono)
                wait = min(wait, at - now)
            if self._outage_since is not None:
                wait = max(wait, OUTAGE_WAIT)  # don't spin on a refused connection
            # A hair past the fire time, so the slot has arrived when the tick looks.
            return max(0.0, wait + 0.002)

    # -- boot ---------------------------------------------------------------------------------

    def publish(self) -> None:
        """Writes the schedule to Redis for the UI (cron, job, queue, next fire time, last
        fired slot and jid). A failure is logged, never raised: it must not stop a master."""
        with self._lock:
            self._publish_at = self.monotonic() + PUBLISH_RETRY
            try:
                self._publish()
                self.published = True
            except Exception as exc:  # never raised: it must not stop a master; the one policy logs it
                guard.handle("periodic schedule not published: publishing it", exc, config=self.config)

    def _publish(self) -> None:
        keys = self.config.keys
        client = self.config.redis()
        pipe = store.pipeline(client)
        for entry in self.entries:
            pipe.get(keys.periodic_last_slot(entry.pjid))
        last_slots = pipe.execute(raise_on_error=False)
        previous = client.hmget(keys.periodic_schedule, [e.pjid for e in self.entries])
        now = self.clock()
        records: dict[EncodableT, EncodableT] = {}
        for entry, last, before in zip(self.entries, last_slots, previous, strict=True):
            record = self._record(entry, now)
            old = _loads(before)
            record["last_jid"] = old.get("last_jid")
            record["last_fired_at"] = old.get("last_fired_at")
            record["last_slot"] = as_int(last) if not isinstance(last, Exception) else old.get("last_slot")
            records[entry.pjid] = json.dumps(record)
        if records:
            client.hset(keys.periodic_schedule, mapping=records)

    def _record(self, entry: Entry, now: float) -> dict[str, Any]:
        _, following = self.slot_and_next(entry, now)
        return {
            "pjid": entry.pjid,
            "cron": entry.cron,
            "job": entry.job_name,
            "args": list(entry.args),
            "kwargs": entry.kwargs,
            "queue": entry.queue,
            "tz": entry.tz,
            "unique": entry.unique,
            "catch_up": self._catch_up(entry),
            "next_fire": following,
            **run_options(entry),
        }

    def _catch_up(self, entry: Entry) -> bool:
        return self.catch_up if entry.catch_up is None else entry.catch_up

    # -- ticking -----------------------------------------------------------------------------
    #
    # The rules for a slot this process couldn't fire on time (Redis away or refusing
    # writes, the entry failing, the process held up): a slot whose claim was made (or
    # may have landed) fires once it can, late. Of the slots that passed meanwhile, with
    # catch-up the latest fires (once, as at boot) and the older ones are skipped; without,
    # all of them are skipped. Either way one line says how many.

    def tick(self, raise_outage: bool = False) -> None:
        """Looks at every entry once: claims and pushes each slot that arrived.
        ``raise_outage``: an outage is raised (after its bookkeeping) for the caller's
        policy to log, as its process's one outage (``guard.Breaker``); else logged here."""
        with self._lock:
            if not self.ready():
                return
            if not self.published and self.monotonic() >= self._publish_at:
                self.publish()
            try:
                self._settle_in_doubt()
                self._tick_entries()
            except Exception as exc:  # sorted below: an outage retries next tick, else logged
                if not redis_errors.is_outage(exc):  # a bug here must not kill the caller's loop
                    logger.exception("periodic tick failed")
                    return
                # Redis away is not an entry failing: no backoff, every entry (and every
                # claim in doubt) is tried again on the next tick.
                redis_errors.reconnect_if_readonly(self.config, exc)
                now = self.clock()
                self._trouble_at.update((entry.pjid, now) for entry in self.entries)
                if self._outage_since is None:
                    self._outage_since = time.monotonic()
                    if not raise_outage:
                        logger.error("periodic: %s; retrying every tick", redis_errors.describe(exc))
                if raise_outage:
                    raise
                return
            if self._outage_since is not None and not raise_outage:
                logger.warning("periodic: Redis is back after %.1fs", time.monotonic() - self._outage_since)
            self._outage_since = None

    def _tick_entries(self) -> None:
        blocked = {d.entry.pjid for d in self._in_doubt}
        now = self.clock()
        looked = []
        for entry in self.entries:
            pjid = entry.pjid
            if pjid in blocked or self._backing_off(pjid):
                self._trouble_at[pjid] = now
                continue
            try:
                self._tick_entry(entry, now)
            except Exception as exc:  # one entry failing (any error) backs off alone
                if redis_errors.is_outage(exc):
                    raise
                self._trouble_at[pjid] = self.clock()
                delay = self._back_off(pjid)
                logger.error("periodic %s failed (next try in %.0fs): %s: %s", pjid, delay, type(exc).__name__, exc)
            else:
                self._failures.pop(pjid, None)
                self._retry_at.pop(pjid, None)
                looked.append(pjid)
        end = self.clock()
        self._ok_at.update((pjid, end) for pjid in looked)

    def _tick_entry(self, entry: Entry, now: float) -> None:
        pjid = entry.pjid
        checked = self._checked.get(pjid)
        if checked is not None and checked == self._slot.get(pjid) and now < self._next_fire[pjid]:
            return  # still the slot already looked at (the master may tick very often: skip croniter)
        slot, following = self.slot_and_next(entry, now)
        self._slot[pjid] = slot
        self._next_fire[pjid] = following
        if checked == slot:
            return
        on_time = self._on_time(pjid, slot)
        if self._catch_up(entry):
            if on_time and self._checked_next.get(pjid, slot) < slot:
                # Held up past a slot while all was well (a busy process, not Redis): that
                # slot fires late, then this one.
                previous = self.slot_and_next(entry, slot - 1)[0]
                self._claim(entry, previous, slot, "claim")
                self._mark_checked(pjid, previous, slot)
            self._claim(entry, slot, following, "claim")
        elif checked is None:
            self._claim(entry, slot, following, "prime")
        else:
            self._claim(entry, slot, following, "prime_new" if on_time else "skip")
        self._mark_checked(pjid, slot, following)

    def _on_time(self, pjid: str, slot: int) -> bool:
        """Whether this process was watching, with Redis answering, when ``slot`` came."""
        ok_at = self._ok_at.get(pjid)
        return ok_at is not None and ok_at <= slot and self._trouble_at.get(pjid, -math.inf) < ok_at


def ticker_for(config: Config, ready: Callable[[], bool] | None = None, catch_up: bool = True) -> Ticker | None:
    """The ticker for the registered entries, or None when there are none."""
    if not entries:
        return None
    return Ticker(config, list(entries.values()), ready=ready, catch_up=catch_up)


def _loads(raw: Any) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json_loads(raw)
    except (ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}
