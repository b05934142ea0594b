"""Getting jobs back from processes that are gone: dead processes' in-progress lists,
repeat orphans, and failure records handed over at shutdown (``unsettled``)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable
from typing import Any

from .. import store
from ..boundedjson import loads as json_loads
from ..config import Config, as_bytes_list, as_text, logger
from ..core import hooks, settlement
from ..core.fate import File
from ..core.heartbeat import clock, deregister
from ..core.inprogress import InProgressList
from ..store import guard
from ..transitions import declare, housekeeping, settle

FENCE_TTL = 7 * 24 * 3600  # as set by requeue.lua


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json_loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def requeue_in_progress(
    config: Config,
    identity: str,
    *,
    fence: bool = False,
    count_orphanings: bool | str = False,
    drop: Iterable[bytes] = (),
    keep: Iterable[bytes] = (),
    killed: Iterable[str] = (),
) -> int:
    """Puts ``identity``'s in-progress list back on its queues, in order, in one script.

    ``fence``: the owner is dead (a master reaped it): it is fenced in the same step if
    anything was listed.
    Without it this is the owner's own requeue as it stops, refused (``Fenced``) if it
    was declared dead meanwhile.
    ``count_orphanings``: count one per job (True), or for the job of that jid only (the
    one its owner was running), and park those past ``max_orphanings``.
    ``drop``: jobs that finished but whose ack is missing (dropping them is the ack).
    ``keep``: jobs left on the list untouched.
    ``killed``: the jids its master killed it running: their ``orphaned`` says so (reason
    ``killed``), and history keeps that run (interrupted).
    """
    mode = "reclaim" if fence else "own"
    moved, _ = _requeue(config, identity, mode, count_orphanings, drop, keep, frozenset(killed))
    return moved


def requeue_dead(config: Config, identity: str, beat: str) -> tuple[int, bool]:
    """Orphan recovery's requeue: only if ``identity``'s beat still is ``beat`` ("none":
    no beat) and it has no process key, checked atomically with the requeue, which fences
    it. Returns (-1, False) if it turned out alive, else (jobs moved, whether this fenced it:
    False if it already was)."""
    return _requeue(config, identity, "dead:" + beat, True, (), ())


def _requeue(
    config: Config,
    identity: str,
    mode: str,
    count_orphanings: bool | str,
    drop: Iterable[bytes],
    keep: Iterable[bytes],
    killed: frozenset[str] = frozenset(),
) -> tuple[int, bool]:
    done = InProgressList(config, identity, beats=False).requeue_all(drop, keep, count_orphanings, mode)
    if done.moved < 0:
        return done.moved, False
    if done.orphaned and hooks.wanted("orphaned"):
        fire_orphaned(config, identity, done.orphaned, killed)
    if done.buried:
        complete_raw_burials(config, done.buried)
    return done.moved, done.fenced_now


def fire_orphaned(config: Config, identity: str, flagged: list[bytes], killed: frozenset[str] = frozenset()) -> None:
    """``orphaned`` for each job requeued (or parked as a repeat orphan) from the list of
    ``identity``, a gone process: ``flagged`` alternates "c"/"u"/"p" (counted, not, or
    counted and parked: then with reason ``process_died``, its fate) and job; reason
    ``killed`` for a job in ``killed`` (its master killed the process running it)."""
    for flag, raw in zip(flagged[::2], flagged[1::2], strict=True):
        payload = _parse(raw) or {}
        queue = payload.get("queue") if isinstance(payload.get("queue"), str) and payload.get("queue") else "default"
        parked = flag == b"p"
        hooks.fire(
            "orphaned",
            payload,
            queue=queue,
            identity=identity,
            counted=parked or flag == b"c",
            config=config,
            **({"reason": "process_died", "error_class": "cogworker.ProcessDied"} if parked else {}),
            **({"reason": "killed"} if not parked and payload.get("jid") in killed else {}),
        )


def repeat_orphan_error(config: Config) -> dict[str, Any]:
    return {
        "error_class": "cogworker.ProcessDied",
        "failed_at": time.time(),
        "error_message": f"its process died while running it more than {config.max_orphanings} times "
        "(killed for memory? SIGKILL?); not retried again",
    }


def bury_repeat_orphans(config: Config) -> int:
    """Files every parked repeat orphan in dead, with why: whatever its retry setting,
    since each run ended with its process gone rather than an error to retry on."""
    keys = config.keys
    client = config.redis()
    buried = 0
    for raw in as_bytes_list(client.lrange(keys.repeat_orphans, 0, -1)):
        job = _parse(raw) or {"raw_payload": raw.decode("utf-8", "replace")}
        job.update(repeat_orphan_error(config))
        if not _file_head(config, keys.repeat_orphans, keys.dead, raw, repr(time.time()), json.dumps(job)):
            break  # someone else is walking the list; they'll finish it
        buried += 1
        logger.error("jid=%s orphaned too often, moved to dead as ProcessDied", job.get("jid"))
        buried_as_dead(config, job)
    return buried


def complete_raw_burials(config: Config, raws: list[bytes]) -> None:
    """Jobs the requeue script had to file in dead raw: swapped for a proper entry."""
    keys = config.keys
    for raw in raws:
        try:
            job = (_parse(raw) or {}) | repeat_orphan_error(config)
            client = config.redis()
            entry = json.dumps(job)
            client.zadd(keys.dead, {entry: time.time()})
            client.zrem(keys.dead, raw)
            # Its workflow and batch hear of it as file.lua would have told them.
            declared = declare.of_entry(keys, entry)
            housekeeping.settle_dead(  # (what it couldn't write: ignored, as before)
                client,
                keys,
                **settle.settling_keys(keys),
                declared=declared,
                entry=entry,
                now=repr(time.time()),
                keep=config.status_max,
            )
            buried_as_dead(config, job)
        except store.RedisError as exc:
            logger.error("completing the dead entry of a repeat orphan failed: %s", exc)


def buried_as_dead(config: Config, job: dict[str, Any]) -> None:
    """A repeat orphan is in dead: counted, its orphanings forgotten, then the ``dead``
    hooks (its locks are freed like any terminal failure's)."""
    keys = config.keys
    try:
        client = config.redis()
        client.incr(keys.stats_failed)
        if job.get("jid"):
            client.delete(keys.orphanings(job["jid"]))
    except Exception as exc:
        logger.error("after burying jid=%s: %s", job.get("jid"), exc)
    hooks.fire("dead", job, reason="process_died", config=config)


def file_unsettled(config: Config) -> int:
    """Files what stopping processes handed over, head first; stops at the first that
    still can't be filed (retried on the next pass)."""
    keys = config.keys
    client = config.redis()
    filed = 0
    for record in as_bytes_list(client.lrange(keys.unsettled, 0, -1)):
        entry = _parse(record)
        if not entry or not {"set", "score", "payload"} <= entry.keys() or entry["set"] not in (keys.retry, keys.dead):
            logger.error("unreadable unsettled record dropped: %r", record[:200])
            client.lrem(keys.unsettled, 1, record)  # type: ignore[arg-type]  # bytes: redis-py's stub says str
            continue
        if not _file_head(config, keys.unsettled, entry["set"], record, repr(float(entry["score"])), entry["payload"]):
            break
        filed += 1
        _locks_after_filing(config, entry)
    if filed:
        logger.warning("filed %d failure record(s) handed over by stopped processes", filed)
    return filed


def _file_head(config: Config, list_key: str, zset: str, head: bytes, score: str, filed: str) -> bool:
    """``filed`` into ``zset`` in place of ``head`` of ``list_key`` (``file_head.lua``); in
    dead, a job of a workflow or batch settles there too (the keys its payload names).
    False if ``head`` is no longer the list's head."""
    keys = config.keys
    dead = zset == keys.dead
    declared = declare.of_entry(keys, filed) if dead else []
    return housekeeping.file_head(
        config.redis(),
        keys,
        list=list_key,
        zset=zset,
        **settle.settling_keys(keys),
        declared=declared,
        head=head,
        score=score,
        filed=filed,
        workflows="1" if dead else "",
        now=repr(time.time()),
        keep=config.status_max,
    )


def _locks_after_filing(config: Config, entry: dict[str, Any]) -> None:
    """The hooks of a filing (dead frees the job's locks, a retry keeps them)."""
    try:
        retrying = entry["set"] == config.keys.retry
        score = float(entry["score"])
        decision = File(
            entry["set"],
            score,
            entry["payload"],
            retrying,
            max(0.0, score - time.time()) if retrying else 0.0,
            reason="interrupted",
        )
    except (KeyError, TypeError, ValueError) as exc:
        logger.error("locks after filing an unsettled job failed (ignored): %s", exc)
        return
    settlement.filed(config, decision)


def trim_dead(config: Config) -> None:
    """The dead set's limits (10,000 entries, 180 days), for the paths that add to it
    without the filing script's trim (poller garbage, repeat orphans, unsettled)."""
    keys = config.keys
    pipe = store.pipeline(config.redis())
    pipe.zremrangebyscore(keys.dead, "-inf", f"({time.time() - config.dead_timeout!r}")
    pipe.zremrangebyrank(keys.dead, 0, -(config.dead_max_jobs + 1))
    pipe.execute()


class OrphanRecovery:
    """Requeues the lists of processes that are dead, one identity at a time.

    A process is dead only once this one has watched its beat stay unchanged for
    ``orphan_threshold`` while Redis answered throughout: the age of a beat can't tell a
    dead process from one that couldn't reach a stalled Redis, or from a recoverer that was
    itself frozen. So each pass reads every candidate's beat; a value seen again a full
    threshold after it was first seen is dead, and the requeue (which fences the owner)
    checks that very value atomically. Redis not answering (a connection error or a
    timeout), or a gap between two reads longer than half the threshold (Redis or this
    process stalled), restarts every observation.
    """

    def __init__(self, config: Config, own: Iterable[str] = ()) -> None:
        self.config = config
        self.own = set(own)
        self.completed_passes = 0
        self.threshold = config.orphan_threshold
        self.interval = min(config.recovery_interval, self.threshold / 4)
        self.max_gap = self.threshold / 2
        self.seen: dict[str, tuple[str, float]] = {}  # identity -> (beat value, clock() when first seen)
        self.last_read: float | None = None  # clock() of the last beat read Redis answered
        self.scanned: set[str] = set()  # lists found by the boot scan, not registered

    def candidates(self, scan: bool) -> set[str]:
        keys = self.config.keys
        client = self.config.redis()
        found: set[str] = set(self.scanned)
        try:
            found |= {as_text(m) for m in client.smembers(keys.in_progress_identities)}
        except store.ResponseError as exc:  # wrong type: the scan can still find lists
            logger.error("orphan recovery: can't read %s: %s", keys.in_progress_identities, exc)
        if scan:
            prefix = keys.in_progress_prefix
            for key in client.scan_iter(
                match=prefix.replace("[", "\\[").replace("?", "\\?").replace("*", "\\*") + "*", count=500
            ):
                identity = key.decode()[len(prefix) :]
                if identity not in found:
                    self.scanned.add(identity)
                found.add(identity)
        return found

    def forget_observations(self) -> None:
        self.seen.clear()
        self.last_read = None

    def next_delay(self) -> float:
        """Seconds to the next pass: the interval (jittered, so masters spread out), or
        sooner if an observation can mature sooner."""
        delay = self.interval * random.uniform(0.8, 1.0)
        if self.seen:
            due = min(first for _, first in self.seen.values()) + self.threshold - clock()
            delay = min(delay, max(0.01, due + 0.01))
        return delay

    def run(self, scan: bool = False, own: Iterable[str] = ()) -> int:
        """One pass. One identity that can't be processed never stops the others."""
        try:
            moved = self._recover(sorted(self.candidates(scan) - self.own - set(own)))
        except store.RedisError as exc:
            if guard.kind_of(exc) == guard.OUTAGE:
                self.forget_observations()  # Redis didn't answer: what we watched may be its stall
            raise  # the caller's policy logs it (and backs off an outage)
        for what, step in (
            ("burying repeat orphans", bury_repeat_orphans),
            ("filing unsettled jobs", file_unsettled),
            ("trimming the dead set", trim_dead),
        ):
            try:
                step(self.config)
            except store.RedisError as exc:
                if guard.kind_of(exc) == guard.OUTAGE:
                    self.forget_observations()
                    raise
                guard.handle(f"orphan recovery: {what}", exc)  # one step failing never stops the others
        self.completed_passes += 1
        return moved

    def _read_beats(self, identities: list[str]) -> tuple[list[str], float]:
        """Each identity's beat value ("none": none), and ``clock()`` just before asking."""
        sent = clock()
        if not identities:
            return [], sent
        try:
            raw = self.config.redis().hmget(self.config.keys.last_beat, identities)
        except store.ResponseError as exc:  # last_beat of the wrong type: the process keys decide
            logger.error("orphan recovery: can't read %s: %s", self.config.keys.last_beat, exc)
            raw = [None] * len(identities)
        return [as_text(value) if value else "none" for value in raw], sent

    def _recover(self, identities: list[str]) -> int:
        values, sent = self._read_beats(identities)
        now = clock()
        if self.last_read is not None and now - self.last_read > self.max_gap:
            self.seen.clear()  # frozen, or Redis stalled, since the last read: watch again
        self.last_read = now
        self.seen = {i: self.seen[i] for i in identities if i in self.seen}
        moved = 0
        for identity, value in zip(identities, values, strict=True):
            first = self.seen.get(identity)
            if first is None or first[0] != value:
                self.seen[identity] = (value, now)
            elif sent - first[1] >= self.threshold:
                moved += self._requeue(identity, value, now)
        return moved

    def _fenced_lately(self, identity: str) -> bool:
        """Fenced less than a threshold ago (by another process, maybe): a blocking move
        sent before the fence may still land on its list."""
        ttl = self.config.redis().ttl(self.config.keys.fenced(identity))
        return ttl > 0 and FENCE_TTL - ttl < self.threshold

    def _requeue(self, identity: str, value: str, now: float) -> int:
        """The identity's beat stayed at ``value`` for the threshold: requeued and fenced.
        Once fenced, it is watched one threshold more before it is forgotten, for a job a
        blocking move may still have landed on its list."""
        try:
            n, fenced_now = requeue_dead(self.config, identity, value)
            if n < 0:
                # Alive after all (it beat just now, or its process key is still there):
                # watched afresh, not asked again on every pass.
                self.seen[identity] = (value, now)
                return 0
            if fenced_now:
                logger.warning(
                    "requeued %d job(s) left in progress by process %s: its beat stayed unchanged for %gs (fenced)",
                    n,
                    identity,
                    self.threshold,
                )
            elif n:
                logger.warning("requeued %d job(s) left on the list of dead process %s", n, identity)
            if fenced_now or self._fenced_lately(identity):
                self.seen[identity] = (value, now)  # forgotten a threshold after its fence
                return n
            deregister(self.config, identity)
        except store.RedisError as exc:
            if guard.kind_of(exc) == guard.OUTAGE:
                raise
            # Asked again a threshold later, not on every pass (one line per threshold).
            self.seen[identity] = (value, now)
            guard.handle(f"orphan recovery of {identity} (skipped for now)", exc)
            return 0
        self.seen.pop(identity, None)
        self.scanned.discard(identity)
        return n
