"""What the master knows of each child: its record (``ChildState``), kept current from the
shared memory the child writes (its slot; with ``--concurrency``, its flight entries) by a
``SlotReader``, which also adds what the child counted to the host's totals. Plain data
and reads: the master (prefork/master.py) decides what to do with them."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import psutil

from ..core import fate, heartbeat
from ..lifecycle.stats import StatsBuffer
from . import flight_slots
from .flight_slots import FlightSlots
from .slots import ACK_DUE, RUNNING, Slots


@dataclass
class ChildState:
    index: int
    pid: int
    identity: str
    conn: Connection
    started_at: float = field(default_factory=time.time)
    ready: bool = False
    running: dict[str, Any] | None = None  # jid, class, queue, deadline, run_at
    flying: list[dict[str, Any]] = field(default_factory=list)  # --concurrency > 1: every job it runs
    acks: set[str] = field(default_factory=set)  # jids that ran; their ack is due or riding on a fetch
    torn: bool = False  # died mid-write of its slot: what it ran is unknown
    owes: dict[str, fate.Decision] = field(default_factory=dict)  # what it told us it still owes
    stop_reason: str | None = None  # why the master stopped it: shutdown, timeout, memory, ...
    stop_sent: bool = False
    leave_by: float = 0.0  # monotonic: asked to leave, killed if still there then (--timeout)
    idle_since: float | None = None  # asked to leave and seen with no job since then
    counted: tuple[int, int] = (0, 0)  # its slot's processed, failed counters, as last read
    rss: int = 0
    fenced_at: float | None = None  # when a beat found it declared dead (it leaves on its own)
    told: set[str] = field(default_factory=set)  # cancelled jids written to its slot (one per beat)
    exit_why: str | None = None  # why the master first wanted it gone (restart, memory, ...), for /metrics
    shard: int = 0  # which of the master's shards it works (prefork/shards.py)

    def jobs(self) -> list[dict[str, Any]]:
        """Every job it runs now (several with ``--concurrency``)."""
        return self.flying or ([self.running] if self.running else [])

    def record(self, queue_names: list[str]) -> heartbeat.BeatRecord:
        """Its heartbeat record, which the master writes for it."""
        running = None
        if self.running:
            running = {k: v for k, v in self.running.items() if k != "deadline"}
            if len(self.flying) > 1:  # the others in flight: beat.lua checks their cancel marks too
                running["also"] = ",".join(job["jid"] for job in self.flying[1:])
        return heartbeat.BeatRecord(
            self.identity,
            "child",
            self.pid,
            queue_names,
            self.started_at,
            busy=len(self.flying) or int(bool(self.running)),
            rss=self.rss,
            running=running,
            extra={"ppid": os.getpid()},
        )


class SlotReader:
    """Reads the children's shared memory into their records, and what they counted into
    ``stats`` (the master's buffer of the host's totals)."""

    def __init__(
        self, slots: Slots | None = None, flights: FlightSlots | None = None, stats: StatsBuffer | None = None
    ) -> None:
        self.slots = slots if slots is not None else Slots()
        self.flights = flights
        self.stats = stats if stats is not None else StatsBuffer()

    def refresh(self, child: ChildState) -> bool:
        """What the child runs now, from its slot. False if the slot is torn (the child
        died mid-write): then nothing is assumed about its jobs."""
        slot = self.slots.read(child.index)
        self.count_jobs(child, (slot.processed, slot.failed) if slot else self.slots.counts(child.index))
        if self.flights is not None:  # the slot's one-job fields stay empty: its entries say it all
            return self.refresh_flights(child)
        child.torn = slot is None
        if slot is None:
            child.running = None
            # What it ran is unknown, but the acks it listed still stand (a dead child's
            # slot no longer changes: read again at its reap).
            child.acks = set(self.slots.salvage(child.index))
            return False
        if slot.state == RUNNING:
            child.running = {
                "jid": slot.jid,
                "class": slot.job_class,
                "queue": slot.queue,
                "deadline": slot.deadline,
                "run_at": slot.started_at,
            }
        else:
            child.running = None
        child.acks = {jid for jid in (slot.ack_jid, slot.jid if slot.state == ACK_DUE else "", *slot.acks) if jid}
        return True

    def refresh_flights(self, child: ChildState) -> bool:
        """``--concurrency`` above 1: every job the child has in flight, from its entries
        (``running``: the first of them)."""
        assert self.flights is not None
        found, child.torn = self.flights.read(child.index)
        child.flying = [
            {"jid": f.jid, "class": f.job_class, "queue": f.queue, "deadline": f.deadline, "run_at": f.started_at}
            for f in found
            if f.state == flight_slots.RUNNING
        ]
        child.running = child.flying[0] if child.flying else None
        child.acks = {f.jid for f in found if f.state == flight_slots.ACK_DUE and f.jid}
        return not child.torn

    def reset_slot(self, index: int) -> None:
        self.slots.reset(index)
        if self.flights is not None:
            self.flights.reset(index)

    def count_jobs(self, child: ChildState, counts: tuple[int, int]) -> None:
        """What the child processed and failed since the last look, into the totals."""
        processed, failed = counts
        if processed >= child.counted[0] and failed >= child.counted[1]:
            self.stats.processed += processed - child.counted[0]
            self.stats.failed += failed - child.counted[1]
            child.counted = counts


# Its name when the master was assembled from mixins (code that subclasses it keeps working).
ChildrenMixin = SlotReader


def doing(pid: int) -> str:
    """What a child that won't leave is doing, as far as the master can see: its title
    (the child sets it as it goes) and where the kernel has it waiting."""
    try:
        title = " ".join(psutil.Process(pid).cmdline()).strip()
    except psutil.Error:
        title = "?"
    try:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip()
    except OSError:
        wchan = ""
    return f"its title {title!r}" + (f", waiting in the kernel in {wchan}" if wchan and wchan != "0" else "")


def child_identity(pid: int, nonce: str) -> str:
    """Made by the master too, so it knows a child's identity even if it dies at once."""
    return f"{socket.gethostname()}:{pid}:{nonce}"
