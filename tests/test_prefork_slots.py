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
    assert (state.state, state.jid, state.deadline, state.job_class, state.queue) == \
        (RUNNING, "a" * 24, 123.5, "app.jobs.add", "default")
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
