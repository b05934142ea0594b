"""The master's watch over its running children: the heartbeat it writes for itself and
them (and what a refused beat means: fenced), --max-memory, hard timeouts. A mixin of
``Master``."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import psutil

from ..config import Config, logger
from ..core import heartbeat
from .children import ChildState
from .reaped import TIMEOUT_GRACE
from .shards import Shard
from .slots import Slots

FENCED_GRACE = 2.0  # a child told it was declared dead, still there after this, is killed


class WatchMixin:
    s: Any  # Settings
    config: Config
    identity: str
    started_at: float
    children: dict[int, ChildState]
    slots: Slots
    quiet: bool
    stopping: bool
    target: int
    shards: list[Shard]

    if TYPE_CHECKING:  # the master's, or another mixin's (never shadow them at run time)
        client: Any

        def refresh(self, child: ChildState) -> bool: ...
        def kill_child(self, child: ChildState, reason: str) -> None: ...
        def stop_child(self, child: ChildState, reason: str) -> None: ...
        def on_control(self, command: str | None) -> None: ...

    def beat(self) -> None:
        # An operator's request first, so the record written below already shows it.
        self.on_control(heartbeat.take_control(self.config, self.identity, self.client))
        for child in self.children.values():
            self.refresh(child)
        live = [child for child in self.children.values() if child.fenced_at is None]
        records = [heartbeat.ProcessRecord(self.identity, "master", os.getpid(),
                                           [q for q, _ in self.s.queues], self.started_at,
                                           busy=sum(1 for c in self.children.values() if c.running),
                                           rss=heartbeat.rss_of(), owns_list=False,
                                           state="stopping" if self.stopping else "quiet" if self.quiet else "",
                                           extra={"procs": self.target,
                                                  "children": sum(1 for c in live if c.ready)})]
        sent = heartbeat.clock()
        refused, cancelled = self.beat_shards(records, live)
        for child in live:
            self.tell_cancelled(child, cancelled)
            if child.identity in refused:
                logger.warning("master: child %d (pid %d) was declared dead elsewhere (fenced): it leaves now",
                               child.index, child.pid)
                child.fenced_at = time.monotonic()
                self.slots.set_fenced(child.index)
        # Written after the flags: a child that reads this stamp sees its flag too. It
        # vouches for the children while fresh (they beat for themselves once it is stale).
        self.slots.stamp_beat(sent)

    def beat_shards(self, records: list[heartbeat.ProcessRecord], live: list[ChildState]) -> tuple[set[str], set[str]]:
        """One beat.lua per shard, for the children working it (the master's own record
        rides with the first; in the queue layout it goes to the fleet's keys on its own).
        Returns who was refused (fenced) and which running jids were cancelled."""
        refused: set[str] = set()
        cancelled: set[str] = set()
        sharded = self.shards[0].name is not None
        if sharded:
            heartbeat.beat(self.config, records, client=self.client)
            records = []
        for shard in self.shards:
            mine = records + [self.child_record(c) for c in live if c.shard == shard.number]
            records = []
            if mine:
                told = heartbeat.beat(shard.config, mine, client=None if sharded else self.client)
                refused.update(told.refused)
                cancelled.update(told.cancelled)
        return refused, cancelled

    def tell_cancelled(self, child: ChildState, cancelled: set[str]) -> None:
        """The child's slot names one cancelled jid at a time; with several jobs in flight
        (``--concurrency``), one more per beat (the beat reports them as long as they run)."""
        running = {job["jid"] for job in child.flying or ([child.running] if child.running else [])}
        child.told &= running
        for jid in sorted((cancelled & running) - child.told):
            self.slots.set_cancelled(child.index, jid)
            child.told.add(jid)
            return

    def check_fenced(self) -> None:
        """A fenced child leaves on its own within a fraction of a second; one that
        doesn't (stuck in C code) is killed: its job runs elsewhere now."""
        for child in self.children.values():
            if child.fenced_at is not None and time.monotonic() > child.fenced_at + FENCED_GRACE \
                    and child.stop_reason != "fenced":
                self.kill_child(child, "fenced")

    def child_record(self, child: ChildState) -> heartbeat.ProcessRecord:
        running = None
        if child.running:
            running = {k: v for k, v in child.running.items() if k != "deadline"}
            if len(child.flying) > 1:  # the others in flight: beat.lua checks their cancel marks too
                running["also"] = ",".join(job["jid"] for job in child.flying[1:])
        return heartbeat.ProcessRecord(child.identity, "child", child.pid, self.shards[child.shard].queue_names,
                                       child.started_at, busy=len(child.flying) or int(bool(child.running)),
                                       rss=child.rss,
                                       running=running, extra={"ppid": os.getpid()})

    def check_memory(self) -> None:
        for child in list(self.children.values()):
            try:
                child.rss = psutil.Process(child.pid).memory_info().rss
            except psutil.Error:
                continue
            limit = self.s.max_memory_mb
            if limit and child.rss > limit * 1024 * 1024 and not child.stop_sent:
                logger.warning("master: child %d uses %.0f MB (> --max-memory %.0f): replacing it after its job",
                               child.index, child.rss / 2**20, limit)
                self.stop_child(child, "memory")

    def check_timeouts(self) -> None:
        now = time.time()
        for child in self.children.values():
            self.refresh(child)
            # Several in flight (--concurrency): an async job past its timeout is
            # cancelled by its child before this; one still here blocks the child.
            for running in child.flying or ([child.running] if child.running else []):
                if running.get("deadline") and now > running["deadline"] + TIMEOUT_GRACE \
                        and child.stop_reason != "timeout":
                    logger.error("master: jid=%s ran %.0fs past its timeout: killing child %d", running["jid"],
                                 now - running["deadline"], child.index)
                    self.kill_child(child, "timeout")
