"""Reliable fetch: each worker identity moves jobs onto its own in-progress list, and
takes them off only by acknowledging, handing back, or filing them (docs/architecture.md#fetch, #fate-table)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from ... import store
from ...config import Config, as_text, logger
from ...core.heartbeat import clock
from ...core.inprogress import InProgressList, _text_field, jid_of
from ...errors import Fenced, RedisVersionError
from ...store import errors as redis_errors
from ...store import lua, replication, wire
from ...store.wakewait import WakeWait
from . import batch as batchfetch
from . import fast as fastfetch
from .idle import EmptyQueues
from .work import MARK, Ahead, Fast, Work

MIN_REDIS_VERSION = (6, 2)
# The fast fetch pays off for large jobs only (no payload enters Lua, where Redis hashes
# every byte), and costs small ones more Redis work (6 more commands a job); the last
# job's size predicts the next one's (docs/architecture.md#fast-fetch).
FAST_MIN_BYTES = 4096


def large(raw: bytes | None) -> bool:
    """A job big enough that its next fetch goes alone, by the fast fetch (no batch)."""
    return raw is not None and len(raw) >= FAST_MIN_BYTES


def check_redis_version(client: store.Client) -> None:
    version = client.info("server").get("redis_version", "0")
    parts = tuple(int(p) for p in str(version).split(".")[:2] if p.isdigit())
    if parts < MIN_REDIS_VERSION:
        raise RedisVersionError(
            f"Redis {version} is too old: cogworker's reliable fetch needs Redis >= 6.2 (LMOVE, BLMOVE, LPOS)")


class Fetcher(InProgressList):
    """Queue order and the blocking fetch (and look-ahead's scripts) for one identity,
    on top of its in-progress list. Each script is refused (``Fenced``, and ``fenced``
    set) once the identity was declared dead."""

    def __init__(self, config: Config, identity: str, queues: list[tuple[str, int | None]],
                 block_timeout: float = 1.0, beats: bool = True) -> None:
        super().__init__(config, identity, beats)
        self.queues = [name for name, _ in queues]
        self.weighted = all(w is not None for _, w in queues)
        self._pool = [name for name, w in queues for _ in range(w or 1)]
        self.block_timeout = block_timeout
        self._bad_keys_logged: dict[str, float] = {}
        self._ahead_conn: Any = None
        self._ahead_pid = 0
        self._fetch_sha = ""
        self._moved_sha = ""
        self._batch_sha = ""
        self._queue_keys = {name: self.keys.queue(name) for name in self.queues}
        # The fast fetch's guess: the first queue of this fetch's order that gave the last
        # job it was asked for (queues found empty before it since are dropped).
        self._busy: set[str] = set(self.queues[:1])
        self.empty = EmptyQueues(self.queues)
        self.wake_wait = WakeWait()  # a stop cuts the idle wait short (Worker.stop)

    def plan(self, whole: bool = False) -> tuple[list[str], str, bool]:
        """This fetch's order, without the queues known to be empty and cut after the one
        that gave the last job, its ``since``, and whether it was cut (EmptyQueues.plan)."""
        return self.empty.plan(self.order(), whole)

    def order(self) -> list[str]:
        if not self.weighted:
            return self.queues
        # Sidekiq's weighted order: a queue with weight 3 is three times as likely to be tried first.
        pool = self._pool[:]
        random.shuffle(pool)
        return list(dict.fromkeys(pool))

    def fetch(self, ack: bytes | None = None, ack_jid: str | None = None,
              on_empty: Callable[[], Work | None] | None = None) -> Work | None:
        """One job from the first non-empty queue, or None after blocking ``block_timeout``.

        ``ack``: the previous job, acknowledged in the same round trip (``ack_jid``: its
        jid, if the caller knows it, to spare parsing it again). ``on_empty``: asked for
        a job from elsewhere when every queue is empty, before blocking.
        """
        # Every idle worker blocks on the wake stream (pushes filling a queue XADD it), never on a
        # queue: a BLMOVE would take a job without reading the paused set.
        blocking = self.block_timeout > 0
        wake = self.keys.wake if blocking else ""
        work, wake_id, again = self._fetch_once(ack, ack_jid, wake)
        if again:  # a queue left out may have a job now: again, naming every queue (the ack landed)
            work, wake_id, _ = self._fetch_once(None, None, wake, whole=True)
        if work is not None:
            return work
        if not blocking:
            return None
        if on_empty is not None:
            taken = on_empty()
            if taken is not None:
                return taken
        # Shorter than the socket timeout, or an idle wait reads as Redis being away.
        block = min(self.block_timeout, self.lease / 2)
        if self.config.socket_timeout:
            block = min(block, self.config.socket_timeout / 2)
        if not self._wait_for_wake(wake_id, block):
            # The wake stream can't be read (a key of the wrong type): poll instead.
            time.sleep(min(block, 0.1))
        self.empty.forget()  # woken (a queue filled) or timed out: the next fetch names every queue
        return None  # the caller fetches again through the script

    def _fetch_once(self, ack: bytes | None, ack_jid: str | None, wake: str,
                    whole: bool = False) -> tuple[Work | None, Any, bool]:
        """One fetch: its job, the wake ID to block from, and whether to fetch again at
        once naming every queue (it was stale, or cut short and found nothing)."""
        order, since, cut = self.plan(whole)
        if self._fast_allowed(ack):
            work, wake_id, stale = self._fetch_fast(order, since, ack, ack_jid, wake)
            return work, wake_id, stale or (cut and work is None)
        keys = [self.in_progress, self.keys.orphanings((ack_jid or jid_of(ack)) if ack else "-"),
                self.fence_key, self.keys.last_beat, *(self._queue_keys[q] for q in order)]
        reply = self._run("fetch", keys, [ack or b"", wake, "", "", "", self.beat_as, self.keys.paused,
                                          self.keys.queue_prefix, since], beats=True)
        work, stale = self._work_of(reply, order, since)
        return work, reply[2], stale or (cut and work is None)

    def send_ahead(self, number: int, ack: bytes | None = None, ack_jid: str | None = None, k: int = 1,
                   older: tuple[batchfetch.Ack, ...] = ()) -> Ahead:
        """Sends the fetch script (never blocking) without waiting for its reply; the
        jobs it takes (up to ``k``) land on this identity's in-progress list like any
        other, and are recorded under ``number`` so an idle sibling may take them
        (``take_ahead``). ``older``: acks due before ``ack``, riding along too."""
        order, since, _ = self.plan()  # cut and came back empty: the next fetch names every queue
        conn = self._ahead_conn
        if conn is None or self._ahead_pid != os.getpid():
            # Held for good, not borrowed per job: the pool's bookkeeping costs as much as
            # the send. A job using the client meanwhile gets another connection.
            client = self.client
            conn = self._ahead_conn = client.connection_pool.make_connection()
            self._ahead_pid = os.getpid()
            self._fetch_sha = lua.script(client, "fetch").sha
            self._moved_sha = lua.script(client, "fetch_moved").sha
            self._batch_sha = ""
        sent = clock()
        fast = None
        if k > 1 or older:
            acks = [*older, *([(ack, ack_jid)] if ack is not None else [])]
            if self.lease_left() > 0:  # the acks' LREMs may go ahead of the fence check
                fast, multi = batchfetch.moved_commands(
                    self, lua.script(self.client, "fetch_batch_moved").sha, order, number, k, acks,
                    self._guess(order), since)
                need = self._send(conn, multi)
                return Ahead(conn, order, ack, sent, fast, tuple(raw for raw, _ in acks), True, since, k, need)
            if not self._batch_sha:  # loaded here: no plain call of it loads it (after a flush too)
                self._batch_sha = lua.script(self.client, "fetch_batch").sha
                self.client.script_load(lua.source("fetch_batch"))
            need = self._send(conn, [batchfetch.command(self, self._batch_sha, order, number, k, acks, since)])
            return Ahead(conn, order, ack, sent, None, tuple(raw for raw, _ in acks), True, since, k, need)
        if self._fast_allowed(ack):
            fast, commands = self._fast_commands(order, since, ack, ack_jid, "",
                                                 (self.keys.ahead, self.identity, number))
        else:
            keys = [self._queue_keys[q] for q in order]
            commands = [("EVALSHA", self._fetch_sha, 4 + len(keys), self.in_progress,
                         self.keys.orphanings((ack_jid or jid_of(ack)) if ack else "-"), self.fence_key,
                         self.keys.last_beat, *keys, ack or b"", "", self.keys.ahead, self.identity, number,
                         self.beat_as, self.keys.paused, self.keys.queue_prefix, since)]
        need = self._send(conn, commands)
        return Ahead(conn, order, ack, sent, fast, since=since, need=need)

    def _send(self, conn: Any, commands: Sequence[tuple[Any, ...] | bytes]) -> replication.Need | None:
        need = replication.need_of(self.client)
        if need is not None:  # wait_replicas: the fetch's move is replicated before its job starts
            commands = [*commands, need.command()]
        try:
            conn.send_packed_command(wire.packed(conn, commands), check_health=False)
        except BaseException:
            conn.disconnect()
            raise
        return need

    def read_ahead_all(self, ahead: Ahead) -> list[Work]:
        """Every job the look-ahead took, oldest first (``read_ahead`` for a batch too)."""
        if not ahead.batch:
            work = self.read_ahead(ahead)
            return [work] if work is not None else []
        if ahead.fast is not None:
            fast = ahead.fast
            replies = replication.read_then_wait(ahead.conn, ahead.need,
                                                 lambda: fastfetch.replies(ahead.conn, fast))
            reply = self._checked(replies[-1], "fetch_batch_moved", fast)
            self.vouch(ahead.sent_at)
            works, bad, newest, paused, stale = batchfetch.moved_works(replies, reply, fast, ahead.order, ahead.k)
        else:
            try:
                reply = replication.read_then_wait(ahead.conn, ahead.need, ahead.conn.read_response)
            except store.NoScriptError:
                self._batch_sha = ""  # loaded again before the next one
                raise
            except store.ResponseError as exc:
                self._raise_fenced(exc)
                raise
            self.vouch(ahead.sent_at)
            works, bad, newest, paused, stale = batchfetch.works(reply, ahead.order)
        if bad:
            self._bad_keys(bad, fetched=bool(works))
        index = ahead.order.index(works[-1].queue) if works else len(ahead.order)
        # Fewer than asked: every queue named was empty at the end.
        before = index if len(works) == ahead.k else len(ahead.order)
        self.empty.learn(ahead.order, ahead.since, newest, stale, before, paused)
        if works:
            self._busy.difference_update(ahead.order[:index])
            self._busy.add(works[-1].queue)
        return works

    def read_ahead(self, ahead: Ahead) -> Work | None:
        """The look-ahead's job, or None if every queue was empty. Raises what the fetch
        raised: ``store.NoScriptError`` means it did not run at all."""
        if ahead.fast is not None:
            work, _, _ = self._read_fast(ahead.conn, ahead.fast, ahead.order, ahead.since, ahead.sent_at,
                                         ahead.need)
            return work
        try:
            reply = replication.read_then_wait(ahead.conn, ahead.need, ahead.conn.read_response)
        except store.ResponseError as exc:
            self._raise_fenced(exc)
            raise
        self.vouch(ahead.sent_at)
        return self._work_of(reply, ahead.order, ahead.since)[0]

    def _guess(self, order: list[str]) -> int:
        """The first queue of ``order`` that gave the last job it was asked for."""
        return next((i for i, q in enumerate(order) if q in self._busy), 0)

    def _fast_commands(self, order: list[str], since: str, ack: bytes | None, ack_jid: str | None, wake: str,
                       ahead: tuple[Any, ...]) -> tuple[Fast, list[tuple[Any, ...]]]:
        guess = self._guess(order)
        keys = [self.in_progress, self.keys.orphanings((ack_jid or jid_of(ack)) if ack else "-"),
                self.fence_key, self.keys.last_beat, *(self._queue_keys[q] for q in order)]
        args = [wake, *ahead, self.beat_as, self.keys.paused, self.keys.queue_prefix]
        return fastfetch.commands(self._sha_moved(), keys, args, ack, guess, since)

    def _fast_allowed(self, ack: bytes | None) -> bool:
        """The fast fetch's ack is a plain LREM, in front of the fence check: sent only
        while the lease holds, when nobody can have fenced this identity yet
        (docs/architecture.md#lease). Otherwise fetch.lua carries the ack behind its check.
        Only for a large last job: a small one's fetch is cheaper in fetch.lua."""
        return large(ack) and self.lease_left() > 0

    def _sha_moved(self) -> str:
        if not self._moved_sha:
            self._moved_sha = lua.script(self.client, "fetch_moved").sha
        return self._moved_sha

    def _fetch_fast(self, order: list[str], since: str, ack: bytes | None, ack_jid: str | None,
                    wake: str) -> tuple[Work | None, Any, bool]:
        fast, commands = self._fast_commands(order, since, ack, ack_jid, wake, ("", "", ""))
        pool = self.client.connection_pool
        need = replication.need_of(self.client)
        if need is not None:
            commands.append(need.command())
        conn = pool.get_connection()
        try:
            sent = clock()
            conn.send_packed_command(wire.packed(conn, commands))
            replies = replication.read_then_wait(conn, need, lambda: fastfetch.replies(conn, fast))
        except BaseException:
            conn.disconnect()  # replies may be left unread: never reused
            raise
        finally:
            pool.release(conn)
        return self._settle_fast(replies, fast, order, since, sent)

    def _read_fast(self, conn: Any, fast: Fast, order: list[str], since: str,
                   sent: float, need: replication.Need | None) -> tuple[Work | None, Any, bool]:
        replies = replication.read_then_wait(conn, need, lambda: fastfetch.replies(conn, fast))
        return self._settle_fast(replies, fast, order, since, sent)

    def _settle_fast(self, replies: list[Any], fast: Fast, order: list[str], since: str,
                     sent: float) -> tuple[Work | None, Any, bool]:
        """The script's reply decides; the job is the LMOVE's reply when the move stood."""
        reply = self._checked(replies[-1], "fetch_moved", fast)
        self.vouch(sent)
        work, stale = self._work_of(reply, order, since, moved=replies[-2])
        return work, reply[2], stale

    def _checked(self, reply: Any, name: str, fast: Fast) -> Any:
        """A MULTI's script reply (``name``: the script), or its error raised."""
        if isinstance(reply, store.ResponseError):
            if not isinstance(reply, store.NoScriptError) and not str(reply).startswith("NOSCRIPT"):
                self._raise_fenced(reply)
                raise reply
            # Scripts flushed: the plain commands ran, the script did not. It runs now on
            # what they left (nothing else touches this list's head meanwhile: a take or a
            # return needs the `ahead` record, which only the script writes), and loads.
            reply = self._run(name, fast.keys, fast.args)
        return reply

    def _work_of(self, reply: list[Any], order: list[str], since: str,
                 moved: Any = None) -> tuple[Work | None, bool]:
        """fetch.lua's (or fetch_moved.lua's) reply: the job, and whether the fetch was stale."""
        index = int(reply[0])
        if len(reply) > 5:
            self._bad_keys(reply[5:], fetched=index > 0)
        self.empty.learn(order, since, as_text(reply[3]), index < 0, index - 1 if index > 0 else len(order),
                         [as_text(name) for name in reply[4]])
        if index <= 0:
            return None, index < 0
        queue = order[index - 1]
        if index > 1:  # every queue tried before this one was empty (or paused) just now
            self._busy.difference_update(order[:index - 1])
        self._busy.add(queue)
        # fetch_moved.lua says nil when the job is its LMOVE's reply; an entry may be b"".
        return Work(moved if reply[1] is None else reply[1], queue), False

    def _raise_fenced(self, exc: store.ResponseError) -> None:
        try:
            lua.raise_if_fenced(exc)
        except Fenced:
            self.fenced = True
            raise

    def drop_mark(self, mark: bytes = MARK) -> None:
        """A mark left on the list (a MULTI fetch whose script never ran): not a job."""
        self.client.execute_command("LREM", self.in_progress, 0, mark)

    def close(self) -> None:
        if self._ahead_conn is not None:
            self._ahead_conn.disconnect()
            self._ahead_conn = None

    def take_ahead(self, sibling: str, number: int, started: int = 0) -> Work | None:
        """One of a sibling's look-ahead jobs not started (``started``: how many of that
        fetch's it started), onto our own list (the caller holds its lock)."""
        raw = self._run("take_ahead", [self.keys.ahead, self.keys.in_progress(sibling), self.in_progress,
                                       self.fence_key, self.keys.fenced(sibling)], [sibling, number, started])
        if not raw:
            return None
        return Work(raw, _text_field(raw, "queue") or self.queues[0])

    def claim_ahead(self, number: int, started: int = 0) -> int:
        """How many of our look-ahead fetch ``number``'s jobs not started (``started``:
        how many we did) are still ours (nobody took or returned them: the oldest), and
        from now on nobody can take them (the caller holds our lock)."""
        return int(self._run("claim_ahead", [self.keys.ahead, self.fence_key], [self.identity, number, started]))

    def _wait_for_wake(self, since: bytes, block: float) -> bool:
        """Blocks until a push to any queue (or ``block`` seconds). False if the wake
        stream can't be used (wrong type): then the caller blocks on one queue instead."""
        try:
            self.wake_wait.wait(self.client, self.keys.wake, since, max(1, int(block * 1000)))
            return True
        except store.ResponseError as exc:
            if redis_errors.classify(exc) == redis_errors.READONLY:
                raise  # an outage, not a bad key
            self._log_bad_key(self.keys.wake, str(exc))
            return False

    def _bad_keys(self, pairs: list[Any], fetched: bool) -> None:
        """The fetch script's unreadable queues, each with Redis's error. A key of the
        wrong type is logged and skipped. Redis refusing writes (OOM, READONLY) is no
        key's fault: raised as the error the command would have raised, so the caller
        backs off (unless a job came through all the same)."""
        refused = None
        for key, error in zip(pairs[0::2], pairs[1::2], strict=False):
            name = key.decode() if isinstance(key, bytes) else str(key)
            text = error.decode(errors="replace") if isinstance(error, bytes) else str(error)
            if redis_errors.classify(text) in (redis_errors.OOM, redis_errors.READONLY):
                refused = text
            else:
                self._log_bad_key(name, text)
        if refused is not None and not fetched:
            raise redis_errors.as_error(refused)

    def _log_bad_key(self, name: str, error: str) -> None:
        now = time.monotonic()
        if now - self._bad_keys_logged.get(name, -1e9) > 60:
            self._bad_keys_logged[name] = now
            if redis_errors.classify(error) == redis_errors.WRONGTYPE:
                logger.error("queue key %s holds the wrong type: skipped (other queues keep running)", name)
            else:
                logger.error("queue key %s can't be read (%s): skipped (other queues keep running)", name, error)

