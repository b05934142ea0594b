"""One identity's in-progress list: the only ways a job leaves it are acknowledging,
handing back, filing into retry/dead and parking in ``unsettled``.

Every script here is refused (``Fenced``, and ``fenced`` set) once the identity was
declared dead. Those that refresh its beat also renew its lease: until ``clock()``
passes ``confirmed_at`` + half the orphan threshold nobody can have declared it dead, so
a job it holds may start without asking Redis first. ``beats=False``: another process
acting for a gone identity (its beat is not refreshed).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from .. import store
from ..boundedjson import TooDeep, shallow
from ..boundedjson import loads as json_loads
from ..config import Config, as_bytes_list, logger
from ..errors import Fenced
from ..transitions import declare, fetch, settle
from ..transitions.settle import Requeued
from .heartbeat import clock
from .payload import priority_of
from .workflow import Completion

ORPHANINGS_TTL = 7 * 24 * 3600
# An iterable job's checkpoint lives this long after its last write (it is renewed at every
# checkpoint, and its payload carries the cursor whenever it is requeued or filed).
CHECKPOINT_TTL = 7 * 24 * 3600


def _top(raw: bytes | str) -> dict[str, Any]:
    """The payload's top-level object ({} if it isn't one)."""
    try:
        value = json_loads(raw)
    except TooDeep:
        value = shallow(raw)  # its top level still names it
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _text_field(raw: bytes | str, name: str) -> str | None:
    # As _top, inline: a jid is read this way once per job (the ack's orphan counter).
    try:
        value = json_loads(raw)
    except TooDeep:
        value = shallow(raw)  # its top level still names it
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get(name), str):
        return value[name]
    return None


def jid_of(raw: bytes) -> str:
    return _text_field(raw, "jid") or "?"


class Owned:
    """A step on an in-progress list: a refusal (``Fenced``: its identity was declared
    dead) is remembered in the list's ``fenced`` and raised on. A class, not a
    ``contextmanager``: some steps run once per job."""

    __slots__ = ("of",)

    def __init__(self, of: InProgressList) -> None:
        self.of = of

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if kind is not None and issubclass(kind, Fenced):
            self.of.fenced = True


class InProgressList:
    def __init__(self, config: Config, identity: str, beats: bool = True) -> None:
        self.config = config
        self.keys = config.keys
        self.identity = identity
        self.in_progress = self.keys.in_progress(identity)
        self.fence_key = self.keys.fenced(identity)
        self.beat_as = identity if beats else ""
        self.fenced = False
        self.owned = Owned(self)  # ``with self.owned:`` around each step on the list
        self.confirmed_at = float("-inf")
        self.lease = config.orphan_threshold / 2

    @property
    def client(self) -> store.Client:
        return self.config.redis()

    def vouch(self, at: float) -> None:
        """This identity's beat was refreshed, and it was not fenced, at ``at`` (``clock()``)."""
        if at > self.confirmed_at:
            self.confirmed_at = at

    def _vouched(self, sent: float) -> None:
        if self.beat_as:
            self.vouch(sent)

    def lease_left(self, vouched_at: float = float("-inf")) -> float:
        """Seconds before someone could declare this identity dead (``vouched_at``: when
        another process last refreshed its beat for it)."""
        return max(self.confirmed_at, vouched_at) + self.lease - clock()

    def confirm(self) -> None:
        """Refreshes the beat, or raises ``Fenced``: asked before starting a job when the
        lease has run out."""
        sent, keys = clock(), self.keys
        with self.owned:
            fetch.confirm(
                self.client,
                fence=self.fence_key,
                last_beat=keys.last_beat,
                in_progress=self.in_progress,
                identities=keys.in_progress_identities,
                identity=self.identity,
            )
        self._vouched(sent)

    def acknowledge(self, raw: bytes) -> None:
        sent, keys = clock(), self.keys
        with self.owned:
            settle.ack(
                self.client,
                in_progress=self.in_progress,
                orphans=keys.orphanings(jid_of(raw)),
                fence=self.fence_key,
                last_beat=keys.last_beat,
                job=raw,
                identity=self.beat_as,
            )
        self._vouched(sent)

    ack = acknowledge

    def carry(self, raw: bytes, jid: str | None = None) -> None:
        """The ride-along ack (``settlement``): a list with no fetch of its own (the
        master's, a bare list) has nothing for it to ride on, so it is written at once.
        The worker holds it for its next fetch instead."""
        self.acknowledge(raw)

    def cancelled(self, payload: dict[str, Any], event: dict[str, Any]) -> None:
        """A run of this process ended cancelled: only the process that ran it records
        that (the worker's log line and history entry); a bare list ran nothing."""

    def back_keys(self, raw: bytes | str) -> tuple[str, list[str]]:
        """The queue a job goes back on and its unique lock (none, or one), read from its
        payload as the scripts read it: the default queue when it names none or can't be read."""
        top = _top(raw)
        queue, digest = top.get("queue"), top.get("unique_digest")
        name = queue if isinstance(queue, str) and queue else "default"
        return self.keys.job_queue(name, priority_of(top)), [self.keys.unique(digest)] if isinstance(
            digest, str
        ) and digest else []

    def give_back(self, raw: bytes) -> bool:
        """Back on its queue, at the fetch end (it has not run). False if no longer ours."""
        queue, lock = self.back_keys(raw)
        with self.owned:
            return settle.give_back(
                self.client,
                in_progress=self.in_progress,
                fence=self.fence_key,
                queue=queue,
                wake=self.keys.wake,
                lock=lock,
                job=raw,
            )

    def file(self, raw: bytes, zset: str, score: float, entry: str | bytes) -> bool:
        """Into retry or dead, off the in-progress list, in one step. False if no longer ours."""
        sent, keys = clock(), self.keys
        with self.owned:
            dead = zset == keys.dead
            # A job of a workflow or batch filed in dead settles there: the keys its payload names.
            declared = declare.of_entry(keys, entry) if dead else []
            filed = settle.file(
                self.client,
                keys,
                in_progress=self.in_progress,
                zset=zset,
                orphans=keys.orphanings(jid_of(raw)),
                fence=self.fence_key,
                last_beat=keys.last_beat,
                **settle.settling_keys(keys),
                declared=declared,
                job=raw,
                score=repr(score),
                entry=entry,
                dead="dead" if dead else "",
                oldest=repr(time.time() - self.config.dead_timeout),
                most=self.config.dead_max_jobs,
                identity=self.beat_as,
                workflows="1",
                now=repr(time.time()),
                keep=self.config.status_max,
            )
        self._vouched(sent)
        return filed

    def complete(self, raw: bytes, done: Completion) -> bool:
        """A workflow job's ack with its result, its chain's next step and its group's
        counter, in one step (``complete.lua``). False if no longer ours (a replay)."""
        sent, keys = clock(), self.keys
        with self.owned:
            reply = settle.complete(
                self.client,
                keys,
                in_progress=self.in_progress,
                orphans=keys.orphanings(done.jid),
                fence=self.fence_key,
                last_beat=keys.last_beat,
                result=keys.result(done.jid),
                result_wait=keys.result_wait(done.jid),
                next_queue_key=keys.queue(done.next_queue),
                **settle.settling_keys(keys),
                group=keys.group(done.group),
                group_wait=keys.group_wait(done.group),
                batch_key=keys.batch(done.batch),
                batch_jobs=keys.batch_jobs(done.batch),
                chain_mark=[keys.cancelled(done.chain)] if done.chain and done.next_payload else [],
                declared=[],
                job=raw,
                identity=self.beat_as,
                jid=done.jid,
                value=done.value,
                ttl=done.ttl,
                now=repr(time.time()),
                group_id=done.group,
                member=done.member,
                next_payload=done.next_payload,
                next_queue=done.next_queue,
                batch_id=done.batch,
                keep=self.config.status_max,
            )
        self._vouched(sent)
        for error in reply.errors:
            logger.error("jid=%s settled, but its workflow couldn't record all of it: %s", done.jid, error)
        return reply.done

    def park_unsettled(self, raw: bytes, record: str) -> bool:
        """Into ``unsettled`` (a failure to file later, never re-run). False if no longer ours."""
        with self.owned:
            return settle.park_unsettled(
                self.client,
                in_progress=self.in_progress,
                unsettled=self.keys.unsettled,
                fence=self.fence_key,
                job=raw,
                record=record,
            )

    park = park_unsettled

    def suspend(self, raw: bytes, entry: str, jid: str, cursor: str, done: int) -> bool:
        """An iterable job stopped at a yield: its checkpoint saved and ``entry`` (it, with
        its cursor) back on its queue, in one script. False if no longer ours."""
        sent, keys = clock(), self.keys
        queue, lock = self.back_keys(entry)
        with self.owned:
            suspended = settle.suspend(
                self.client,
                keys,
                in_progress=self.in_progress,
                fence=self.fence_key,
                checkpoint=keys.checkpoint(jid),
                last_beat=keys.last_beat,
                index=keys.retained_checkpoints,
                queue=queue,
                wake=keys.wake,
                lock=lock,
                declared=(),
                job=raw,
                entry=entry,
                done=done,
                cursor=cursor,
                ttl=CHECKPOINT_TTL,
                identity=self.beat_as,
                now=repr(time.time()),
                keep=self.config.status_max,
            )
        self._vouched(sent)
        return suspended

    def checkpoint(self, jid: str, cursor: str, done: int, state: str = "running", ttl: int = CHECKPOINT_TTL) -> bool:
        """Saves an iterable job's cursor (refused, ``Fenced``, once this identity was
        declared dead); False if a newer checkpoint is there (more items done)."""
        sent = clock()
        with self.owned:
            saved = settle.checkpoint(
                self.client,
                self.keys,
                checkpoint=self.keys.checkpoint(jid),
                fence=self.fence_key,
                last_beat=self.keys.last_beat,
                index=self.keys.retained_checkpoints,
                declared=(),
                done=done,
                cursor=cursor,
                ttl=ttl,
                identity=self.beat_as,
                now=repr(time.time()),
                state=state,
                keep=self.config.status_max,
            )
        self._vouched(sent)
        return saved

    def return_ahead(self, number: int, started: int = 0) -> int:
        """This identity's look-ahead jobs of fetch ``number`` not started (``started``:
        how many of them it did), back on their queues; how many went (another process
        calls this, holding the owner's lock)."""
        keys = self.keys
        with self.owned:
            return fetch.return_ahead(
                self.client,
                keys,
                ahead=keys.ahead,
                in_progress=self.in_progress,
                fence=self.fence_key,
                wake=keys.wake,
                declared=(),
                owner=self.identity,
                number=number,
                default_queue="default",
                started=started,
            )

    def requeue_all(
        self,
        drop: Iterable[bytes] = (),
        keep: Iterable[bytes] = (),
        count_orphanings: bool | str = False,
        mode: str = "own",
    ) -> Requeued:
        """Everything on the list back on its queues, in order, in one script.

        ``mode``: "own": the owner's requeue as it leaves (refused, ``Fenced``, if it was
        declared dead meanwhile); "reclaim": for an owner known dead (a reaped child),
        fenced in the same step if anything was listed; "dead:<beat>": orphan recovery's,
        only if the beat is still ``<beat>`` and there is no process key.
        ``count_orphanings``: one per job (True), or for the jobs of those jids only
        (one a line: the ones its owner ran), parking those past ``max_orphanings``.
        ``drop``: jobs that finished but whose ack is missing (dropping them is the ack).
        ``keep``: jobs left on the list untouched.
        """
        keys = self.keys
        count = "*" if count_orphanings is True else f"j:{count_orphanings}" if count_orphanings else ""
        with self.owned:
            return settle.requeue(
                self.client,
                keys,
                in_progress=self.in_progress,
                process=keys.process(self.identity),
                last_beat=keys.last_beat,
                repeat_orphans=keys.repeat_orphans,
                dead=keys.dead,
                fence=self.fence_key,
                wake=keys.wake,
                declared=(),
                default_queue="default",
                identity=self.identity,
                mode=mode,
                now=repr(time.time()),
                orphanings_ttl=ORPHANINGS_TTL,
                max_orphanings=self.config.max_orphanings,
                count=count,
                marks=[b"d:" + raw for raw in drop] + [b"k:" + raw for raw in keep],
            )

    def listed(self) -> list[bytes]:
        return as_bytes_list(self.client.lrange(self.in_progress, 0, -1))
