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
from typing import Any, NamedTuple

from .. import store
from ..boundedjson import TooDeep, shallow
from ..boundedjson import loads as json_loads
from ..config import Config, as_bytes_list, logger
from ..errors import Fenced
from ..store import lua
from .heartbeat import clock
from .workflow import Completion

ORPHANINGS_TTL = 7 * 24 * 3600
# An iterable job's checkpoint lives this long after its last write (it is renewed at every
# checkpoint, and its payload carries the cursor whenever it is requeued or filed).
CHECKPOINT_TTL = 7 * 24 * 3600


class Requeued(NamedTuple):
    moved: int  # -1: orphan recovery's requeue found the owner alive
    fenced_now: bool  # this requeue fenced the identity (it wasn't yet)
    buried: list[bytes]  # repeat orphans the script filed in dead raw (the caller completes them)
    # For a gone owner's list ("reclaim", "dead:"): "c"/"u" (an orphaning counted or not)
    # alternating with each job moved or parked, for the ``orphaned`` hook.
    orphaned: list[bytes] = []


def _text_field(raw: bytes, name: str) -> str | None:
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


class InProgressList:
    def __init__(self, config: Config, identity: str, beats: bool = True) -> None:
        self.config = config
        self.keys = config.keys
        self.identity = identity
        self.in_progress = self.keys.in_progress(identity)
        self.fence_key = self.keys.fenced(identity)
        self.beat_as = identity if beats else ""
        self.fenced = False
        self.confirmed_at = float("-inf")
        self.lease = config.orphan_threshold / 2

    @property
    def client(self) -> store.Client:
        return self.config.redis()

    def _run(self, name: str, keys: list[Any], args: list[Any], beats: bool = False) -> Any:
        sent = clock()
        try:
            reply = lua.run(self.client, name, keys, args)
        except Fenced:
            self.fenced = True
            raise
        if beats and self.beat_as:
            self.vouch(sent)
        return reply

    def vouch(self, at: float) -> None:
        """This identity's beat was refreshed, and it was not fenced, at ``at`` (``clock()``)."""
        if at > self.confirmed_at:
            self.confirmed_at = at

    def lease_left(self, vouched_at: float = float("-inf")) -> float:
        """Seconds before someone could declare this identity dead (``vouched_at``: when
        another process last refreshed its beat for it)."""
        return max(self.confirmed_at, vouched_at) + self.lease - clock()

    def confirm(self) -> None:
        """Refreshes the beat, or raises ``Fenced``: asked before starting a job when the
        lease has run out."""
        self._run("confirm", [self.fence_key, self.keys.last_beat, self.in_progress,
                              self.keys.in_progress_identities], [self.identity], beats=True)

    def acknowledge(self, raw: bytes) -> None:
        self._run("ack", [self.in_progress, self.keys.orphanings(jid_of(raw)), self.fence_key, self.keys.last_beat],
                  [raw, self.beat_as], beats=True)

    ack = acknowledge

    def give_back(self, raw: bytes) -> bool:
        """Back on its queue, at the fetch end (it has not run). False if no longer ours."""
        return self._run("give_back", [self.in_progress, self.fence_key],
                         [raw, self.keys.queue_prefix, "default", self.keys.unique_prefix]) == 1

    def file(self, raw: bytes, zset: str, score: float, entry: str | bytes) -> bool:
        """Into retry or dead, off the in-progress list, in one step. False if no longer ours."""
        dead = zset == self.keys.dead
        args = [raw, repr(score), entry, "dead" if dead else "",
                repr(time.time() - self.config.dead_timeout), self.config.dead_max_jobs, self.beat_as,
                self.keys.workflow_prefix, repr(time.time())]
        return self._run("file", [self.in_progress, zset, self.keys.orphanings(jid_of(raw)), self.fence_key,
                                  self.keys.last_beat], args, beats=True) == 1

    def complete(self, raw: bytes, done: Completion) -> bool:
        """A workflow job's ack with its result, its chain's next step and its group's
        counter, in one step (``complete.lua``). False if no longer ours (a replay)."""
        reply = self._run("complete", [self.in_progress, self.keys.orphanings(done.jid), self.fence_key,
                                       self.keys.last_beat],
                          [raw, self.beat_as, self.keys.workflow_prefix, done.jid, done.value, done.ttl,
                           repr(time.time()), done.group, done.member, done.next_payload, done.next_queue,
                           done.batch],
                          beats=True)
        for error in reply[1:]:
            logger.error("jid=%s settled, but its workflow couldn't record all of it: %s", done.jid,
                         error.decode("utf-8", "replace") if isinstance(error, bytes) else error)
        return bool(reply[0] == 1)

    def park_unsettled(self, raw: bytes, record: str) -> bool:
        """Into ``unsettled`` (a failure to file later, never re-run). False if no longer ours."""
        return self._run("park_unsettled", [self.in_progress, self.keys.unsettled, self.fence_key],
                         [raw, record]) == 1

    park = park_unsettled

    def suspend(self, raw: bytes, entry: str, jid: str, cursor: str, done: int) -> bool:
        """An iterable job stopped at a yield: its checkpoint saved and ``entry`` (it, with
        its cursor) back on its queue, in one script. False if no longer ours."""
        return self._run("suspend", [self.in_progress, self.fence_key, self.keys.checkpoint(jid), self.keys.last_beat],
                         [raw, entry, self.keys.queue_prefix, "default", self.keys.unique_prefix, done, cursor,
                          CHECKPOINT_TTL, self.beat_as, repr(time.time())], beats=True) == 1

    def checkpoint(self, jid: str, cursor: str, done: int, state: str = "running", ttl: int = CHECKPOINT_TTL) -> bool:
        """Saves an iterable job's cursor (refused, ``Fenced``, once this identity was
        declared dead); False if a newer checkpoint is there (more items done)."""
        return self._run("checkpoint", [self.keys.checkpoint(jid), self.fence_key, self.keys.last_beat],
                         [done, cursor, ttl, self.beat_as, repr(time.time()), state], beats=True) == 1

    def return_ahead(self, number: int, started: int = 0) -> int:
        """This identity's look-ahead jobs of fetch ``number`` not started (``started``:
        how many of them it did), back on their queues; how many went (another process
        calls this, holding the owner's lock)."""
        return int(self._run("return_ahead", [self.keys.ahead, self.in_progress, self.fence_key],
                             [self.identity, number, self.keys.queue_prefix, "default", self.keys.unique_prefix,
                              started]))

    def requeue_all(self, drop: Iterable[bytes] = (), keep: Iterable[bytes] = (),
                    count_orphanings: bool | str = False, mode: str = "own") -> Requeued:
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
        marks = [b"d:" + raw for raw in drop] + [b"k:" + raw for raw in keep]
        count = "*" if count_orphanings is True else f"j:{count_orphanings}" if count_orphanings else ""
        reply = self._run("requeue", [self.in_progress, keys.process(self.identity), keys.last_beat,
                                      keys.repeat_orphans, keys.dead, self.fence_key],
                          [keys.queue_prefix, "default", keys.unique_prefix, self.identity, mode, repr(time.time()),
                           keys.orphanings_prefix, ORPHANINGS_TTL, self.config.max_orphanings, count, *marks])
        moved = int(reply[0])
        if moved < 0:
            return Requeued(moved, False, [])
        return Requeued(moved, int(reply[1]) == 1, list(reply[2]), list(reply[3]))

    def listed(self) -> list[bytes]:
        return as_bytes_list(self.client.lrange(self.in_progress, 0, -1))
