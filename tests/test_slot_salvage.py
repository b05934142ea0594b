"""A child SIGKILLed in the middle of writing its slot (a torn record): the acks it had
listed still stand. The master drops them rather than requeue jobs that ran
(``Slots.salvage``); only the job it was running stays unknown. With ``--concurrency``
M > 1, the same for its entries (``FlightSlots.read``): one torn entry leaves the others."""

from __future__ import annotations

import mmap
import os
import random
import signal
import time
from collections.abc import Iterator

from cogworker.prefork.slots import RUNNING, Slots

K = 4  # jobs per look-ahead: K - 1 acks held, the last one riding on the next fetch


def ops() -> Iterator[tuple[str, str]]:
    """A child's slot writes, in the order a look-ahead of K jobs makes them."""
    g = 0
    while True:
        for i in range(K):
            jid = f"j{g:08d}"
            yield from (("start_one", jid), ("write", jid), ("finished", jid))
            if i < K - 1:
                yield "ack_held", jid
            g += 1
        yield "ahead", jid  # the next fetch out, the last job's ack riding on it
        yield "came_back", jid  # its reply read: every ack riding on it landed


def model(count: int) -> set[str]:
    """What the master may drop (ran, not yet acked) once ``count`` writes completed."""
    ack_jid, acks = "", []
    for n, (op, jid) in enumerate(ops()):
        if n == count:
            return {ack_jid, *acks} - {""}
        if op == "ack_held":
            acks.append(jid)
        elif op == "ahead":
            ack_jid = jid
        elif op == "came_back":
            ack_jid, acks = "", []
    raise AssertionError


def writer_loop(slots: Slots, done: memoryview) -> None:
    writer = slots.writer(0)
    writer.begin("host:1:ab")
    for n, (op, jid) in enumerate(ops()):
        if op == "start_one":
            writer.start_one()
        elif op == "write":
            writer.write(RUNNING, jid, None, time.time(), "app.jobs.work", "default")
        elif op == "finished":
            writer.finished(ack_due=True, ran=True)
        elif op == "ack_held":
            writer.ack_held(jid)
        elif op == "ahead":
            writer.ahead(n, jid)
        else:
            writer.came_back()
        done[0] = n + 1  # one 8-byte store: the writes completed so far


def killed_mid_write(make, loop, check) -> None:
    """Forks a writer looping over ``make()``'s records, SIGKILLs it at a random moment, and
    runs ``check(records, writes completed)`` (True when the kill left a record torn), until
    20 kills landed mid-write."""
    torn = kills = 0
    while torn < 20 and kills < 3000:
        records = make()
        shared = mmap.mmap(-1, 8)
        done = memoryview(shared).cast("Q")
        pid = os.fork()
        if pid == 0:
            try:
                loop(records, done)
            finally:
                os._exit(0)
        time.sleep(random.uniform(0.0005, 0.004))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
        torn += check(records, done[0])
        done.release()
        shared.close()
    assert torn >= 20, f"only {torn} of {kills} kills landed mid-write"


def test_a_child_killed_mid_write_keeps_its_listed_acks():
    def check(slots: Slots, count: int) -> bool:
        salvaged = set(slots.salvage(0))
        before, after = model(count), model(count + 1)  # write number ``count`` may be half done
        assert before & after <= salvaged <= before | after, (count, list(ops_at(count)), salvaged)
        return slots.read(0) is None

    killed_mid_write(lambda: Slots(1), writer_loop, check)


def ops_at(count: int) -> Iterator[tuple[str, str]]:
    for n, op in enumerate(ops()):
        if n >= count - 2:
            yield op
        if n > count + 1:
            return


def test_the_master_drops_a_torn_slots_listed_acks_and_counts_every_job():
    from cogworker.lifecycle import stats
    from cogworker.prefork import reaped
    from cogworker.prefork.children import ChildrenMixin, ChildState

    class Master(ChildrenMixin):
        pass

    master = Master()
    master.slots, master.flights, master.stats = Slots(1), None, stats.StatsBuffer()
    writer = master.slots.writer(0)
    writer.begin("host:1:ab")
    for jid in ("a1", "a2"):
        writer.write(RUNNING, jid)
        writer.finished(ack_due=True, ran=True)
        writer.ack_held(jid)
    writer.write(RUNNING, "a3")
    writer._begin()  # killed in its next write: the record is torn
    child = ChildState(0, 1, "host:1:ab", conn=None)  # type: ignore[arg-type]
    assert master.refresh(child) is False and child.torn and child.running is None
    assert child.acks == {"a1", "a2"}
    owed = reaped.reap(child.running, child.acks, {}, child.torn, None, crashed=True)
    assert set(owed.decisions) == {"a1", "a2"} and owed.count_orphanings is True  # a3: requeued, counted


