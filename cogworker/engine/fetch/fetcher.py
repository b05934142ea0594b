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
from ...store import errors as redis_errors
from ...store import replication, server, wire
from ...store.wakewait import WakeWait
from ...transitions import call as script
from ...transitions import fetch as scripts
from . import ahead as aheadfetch
from . import fast as fastfetch
from .idle import EmptyQueues
from .levels import Levels
from .work import MARK, Ahead, Fast, Fixed, Work

# The fast fetch pays off for large jobs only (no payload enters Lua, where Redis hashes
# every byte), and costs small ones more Redis work (6 more commands a job); the last
# job's size predicts the next one's (docs/architecture.md#fast-fetch).
FAST_MIN_BYTES = 4096


def large(raw: bytes | None) -> bool:
    """A job big enough that its next fetch goes alone, by the fast fetch (K = 1)."""
    return raw is not None and len(raw) >= FAST_MIN_BYTES


def check_redis_version(client: store.Client) -> None:
    """Refuses (``RedisVersionError``, one line) a server cogworker can't run on."""
    server.check(client)


class Fetcher(InProgressList):
    """Queue order and the blocking fetch (and look-ahead's scripts) for one identity,
    on top of its in-progress list. Each script is refused (``Fenced``, and ``fenced``
    set) once the identity was declared dead."""

    def __init__(
        self,
        config: Config,
        identity: str,
        queues: list[tuple[str, int | None]],
        block_timeout: float = 1.0,
        beats: bool = True,
    ) -> None:
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
        self._ahead_sha = ""
        self._queue_keys = {name: self.keys.queue(name) for name in self.queues}
        # The fast fetch's guess: the first queue of this fetch's order that gave the last
        # job it was asked for (queues found empty before it since are dropped).
        self._busy: set[str] = set(self.queues[:1])
        self.empty = EmptyQueues(self.queues)
        self.levels = Levels(self.queues)
        self.wake_wait = WakeWait()  # a stop cuts the idle wait short (Worker.stop)
        # fetch.lua's KEYS and ARGV that never change for this identity, encoded once, as
        # the client would encode them at every call (``_fixed``); the queues' keys too,
        # per order (a strict order is the same list each time). A fetch runs once per job.
        self._encoded: Fixed | None = None
        self._named_for: tuple[list[str] | None, list[bytes]] = (None, [])

    def plan(self, whole: bool = False) -> tuple[list[str], str, bool]:
        """This fetch's order, without the queues known to be empty and cut after the one
        that gave the last job, its ``since``, and whether it was cut (EmptyQueues.plan);
        each queue's priority levels named around it (Levels)."""
        if self.levels.due():
            self._read_levels()
        return self.empty.plan(self.levels.expand(self.order()), whole)

    def _read_levels(self) -> None:
        """The levels in use, read again; their lists' keys known from now on."""
        if self.levels.read(self.client, self.keys):
            for name in self.levels.base:
                self._queue_keys.setdefault(name, self.keys.queue(name))
            self.empty.forget()

    def order(self) -> list[str]:
        if not self.weighted:
            return self.queues
        # Sidekiq's weighted order: a queue with weight 3 is three times as likely to be tried first.
        pool = self._pool[:]
        random.shuffle(pool)
        return list(dict.fromkeys(pool))

    def fetch(
        self, ack: bytes | None = None, ack_jid: str | None = None, on_empty: Callable[[], Work | None] | None = None
    ) -> Work | None:
        """One job from the first non-empty queue, or None after blocking ``block_timeout``.

        ``ack``: the previous job, acknowledged in the same round trip (``ack_jid``: its
        jid, if the caller knows it, to spare parsing it again). ``on_empty``: asked for
        a job from elsewhere when every queue is empty, before blocking.
        """
        # Every idle worker blocks on the wake stream (pushes filling a queue XADD it), never on a
        # queue: a BLMOVE would take a job without reading the paused set.
        blocking = self.block_timeout > 0
        blocks = b"1" if blocking else b""  # the script returns the wake ID to block from
        work, wake_id, again = self._fetch_once(ack, ack_jid, blocks)
        if again:  # a queue left out may have a job now: again, naming every queue (the ack landed)
            work, wake_id, _ = self._fetch_once(None, None, blocks, whole=True)
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
        self._read_levels()  # the push that woke it may have been a new level's first
        return None  # the caller fetches again through the script

    def _fetch_once(
        self, ack: bytes | None, ack_jid: str | None, blocks: bytes, whole: bool = False
    ) -> tuple[Work | None, Any, bool]:
        """One fetch: its job, the wake ID to block from, and whether to fetch again at
        once naming every queue (it was stale, or cut short and found nothing)."""
        order, since, cut = self.plan(whole)
        if self._fast_allowed(ack):
            work, wake_id, stale = self._fetch_fast(order, since, ack, ack_jid, blocks)
            return work, wake_id, stale or (cut and work is None)
        call = self._fetch_call(order, since, ack, ack_jid, blocks, b"", b"")
        sent = clock()
        with self.owned:
            reply = scripts.fetched(self.client, call)
        if self.beat_as:  # its beat refreshed (inline: once per job)
            self.vouch(sent)
        work, stale = self._work_of(reply, order, since)
        return work, reply[2], stale or (cut and work is None)  # reply[2]: wake_id

    def _fetch_call(
        self,
        order: list[str],
        since: str,
        ack: bytes | None,
        ack_jid: str | None,
        block: script.Arg,
        owner: script.Arg,
        number: script.Arg,
    ) -> script.Call:
        """fetch.lua's call: ``ack`` riding (``ack_jid``: its jid, if known), ``block``:
        "1" to block on the wake stream after, or ""; a look-ahead's record (``owner``,
        ``number``; "" for none)."""
        in_progress, fence, last_beat, wake, paused, ahead, identity, queue_prefix = self._encoded or self._fixed()
        named, queues = self._named_for
        if named is not order:
            queues = self._queue_list(order)
        return scripts.fetch(
            in_progress=in_progress,
            orphans=self.keys.orphanings((ack_jid or jid_of(ack)) if ack else "-"),
            fence=fence,
            last_beat=last_beat,
            wake=wake,
            paused=paused,
            ahead=ahead,
            queues=queues,
            ack=ack or b"",
            block=block,
            owner=owner,
            number=number,
            identity=identity,
            queue_prefix=queue_prefix,
            since=since or b"",
        )

    def _fixed(self) -> Fixed:
        """What every fetch of this identity sends alike, encoded by the client's own
        encoder: the same bytes on the wire, without an encoding per call."""
        encode = self.client.get_encoder().encode
        keys = self.keys
        self._encoded = Fixed(
            in_progress=encode(self.in_progress),
            fence=encode(self.fence_key),
            last_beat=encode(keys.last_beat),
            wake=encode(keys.wake),
            paused=encode(keys.paused),
            ahead=encode(keys.ahead),
            identity=encode(self.beat_as),
            queue_prefix=encode(keys.queue_prefix),
        )
        return self._encoded

    def _queue_list(self, order: list[str]) -> list[bytes]:
        """The keys of the queues ``order`` names, encoded; kept for the next fetch of that same list."""
        encode = self.client.get_encoder().encode
        queues = [encode(self._queue_keys[q]) for q in order]
        self._named_for = (order, queues)
        return queues

    def send_ahead(
        self,
        number: int,
        ack: bytes | None = None,
        ack_jid: str | None = None,
        k: int = 1,
        older: tuple[aheadfetch.Ack, ...] = (),
        riders: tuple[script.Call, ...] = (),
    ) -> Ahead:
        """Sends the fetch script (never blocking) without waiting for its reply; the
        jobs it takes (up to ``k``) land on this identity's in-progress list like any
        other, and are recorded under ``number`` so an idle sibling may take them
        (``take_ahead``). ``older``: acks due before ``ack``, riding along too;
        ``riders``: best-effort writes sent first in the same round trip (``read_riders``)."""
        order, since, _ = self.plan()  # cut and came back empty: the next fetch names every queue
        conn = self._ahead_conn
        if conn is None or self._ahead_pid != os.getpid():
            # Held for good, not borrowed per job: the pool's bookkeeping costs as much as
            # the send. A job using the client meanwhile gets another connection.
            client = self.client
            conn = self._ahead_conn = client.connection_pool.make_connection()
            self._ahead_pid = os.getpid()
            self._fetch_sha = script.sha(client, "fetch")
            self._moved_sha = script.sha(client, "fetch_moved")
            self._ahead_sha = ""
        sent = clock()
        fast = None
        if k > 1 or older:
            acks = [*older, *([(ack, ack_jid)] if ack is not None else [])]
            if self.lease_left() > 0:  # the acks' LREMs may go ahead of the fence check
                fast, multi = aheadfetch.moved_commands(
                    self,
                    self._encoded or self._fixed(),
                    script.sha(self.client, "fetch_ahead_moved"),
                    order,
                    number,
                    k,
                    acks,
                    self._guess(order),
                    since,
                )
                need = self._send(conn, multi, riders)
                return Ahead(conn, order, ack, sent, fast, tuple(raw for raw, _ in acks), True, since, k, need, riders)
            if not self._ahead_sha:  # loaded here: no plain call of it loads it (after a flush too)
                self._ahead_sha = script.load(self.client, "fetch_ahead")
            need = self._send(
                conn,
                [
                    aheadfetch.command(
                        self, self._encoded or self._fixed(), self._ahead_sha, order, number, k, acks, since
                    )
                ],
                riders,
            )
            return Ahead(conn, order, ack, sent, None, tuple(raw for raw, _ in acks), True, since, k, need, riders)
        if self._fast_allowed(ack):
            fast, commands = self._fast_commands(order, since, ack, ack_jid, "", (self.identity, number))
        else:
            call = self._fetch_call(order, since, ack, ack_jid, "", self.identity, number)
            commands = [script.as_command(self._fetch_sha, call)]
        need = self._send(conn, commands, riders)
        return Ahead(conn, order, ack, sent, fast, since=since, need=need, riders=riders)

    def _send(
        self, conn: Any, commands: Sequence[tuple[Any, ...] | bytes], riders: tuple[script.Call, ...] = ()
    ) -> replication.Need | None:
        need = replication.need_of(self.client)
        if riders:  # first: their replies are read first, each on its own (``read_riders``)
            commands = [*(script.as_command(script.sha(self.client, c.script), c) for c in riders), *commands]
        if need is not None:  # wait_replicas: the fetch's move is replicated before its job starts
            commands = [*commands, need.command()]
        try:
            conn.send_packed_command(wire.packed(conn, commands), check_health=False)
        except BaseException:
            conn.disconnect()
            raise
        return need

    def read_riders(self, ahead: Ahead) -> list[script.Call]:
        """The replies of the writes that rode in front of the look-ahead fetch, read before
        its own; the riders Redis refused (NOSCRIPT after a flush, say), to be written again."""
        refused: list[script.Call] = []
        for rider in ahead.riders:
            try:
                ahead.conn.read_response()
            except store.ResponseError as exc:
                logger.debug("a write riding on the fetch was refused (%s: %s): written again", type(exc).__name__, exc)
                refused.append(rider)
        return refused

    def read_ahead_all(self, ahead: Ahead) -> list[Work]:
        """Every job the look-ahead took, oldest first (``read_ahead`` for K > 1 too)."""
        if not ahead.many:
            work = self.read_ahead(ahead)
            return [work] if work is not None else []
        if ahead.fast is not None:
            fast = ahead.fast
            replies = replication.read_then_wait(ahead.conn, ahead.need, lambda: fastfetch.replies(ahead.conn, fast))
            reply = self._checked(replies[-1], fast)
            self.vouch(ahead.sent_at)
            works, bad, newest, paused, stale = aheadfetch.moved_works(replies, reply, fast, ahead.order, ahead.k)
        else:
            try:
                reply = replication.read_then_wait(ahead.conn, ahead.need, ahead.conn.read_response)
            except store.NoScriptError:
                self._ahead_sha = ""  # loaded again before the next one
                raise
            except store.ResponseError as exc:
                self._raise_fenced(exc)
                raise
            self.vouch(ahead.sent_at)
            works, bad, newest, paused, stale = aheadfetch.works(reply, ahead.order)
        if bad:
            self._bad_keys(bad, fetched=bool(works))
        index = ahead.order.index(works[-1].queue) if works else len(ahead.order)
        # Fewer than asked: every queue named was empty at the end.
        before = index if len(works) == ahead.k else len(ahead.order)
        self.empty.learn(ahead.order, ahead.since, newest, stale, before, paused)
        if works:
            self._busy.difference_update(ahead.order[:index])
            self._busy.add(works[-1].queue)
            if self.levels.base:  # a level's job is its queue's
                base = self.levels.base
                works = [Work(w.raw, base.get(w.queue, w.queue)) for w in works]
        return works

    def read_ahead(self, ahead: Ahead) -> Work | None:
        """The look-ahead's job, or None if every queue was empty. Raises what the fetch
        raised: ``store.NoScriptError`` means it did not run at all."""
        if ahead.fast is not None:
            work, _, _ = self._read_fast(ahead.conn, ahead.fast, ahead.order, ahead.since, ahead.sent_at, ahead.need)
            return work
        try:
            reply = replication.read_then_wait(ahead.conn, ahead.need, ahead.conn.read_response)
        except store.ResponseError as exc:
            self._raise_fenced(exc)
            raise
        self.vouch(ahead.sent_at)
        return self._work_of(scripts.fetch_reply(reply), ahead.order, ahead.since)[0]

    def _guess(self, order: list[str]) -> int:
        """The first queue of ``order`` that gave the last job it was asked for."""
        return next((i for i, q in enumerate(order) if q in self._busy), 0)

    def _fast_commands(
        self,
        order: list[str],
        since: str,
        ack: bytes | None,
        ack_jid: str | None,
        blocks: script.Arg,
        ahead: tuple[Any, Any],
    ) -> tuple[Fast, list[tuple[Any, ...]]]:
        guess = self._guess(order)
        fixed = self._encoded or self._fixed()
        named, queues = self._named_for
        if named is not order:
            queues = self._queue_list(order)
        call = scripts.fetch_moved(
            in_progress=fixed.in_progress,
            orphans=self.keys.orphanings((ack_jid or jid_of(ack)) if ack else "-"),
            fence=fixed.fence,
            last_beat=fixed.last_beat,
            wake=fixed.wake,
            paused=fixed.paused,
            ahead=fixed.ahead,
            queues=queues,
            acked="1" if ack else "",
            block=blocks,
            owner=ahead[0],
            number=ahead[1],
            identity=fixed.identity,
            queue_prefix=fixed.queue_prefix,
            mark=MARK,
            guess=scripts.FIRST_QUEUE + guess,  # its index in KEYS
            since=since,
        )
        commands = fastfetch.commands(self._sha_moved(), call, fixed.in_progress, queues[guess], ack)
        return Fast(len(commands) - 2, call, guess), commands

    def _fast_allowed(self, ack: bytes | None) -> bool:
        """The fast fetch's ack is a plain LREM, in front of the fence check: sent only
        while the lease holds, when nobody can have fenced this identity yet
        (docs/architecture.md#lease). Otherwise fetch.lua carries the ack behind its check.
        Only for a large last job: a small one's fetch is cheaper in fetch.lua."""
        return large(ack) and self.lease_left() > 0

    def _sha_moved(self) -> str:
        if not self._moved_sha:
            self._moved_sha = script.sha(self.client, "fetch_moved")
        return self._moved_sha

    def _fetch_fast(
        self, order: list[str], since: str, ack: bytes | None, ack_jid: str | None, blocks: script.Arg
    ) -> tuple[Work | None, Any, bool]:
        fast, commands = self._fast_commands(order, since, ack, ack_jid, blocks, ("", ""))
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

    def _read_fast(
        self, conn: Any, fast: Fast, order: list[str], since: str, sent: float, need: replication.Need | None
    ) -> tuple[Work | None, Any, bool]:
        replies = replication.read_then_wait(conn, need, lambda: fastfetch.replies(conn, fast))
        return self._settle_fast(replies, fast, order, since, sent)

    def _settle_fast(
        self, replies: list[Any], fast: Fast, order: list[str], since: str, sent: float
    ) -> tuple[Work | None, Any, bool]:
        """The script's reply decides; the job is the LMOVE's reply when the move stood."""
        reply = scripts.fetch_reply(self._checked(replies[-1], fast))
        self.vouch(sent)
        work, stale = self._work_of(reply, order, since, moved=replies[-2])
        return work, reply.wake_id, stale

    def _checked(self, reply: Any, fast: Fast) -> Any:
        """A MULTI's script reply, or its error raised."""
        if isinstance(reply, store.ResponseError):
            if not isinstance(reply, store.NoScriptError) and not str(reply).startswith("NOSCRIPT"):
                self._raise_fenced(reply)
                raise reply
            # Scripts flushed: the plain commands ran, the script did not. It runs now on
            # what they left (nothing else touches this list's head meanwhile: a take or a
            # return needs the `ahead` record, which only the script writes), and loads.
            with self.owned:
                reply = script.run(self.client, fast.call)
        return reply

    def _work_of(
        self, reply: scripts.FetchReply, order: list[str], since: str, moved: Any = None
    ) -> tuple[Work | None, bool]:
        """fetch.lua's (or fetch_moved.lua's) reply: the job, and whether the fetch was stale."""
        index, job, _, empty_at, paused, bad = reply  # unpacked: once per job, cheaper than by name
        if bad:
            self._bad_keys(bad, fetched=index > 0)
        self.empty.learn(
            order,
            since,
            as_text(empty_at),
            index < 0,
            index - 1 if index > 0 else len(order),
            [as_text(name) for name in paused],
        )
        if index <= 0:
            return None, index < 0
        queue = order[index - 1]
        if index > 1:  # every queue tried before this one was empty (or paused) just now
            self._busy.difference_update(order[: index - 1])
        self._busy.add(queue)
        if self.levels.base:  # a level's job is its queue's
            queue = self.levels.base.get(queue, queue)
        # fetch_moved.lua says nil when the job is its LMOVE's reply; an entry may be b"".
        return Work(moved if job is None else job, queue), False

    def _raise_fenced(self, exc: store.ResponseError) -> None:
        with self.owned:
            script.raise_if_fenced(exc)

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
        keys = self.keys
        with self.owned:
            raw = scripts.take_ahead(
                self.client,
                ahead=keys.ahead,
                sibling_list=keys.in_progress(sibling),
                in_progress=self.in_progress,
                fence=self.fence_key,
                sibling_fence=keys.fenced(sibling),
                sibling=sibling,
                number=number,
                started=started,
            )
        if not raw:
            return None
        return Work(raw, _text_field(raw, "queue") or self.queues[0])

    def claim_ahead(self, number: int, started: int = 0) -> int:
        """How many of our look-ahead fetch ``number``'s jobs not started (``started``:
        how many we did) are still ours (nobody took or returned them: the oldest), and
        from now on nobody can take them (the caller holds our lock)."""
        with self.owned:
            return scripts.claim_ahead(
                self.client,
                ahead=self.keys.ahead,
                fence=self.fence_key,
                owner=self.identity,
                number=number,
                started=started,
            )

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
