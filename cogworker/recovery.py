"""Getting jobs back from processes that are gone: dead processes' in-progress lists,
repeat orphans, and failure records handed over at shutdown (``unsettled``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import redis

from . import lua, unique
from .config import Config, logger
from .heartbeat import deregister

ORPHANINGS_TTL = 7 * 24 * 3600


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def requeue_in_progress(config: Config, identity: str, *, if_dead_for: float | None = None,
                        count_orphanings: bool | str = False, drop: Iterable[bytes] = (),
                        keep: Iterable[bytes] = ()) -> int:
    """Puts ``identity``'s in-progress list back on its queues, in order, in one script.

    ``if_dead_for``: only if the owner has no live process key and its last beat is
    older than that (checked atomically); returns -1 if it turned out alive.
    ``count_orphanings``: count one per job (True), or for the job of that jid only (the
    one its owner was running), and park those past ``max_orphanings``.
    ``drop``: jobs that finished but whose ack is missing (dropping them is the ack).
    ``keep``: jobs left on the list untouched.
    """
    keys = config.keys
    marks = [b"d:" + raw for raw in drop] + [b"k:" + raw for raw in keep]
    reply = lua.run(config.redis(), "requeue",
                    [keys.in_progress(identity), keys.process(identity), keys.last_beat,
                     keys.repeat_orphans, keys.dead],
                    [keys.queue_prefix, "default", keys.unique_prefix, identity,
                     "" if if_dead_for is None else repr(float(if_dead_for)), repr(time.time()),
                     keys.orphanings_prefix, ORPHANINGS_TTL, config.max_orphanings,
                     _count_mark(count_orphanings), *marks])
    moved, buried = int(reply[0]), reply[1:]
    if buried:
        complete_raw_burials(config, buried)
    return moved


def _count_mark(count_orphanings: bool | str) -> str:
    if count_orphanings is True:
        return "*"
    return f"j:{count_orphanings}" if count_orphanings else ""


def repeat_orphan_error(config: Config) -> dict[str, Any]:
    return {"error_class": "cogworker.ProcessDied", "failed_at": time.time(),
            "error_message": f"its process died while running it more than {config.max_orphanings} times "
                             "(killed for memory? SIGKILL?); not retried again"}


def bury_repeat_orphans(config: Config) -> int:
    """Files every parked repeat orphan in dead, with why: whatever its retry setting,
    since each run ended with its process gone rather than an error to retry on."""
    keys = config.keys
    client = config.redis()
    buried = 0
    for raw in client.lrange(keys.repeat_orphans, 0, -1):
        job = _parse(raw) or {"raw_payload": raw.decode("utf-8", "replace")}
        job.update(repeat_orphan_error(config))
        if lua.run(client, "file_head", [keys.repeat_orphans, keys.dead],
                   [raw, repr(time.time()), json.dumps(job)]) != 1:
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
            client.zadd(keys.dead, {json.dumps(job): time.time()})
            client.zrem(keys.dead, raw)
            buried_as_dead(config, job)
        except redis.RedisError as exc:
            logger.error("completing the dead entry of a repeat orphan failed: %s", exc)


def buried_as_dead(config: Config, job: dict[str, Any]) -> None:
    """What any terminal failure does on its way to dead: counted, locks released."""
    keys = config.keys
    try:
        client = config.redis()
        client.incr(keys.stats_failed)
        if job.get("unique_until", "success") == "success":
            unique.release(client, job)
        if job.get("periodic_pjid"):
            from .cron import release_running_lock

            release_running_lock(config, job["periodic_pjid"], job.get("jid", ""))
        if job.get("jid"):
            client.delete(keys.orphanings(job["jid"]))
    except Exception as exc:
        logger.error("after burying jid=%s: %s", job.get("jid"), exc)


def file_unsettled(config: Config) -> int:
    """Files what stopping processes handed over, head first; stops at the first that
    still can't be filed (retried on the next pass)."""
    keys = config.keys
    client = config.redis()
    filed = 0
    for record in client.lrange(keys.unsettled, 0, -1):
        entry = _parse(record)
        if not entry or not {"set", "score", "payload"} <= entry.keys() \
                or entry["set"] not in (keys.retry, keys.dead):
            logger.error("unreadable unsettled record dropped: %r", record[:200])
            client.lrem(keys.unsettled, 1, record)
            continue
        if lua.run(client, "file_head", [keys.unsettled, entry["set"]],
                   [record, repr(float(entry["score"])), entry["payload"]]) != 1:
            break
        filed += 1
        _locks_after_filing(config, entry)
    if filed:
        logger.warning("filed %d failure record(s) handed over by stopped processes", filed)
    return filed