M = 3  # ``--concurrency``: entries per child


def flight_ops() -> Iterator[tuple[str, str]]:
    """A child's entry writes with M jobs in flight, in a fixed pseudo-random order: a job
    starts, succeeds (its ack due), is freed once acked, or is freed at once (it failed)."""
    rng = random.Random(7)
    running: list[str] = []
    due: list[str] = []
    g = 0
    while True:
        choices = ["start"] * (len(running) + len(due) < M) + ["due"] * bool(running) + ["free"] * bool(due)
        choice = rng.choice(choices)
        if choice == "start":
            jid = f"f{g:08d}"
            g += 1
            running.append(jid)
            yield "running", jid
        elif choice == "due" and rng.random() < 0.8:
            jid = running.pop(rng.randrange(len(running)))
            due.append(jid)
            yield "ack_due", jid
        elif choice == "due":
            yield "free_entry", running.pop(rng.randrange(len(running)))
        else:
            yield "free_entry", due.pop(rng.randrange(len(due)))


def flight_model(count: int) -> set[str]:
    """The jobs whose ack is due once ``count`` entry writes completed."""
    due: set[str] = set()
    for n, (op, jid) in enumerate(flight_ops()):
        if n == count:
            return due
        if op == "ack_due":
            due.add(jid)
        elif op == "free_entry":
            due.discard(jid)
    raise AssertionError


def flight_writer_loop(flights, done: memoryview) -> None:
    writer = flights.writer(0)
    for n, (op, jid) in enumerate(flight_ops()):
        if op == "running":
            writer.running(jid.encode(), jid, None, time.time(), "app.jobs.work", "default")
        else:
            getattr(writer, op)(jid.encode())
        done[0] = n + 1


def test_a_child_killed_mid_write_of_one_entry_keeps_the_acks_of_every_entry():
    from cogworker.prefork.flight_slots import ACK_DUE, FlightSlots

    def check(flights: FlightSlots, count: int) -> bool:
        found, torn = flights.read(0)
        acks = {f.jid for f in found if f.state == ACK_DUE}
        before, after = flight_model(count), flight_model(count + 1)
        assert before & after <= acks <= before | after, (count, acks)
        return torn

    killed_mid_write(lambda: FlightSlots(M, 1), flight_writer_loop, check)


def test_a_torn_slot_with_jobs_in_flight_keeps_what_the_entries_say():
    from cogworker.lifecycle import stats
    from cogworker.prefork.children import ChildrenMixin, ChildState
    from cogworker.prefork.flight_slots import FlightSlots

    class Master(ChildrenMixin):
        pass

    master = Master()
    master.slots, master.flights, master.stats = Slots(1), FlightSlots(M, 1), stats.StatsBuffer()
    slot, entries = master.slots.writer(0), master.flights.writer(0)
    slot.begin("host:1:ab")
    for jid in ("r1", "d1", "d2"):
        entries.running(jid.encode(), jid, None, time.time(), "app.jobs.work", "default")
    entries.ack_due(b"d1")
    entries.ack_due(b"d2")
    slot._begin()  # killed writing the slot's counters: the slot is torn, its entries are not
    child = ChildState(0, 1, "host:1:ab", conn=None)  # type: ignore[arg-type]
    assert master.refresh(child) is True and not child.torn
    assert child.acks == {"d1", "d2"} and [job["jid"] for job in child.flying] == ["r1"]
    entries._begin(2, master.flights._offset(0, 2))  # and killed mid-write of d2's entry (ACK_DUE)
    assert master.refresh(child) is True and child.acks == {"d1", "d2"}
    entries._begin(0, master.flights._offset(0, 0))  # r1's entry torn: r1 is unknown
    assert master.refresh(child) is False and child.torn and child.acks == {"d1", "d2"}
