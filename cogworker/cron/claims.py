"""Claiming a periodic entry's slot, pushing its job, and settling a claim that didn't
go all the way (a lost reply, a failed push). The ``Ticker`` (cron/ticker.py) decides which
slot to claim when; this part does it, fleet-safe: one Lua claim per slot."""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from .. import routing, store
from ..config import Config, get_config, logger
from ..core import hooks
from ..core.payload import JobOptions, build_payload, new_jid
from ..core.registry import registry
from ..store import errors as redis_errors
from ..store import guard
from ..transitions import periodic, push
from .entry import Entry

NOT_OURS, CLAIMED, PRIMED, SKIPPED_RUNNING, SKIPPED_DISABLED, SKIPPED_MISSED = 0, 1, 2, 3, 4, 5
PUSHED = 6  # reclaim: the slot's push had landed after all (its reply was lost); detail = its jid
COUNT_CAP = 1000  # missed slots counted for the log line at most (then "1000+")
TICK_INTERVAL = 5.0  # the ticker looks at least this often, whatever the schedules
BACKOFF_MAX = 300.0  # a failing entry is retried after 5 s, 10 s, 20 s ... up to this
# The running lock of a unique entry: held while its job is queued, then while it runs.
# Only a safety net: the job's end (success, dead, buried orphan) releases it.
QUEUED_TTL = 3600
RUNNING_TTL = 3600  # for a job without a timeout; otherwise its timeout + RUNNING_GRACE
# Past the timeout: covers the hard kill's grace and an orphaned run's wait for recovery
# (orphan threshold + a recovery pass), so the lock doesn't lapse before the run is requeued.
RUNNING_GRACE = 300


# -- the running lock of a unique entry's job ---------------------------------------------------
# Taken with the slot's claim; after that it follows the job through the lifecycle hooks,
# in whichever process makes the transition. Best-effort: it never changes a job's fate.


def release_running_lock(config: Config, pjid: str, jid: str) -> None:
    """Frees the entry for its next slot, if this job still holds the lock."""
    push.release_lock(config.redis(), lock=config.keys.periodic_running(pjid), owner=jid)


def extend_running_lock(config: Config, pjid: str, jid: str, ttl: float) -> None:
    """Keeps the lock while its job runs or waits (only if this job holds it)."""
    push.extend_lock(config.redis(), lock=config.keys.periodic_running(pjid), owner=jid, ttl=max(1, math.ceil(ttl)))


def running_ttl(payload: dict[str, Any]) -> float:
    timeout = payload.get("timeout")
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        return float(timeout) + RUNNING_GRACE
    return RUNNING_TTL


def _on_started(event: hooks.JobEvent) -> None:
    """The run starts: from the queued TTL to one that covers the run."""
    payload = event.payload
    if payload.get("periodic_pjid") and payload.get("jid"):
        extend_running_lock(fleet_of(event.config), payload["periodic_pjid"], payload["jid"], running_ttl(payload))


def _on_retrying(event: hooks.JobEvent) -> None:
    """Not done yet: kept over the retry's wait, so the next slot doesn't overlap it."""
    payload = event.payload
    if payload.get("periodic_pjid") and payload.get("jid"):
        extend_running_lock(
            fleet_of(event.config), payload["periodic_pjid"], payload["jid"], (event.delay or 0.0) + QUEUED_TTL
        )


def _on_finished(event: hooks.JobEvent) -> None:
    """Succeeded or dead: the entry is free for its next slot."""
    payload = event.payload
    if payload.get("periodic_pjid") and payload.get("jid"):
        release_running_lock(fleet_of(event.config), payload["periodic_pjid"], payload["jid"])


def fleet_of(config: Config | None) -> Config:
    """The config of the fleet's keys (``periodic:*``): a worker's events carry its part's."""
    return (config or get_config()).fleet


def subscribers() -> list[hooks.Subscription]:
    """The running lock's hooks, for a process to install (``hooks.install``)."""
    return [
        hooks.Subscription(("started",), _on_started, when="periodic_pjid"),
        hooks.Subscription(("retrying",), _on_retrying, when="periodic_pjid"),
        hooks.Subscription(("succeeded", "dead"), _on_finished, when="periodic_pjid"),
    ]