def _locks_after_filing(config: Config, entry: dict[str, Any]) -> None:
    """Best-effort, like any filing: dead frees the job's locks, a retry keeps them."""
    try:
        payload = _parse(entry["payload"].encode() if isinstance(entry["payload"], str) else entry["payload"])
        if payload:
            retrying = entry["set"] == config.keys.retry
            unique.after_filing(config, payload, retrying, max(0.0, float(entry["score"]) - time.time()))
    except Exception as exc:
        logger.error("locks after filing an unsettled job failed (ignored): %s", exc)


def trim_dead(config: Config) -> None:
    """The dead set's limits (10,000 entries, 180 days), for the paths that add to it
    without the filing script's trim (poller garbage, repeat orphans, unsettled)."""
    keys = config.keys
    pipe = config.redis().pipeline(transaction=False)
    pipe.zremrangebyscore(keys.dead, "-inf", f"({time.time() - config.dead_timeout!r}")
    pipe.zremrangebyrank(keys.dead, 0, -(config.dead_max_jobs + 1))
    pipe.execute()


class OrphanRecovery:
    """Requeues the lists of processes that are dead, one identity at a time."""

    def __init__(self, config: Config, own: Iterable[str] = ()) -> None:
        self.config = config
        self.own = set(own)
        self.completed_passes = 0

    def candidates(self, scan: bool) -> set[str]:
        keys = self.config.keys
        client = self.config.redis()
        found: set[str] = set()
        try:
            found |= {m.decode() for m in client.smembers(keys.in_progress_identities)}
        except redis.ResponseError as exc:  # wrong type: the scan can still find lists
            logger.error("orphan recovery: can't read %s: %s", keys.in_progress_identities, exc)
        if scan:
            prefix = keys.in_progress_prefix
            for key in client.scan_iter(match=prefix.replace("[", "\\[").replace("?", "\\?")
                                        .replace("*", "\\*") + "*", count=500):
                found.add(key.decode()[len(prefix):])
        return found

    def run(self, scan: bool = False, own: Iterable[str] = ()) -> int:
        """One pass. One identity that can't be processed never stops the others."""
        skip = self.own | set(own)
        moved = 0
        for identity in sorted(self.candidates(scan) - skip):
            try:
                n = requeue_in_progress(self.config, identity, if_dead_for=self.config.orphan_threshold,
                                        count_orphanings=True)
                if n < 0:
                    continue  # alive after all
                deregister(self.config, identity)
                if n:
                    logger.warning("requeued %d job(s) left in progress by dead process %s", n, identity)
                moved += n
            except (redis.ConnectionError, redis.TimeoutError):
                raise
            except redis.RedisError as exc:
                logger.error("orphan recovery skipped %s: %s", identity, exc)
        for what, step in (("burying repeat orphans", bury_repeat_orphans),
                           ("filing unsettled jobs", file_unsettled),
                           ("trimming the dead set", trim_dead)):
            try:
                step(self.config)
            except (redis.ConnectionError, redis.TimeoutError):
                raise
            except redis.RedisError as exc:
                logger.error("orphan recovery: %s failed: %s", what, exc)
        self.completed_passes += 1
        return moved
