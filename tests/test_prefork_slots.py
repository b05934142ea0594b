"""The children's shared-memory slots: what the master knows of each child's job."""

from __future__ import annotations

import os
import struct

from cogworker.prefork.slots import ACK_DUE, IDLE, RUNNING, SIZE, Slots


def test_slot_round_trip_and_ack_due_keeps_the_jid():
    slots = Slots(4)
    writer = slots.writer(2)
    writer.write(RUNNING, "a" * 24, 123.5, 100.0, "app.jobs.add", "default")
    state = slots.read(2)
    assert (state.state, state.jid, state.deadline, state.job_class, state.queue) == (
        RUNNING,
        "a" * 24,
        123.5,
        "app.jobs.add",
        "default",
    )
    writer.finished(ack_due=True)
    state = slots.read(2)
    assert state.state == ACK_DUE and state.jid == "a" * 24  # the master drops it if the child dies now
    writer.finished(ack_due=False)
    assert slots.read(2).state == IDLE
    assert slots.read(1).state == IDLE and slots.read(3).jid == ""  # neighbours untouched


def test_a_torn_slot_reads_as_unknown():
    slots = Slots(2)
    slots.writer(0).write(RUNNING, "b" * 24)
    struct.pack_into("=Q", slots.mm, 0, 7)  # odd sequence: its writer died mid-write
    assert slots.read(0) is None


def test_a_jid_too_long_for_the_slot_is_recorded_as_unknown():
    slots = Slots(1)
    slots.writer(0).write(RUNNING, "x" * 100)
    assert slots.read(0).jid == ""


def test_slots_are_shared_with_a_forked_child():
    slots = Slots(2)
    pid = os.fork()
    if pid == 0:
        slots.writer(1).write(RUNNING, "c" * 24, None, 1.0, "k", "q")
        os._exit(0)
    os.waitpid(pid, 0)
    assert slots.read(1).jid == "c" * 24
    assert SIZE % 64 == 0


def test_siblings_of_another_shard_are_never_waited_on_nor_taken_from():
    """The queue layout (docs/architecture.md#cluster-layout): a child's list is in its shard's
    slot, so an idle child of another shard neither keeps this one from looking ahead nor
    is asked for this one's looked-ahead jobs (a take is only tried within a shard)."""
    from cogworker.prefork.siblings import Siblings
    from cogworker.prefork.slots import WAITING

    slots = Slots(4)
    for index, shard in enumerate((0, 1, 0, 1)):
        slots.reset(index)
        slots.set_shard(index, shard)
    writers = {index: slots.writer(index) for index in (1, 2, 3)}
    for index, writer in writers.items():
        writer.begin(f"id-{index}")
        writer.ahead(7)
    asked: list[str] = []

    class Fetcher:
        def take_ahead(self, identity, number, started):
            asked.append(identity)
            return None  # definitely not moved: Redis found no record of ours

    me = Siblings(slots, slots.writer(0))
    assert me.take(Fetcher()) is None and asked == ["id-2"]
    writers[1].write(WAITING)
    assert not me.any_waiting()  # shard 1's idle child can't take shard 0's jobs
    writers[2].write(WAITING)
    assert me.any_waiting()
    assert Siblings(slots, writers[3]).take(Fetcher()) is None and asked == ["id-2", "id-1"]