@dataclass
class InDoubt:
    """A claim of ``slot`` that didn't go all the way: its reply was lost (``claimed``
    unknown: it may or may not have landed) or its push failed (``claimed``). Settled
    before the entry is looked at again, by claiming the slot again: a slot lock held by
    any of ``jids`` (each try has its own) is this ticker's own claim."""

    entry: Entry
    slot: int
    following: float
    jids: list[str]
    claimed: bool


class SlotClaims(ABC):
    """The claim/push half of the ``Ticker``, which provides the state below and
    ``slot_and_next``/``_record``."""

    config: Config
    clock: Callable[[], float]
    monotonic: Callable[[], float]
    _in_doubt: list[InDoubt]
    _checked: dict[str, int]
    _checked_next: dict[str, float]
    _trouble_at: dict[str, float]
    _failures: dict[str, int]
    _retry_at: dict[str, float]
    _warned_unreadable: bool

    @abstractmethod
    def slot_and_next(self, entry: Entry, now: float) -> tuple[int, float]:
        """The Ticker's: the current slot of ``entry`` and the next fire time."""

    @abstractmethod
    def _record(self, entry: Entry, now: float) -> dict[str, Any]:
        """The Ticker's: the entry's published schedule record."""

    def _claim_call(
        self, entry: Entry, slot: int, mode: str, lock_ttl: int, jid: str, extra: list[str]
    ) -> periodic.Claim:
        fleet = self.config.fleet
        keys = fleet.keys
        return periodic.periodic_claim(
            fleet.redis(),
            last_slot=keys.periodic_last_slot(entry.pjid),
            lock=keys.periodic_lock(entry.pjid, slot),
            running=keys.periodic_running(entry.pjid),
            disabled=keys.periodic_disabled,
            pushed=keys.periodic_pushed(entry.pjid, slot),
            slot=slot,
            mode=mode,
            lock_ttl=lock_ttl,
            jid=jid,
            unique="1" if entry.unique else "",
            running_ttl=QUEUED_TTL,
            pjid=entry.pjid,
            reclaim=extra,
        )

    def _claim(self, entry: Entry, slot: int, following: float, mode: str, doubt: InDoubt | None = None) -> int:
        """Claims ``slot`` and acts on the answer (push, or log why not); returns it."""
        jid = new_jid()
        fleet = self.config.fleet
        # Long enough that the slot is no longer current when it lapses (see the rollback).
        lock_ttl = max(60, math.ceil(following - slot) + 60)
        extra = [] if doubt is None else ["1" if doubt.claimed else "", *doubt.jids]
        landed = self._landed(entry, slot, doubt.jids) if doubt is not None and routing.split(fleet) else None
        if doubt is not None:
            doubt.jids.append(jid)  # before it's sent: if its reply is lost, it may have landed
        try:
            # A split layout: the mark is the part's (read above); the fleet's name of it,
            # never written there, makes the script's own look find none.
            status, detail, unreadable = (
                (PUSHED, landed, 0) if landed is not None else self._claim_call(entry, slot, mode, lock_ttl, jid, extra)
            )
        except (store.ConnectionError, store.TimeoutError):
            # The reply is lost, not necessarily the claim: settled (fired if it landed)
            # before this entry is looked at again, so the slot can't be taken and lost.
            if doubt is None and mode in ("claim", "prime_new"):
                self._in_doubt.append(InDoubt(entry, slot, following, [jid], claimed=False))
            raise
        self._warn_unreadable(bool(unreadable))
        if status == CLAIMED:
            self._log_missed(entry, as_int(as_text(detail)), slot, False)
            self._push(entry, slot, following, jid, doubt, lock_ttl)
        elif status == PUSHED:
            logger.warning(
                "periodic %s: slot %d's push had landed after all (its reply was lost): fired once, as jid=%s",
                entry.pjid,
                slot,
                as_text(detail),
            )
            self._best_effort("schedule record", self._record_fired, entry, slot, as_text(detail))
        elif status == SKIPPED_MISSED:
            self._log_missed(entry, as_int(as_text(detail)), slot, True)
        elif status == SKIPPED_RUNNING:
            logger.info(
                "periodic %s: slot %d skipped, previous run jid=%s still queued or running",
                entry.pjid,
                slot,
                as_text(detail),
            )
        elif status == PRIMED:
            logger.info(
                "periodic %s: new entry: its first slot %d is recorded, not fired; it fires from the next one, at %s",
                entry.pjid,
                slot,
                fire_time(following, entry.tz),
            )
        elif status == NOT_OURS and doubt is not None and doubt.claimed:
            logger.warning(
                "periodic %s: rolled-back slot %d not fired: a later slot was claimed first", entry.pjid, slot
            )
        elif status == NOT_OURS and doubt is not None:
            logger.info(
                "periodic %s: the claim of slot %d (reply lost) didn't land, or its lock lapsed, or "
                "another master holds it: not fired here",
                entry.pjid,
                slot,
            )
        return int(status)

    def _log_missed(self, entry: Entry, after: int | None, slot: int, skipped_too: bool) -> None:
        """One line for the slots between ``after`` (the last one spent fleet-wide) and
        ``slot`` that nobody fired; ``skipped_too``: ``slot`` itself wasn't fired either."""
        if after is None:
            return
        count, at = 0, float(after)
        while count < COUNT_CAP:
            at = self.slot_and_next(entry, at)[1]
            if at >= slot:
                break
            count += 1
        shown = f"{count}+" if count >= COUNT_CAP else str(count + skipped_too)
        if count + skipped_too == 0:
            return
        plural = "" if shown == "1" else "s"
        if skipped_too:
            logger.warning(
                "periodic %s: %s missed slot%s skipped (after slot %d, up to slot %d: catch_up off)",
                entry.pjid,
                shown,
                plural,
                after,
                slot,
            )
        else:
            logger.warning(
                "periodic %s: %s missed slot%s skipped (after slot %d); firing the latest, slot %d",
                entry.pjid,
                shown,
                plural,
                after,
                slot,
            )

    def _warn_unreadable(self, unreadable: bool) -> None:
        if unreadable and not self._warned_unreadable:
            self._warned_unreadable = True
            logger.error(
                "periodic: can't read %s (wrong type?); treating every entry as enabled",
                self.config.keys.periodic_disabled,
            )
        elif not unreadable:
            self._warned_unreadable = False

    def _landed(self, entry: Entry, slot: int, jids: list[str]) -> str | None:
        """The queue layout: the jid of ``jids`` the slot's push landed as (its mark, in
        the queue's part), or None. A separate read from the claim that follows it, and
        still exactly once: a push of this slot landing after this read finds its mark
        at the next push, and periodic_push.lua refuses to push it again (SlotPushed)."""
        part = routing.holder(self.config.fleet, entry.queue)
        found = part.redis().get(part.keys.periodic_pushed(entry.pjid, slot))
        text = as_text(found) if isinstance(found, bytes) else None
        return text if text in jids else None

    def _push(self, entry: Entry, slot: int, following: float, jid: str, doubt: InDoubt | None, lock_ttl: int) -> None:
        from ..client.enqueue import SlotPushed, push

        payload = self._payload(entry, slot, jid)
        part = routing.holder(self.config.fleet, entry.queue)  # the mark is in the pushed job's part
        try:
            # The mark lives as long as the slot's lock: as long as a claim may be in doubt.
            pushed = push(payload, config=self.config, mark=(part.keys.periodic_pushed(entry.pjid, slot), lock_ttl))
        except SlotPushed as done:  # pushed already (the queue layout: after the reclaim's read)
            logger.warning(
                "periodic %s: slot %d's push had landed after all: fired once, as jid=%s", entry.pjid, slot, done.jid
            )
            if entry.unique:  # the reclaim named this try's jid holder of the running lock
                self._best_effort("running lock release", release_running_lock, self.config.fleet, entry.pjid, jid)
            self._best_effort("schedule record", self._record_fired, entry, slot, done.jid)
            return
        except Exception as exc:  # any refusal: rolled back, kept in doubt
            # Refused by something else than Redis's state (a key of the wrong type, a
            # middleware): rolled back now, so another master may take the slot while it's
            # current. Either way it stays in doubt, for this ticker to push once it can.
            if not redis_errors.is_outage(exc):
                self._rollback(entry, slot, jid)
            if doubt is None:
                self._in_doubt.append(InDoubt(entry, slot, following, [jid], claimed=True))
            else:
                doubt.claimed = True
            raise
        if pushed is None:
            # Dropped by a client middleware or the job's own unique lock: the slot is
            # spent, but no run will ever free the running lock.
            logger.info("periodic %s: slot %d's job was dropped on enqueue (unique or middleware)", entry.pjid, slot)
            if entry.unique:
                self._best_effort("running lock release", release_running_lock, self.config.fleet, entry.pjid, jid)
            return
        logger.info("periodic %s: fired slot %d as jid=%s", entry.pjid, slot, jid)
        self._best_effort("schedule record", self._record_fired, entry, slot, jid)

    def _payload(self, entry: Entry, slot: int, jid: str) -> dict[str, Any]:
        known = registry.get(entry.job_name)
        opts = known.opts if known is not None else JobOptions(retry=entry.retry)
        payload = build_payload(entry.job_name, entry.args, entry.kwargs, replace(opts, queue=entry.queue))
        payload["jid"] = jid
        payload["periodic_pjid"] = entry.pjid
        payload["periodic_slot"] = slot
        return payload

    def _record_fired(self, entry: Entry, slot: int, jid: str) -> None:
        record = self._record(entry, self.clock())
        record.update(last_slot=slot, last_jid=jid, last_fired_at=self.clock())
        fleet = self.config.fleet
        periodic.periodic_record(
            fleet.redis(), schedule=fleet.keys.periodic_schedule, pjid=entry.pjid, record=json.dumps(record), slot=slot
        )

    # -- claims in doubt, rollbacks ---------------------------------------------------------------

    def _rollback(self, entry: Entry, slot: int, jid: str) -> None:
        """Undoes a claim whose push failed. Best effort: if it fails, the claim stands
        and the ticker pushes under it later. The queue layout: the mark is read in the
        part first (see ``_landed``: a push landing after that read can't be repeated)."""
        fleet = self.config.fleet
        keys = fleet.keys
        try:
            if routing.split(fleet) and self._landed(entry, slot, [jid]) is not None:
                return
            undone = periodic.periodic_rollback(
                fleet.redis(),
                last_slot=keys.periodic_last_slot(entry.pjid),
                lock=keys.periodic_lock(entry.pjid, slot),
                running=keys.periodic_running(entry.pjid),
                pushed=keys.periodic_pushed(entry.pjid, slot),
                slot=slot,
                jid=jid,
            )
            if undone:
                logger.info("periodic %s: rolled back slot %d (fired once it can be pushed)", entry.pjid, slot)
        except Exception as exc:  # whatever it is, the claim stands: logged by the one policy
            guard.handle(f"periodic {entry.pjid}: rolling back slot {slot} (kept, pushed later)", exc)

    def _settle_in_doubt(self) -> None:
        """At the start of every tick, before the entry's slots are looked at again. One
        that fails on its own backs off like a failing entry; a lost connection doesn't."""
        pending, self._in_doubt = self._in_doubt, []
        for index, doubt in enumerate(pending):
            pjid = doubt.entry.pjid
            if self._backing_off(pjid):
                self._in_doubt.append(doubt)
                continue
            try:
                status = self._claim(doubt.entry, doubt.slot, doubt.following, "reclaim", doubt)
            except Exception as exc:  # one claim failing backs off alone
                self._in_doubt.append(doubt)
                if redis_errors.is_outage(exc):
                    self._in_doubt.extend(pending[index + 1 :])
                    raise
                self._trouble_at[pjid] = self.clock()
                delay = self._back_off(pjid)
                logger.error("periodic %s failed (next try in %.0fs): %s: %s", pjid, delay, type(exc).__name__, exc)
                continue
            self._failures.pop(pjid, None)
            self._retry_at.pop(pjid, None)
            if status != NOT_OURS:
                self._mark_checked(pjid, doubt.slot, doubt.following)

    def _mark_checked(self, pjid: str, slot: int, following: float) -> None:
        if self._checked.get(pjid, -1) < slot:
            self._checked[pjid] = slot
            self._checked_next[pjid] = following

    # -- backoff -----------------------------------------------------------------------------------

    def _backing_off(self, key: str) -> bool:
        at = self._retry_at.get(key)
        return at is not None and self.monotonic() < at

    def _back_off(self, key: str) -> float:
        """5 s, 10 s, 20 s ... up to BACKOFF_MAX; reset by the next success."""
        self._failures[key] = self._failures.get(key, 0) + 1
        delay = min(TICK_INTERVAL * 2 ** (self._failures[key] - 1), BACKOFF_MAX)
        self._retry_at[key] = self.monotonic() + delay
        return delay

    def _best_effort(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        guard.best_effort(f"periodic: {what} (ignored)", fn, *args)


def fire_time(at: float, tz: str) -> str:
    """A fire time as a log line shows it: in the entry's time zone."""
    return datetime.fromtimestamp(at, ZoneInfo(tz)).isoformat(timespec="seconds")


def as_int(raw: Any) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
