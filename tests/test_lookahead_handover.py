"""Who owns a job fetched ahead is decided by Redis (issue F1).

A sibling's take-over whose reply is lost (Redis stalls past its socket timeout, or the
taker is SIGKILLed with the call in flight) must never leave two owners: the owner asks
Redis before starting the job whenever anyone may have tried to take it. Driven with
real ``Siblings``/``Fetcher``/``Worker`` objects on a real redis-server; every run of a
job is logged to a file, and each test checks the job ran exactly once.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import pytest
from apps import pf_faults
from prefork_harness import in_progress_total, queue_len, wait_for

from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.engine.loop import Worker
from cogworker.fleet.recovery import requeue_in_progress
from cogworker.prefork.siblings import Siblings
from cogworker.prefork.slots import CLEAR, TRYING, Slots
from cogworker.store import lua

OWNER, TAKER = "host:1:owner", "host:2:taker"
QUEUES = [("default", None)]


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = str(tmp_path / "runs.log")
    monkeypatch.setenv("PF_LOG", path)
    return path


def runs(path, tag):
    return [e for e in pf_faults.events(path) if e[1] == tag]


class Pair:
    """Two children's slots: the owner has fetched job J ahead (not started); the taker
    runs dry."""

    def __init__(self, config):
        self.config = config
        self.slots = Slots(2)
        self.slots.reset(0)
        self.slots.reset(1)
        self.owner_slot, self.taker_slot = self.slots.writer(0), self.slots.writer(1)
        self.owner_slot.begin(OWNER)
        self.taker_slot.begin(TAKER)
        self.owner = Siblings(self.slots, self.owner_slot)
        self.taker = Siblings(self.slots, self.taker_slot)
        self.owner_fetcher = Fetcher(config, OWNER, QUEUES)
        self.jid = pf_faults.logged.enqueue("J")
        config.redis().script_load(lua.source("fetch"))  # send_ahead sends EVALSHA only
        self.owner_slot.ahead(1, None)
        self.work = self.owner_fetcher.read_ahead(self.owner_fetcher.send_ahead(1))
        assert self.work is not None and self.work.jid() == self.jid

    def taker_fetcher(self, socket_timeout):
        fetcher = Fetcher(dataclasses.replace(self.config, socket_timeout=socket_timeout), TAKER, QUEUES)
        # Connected, and the take-over script loaded, beforehand: a stalled Redis must
        # stall the script itself, not the connection's handshake or a NOSCRIPT reply.
        fetcher.take_ahead("nobody", 0)
        return fetcher

    def listed(self, identity):
        return self.config.redis().lrange(self.config.keys.in_progress(identity), 0, -1)

    def owner_claims(self):
        """The owner's claim, and its run of J if it got it (as its worker loop would)."""
        work = self.owner.claim(self.work, self.owner_fetcher)
        if work is not None:
            Worker(QUEUES, config=self.config, identity=OWNER).process(work)
        return work

    def drain(self):
        """Whatever is back on the queue runs (another worker)."""
        worker = Worker(QUEUES, config=self.config, block_timeout=0)
        while queue_len(self.config):
            work = worker.fetcher.fetch()
            if work is not None:
                worker.process(work)
                worker.fetcher.acknowledge(work.raw)


def test_a_take_over_whose_reply_is_lost_runs_the_job_once(own_redis, own_config, log):
    pair = Pair(own_config)
    fetcher = pair.taker_fetcher(socket_timeout=0.3)
    own_redis.pause()
    try:
        assert pair.taker.take(fetcher) is None  # timed out: the taker doesn't know
    finally:
        own_redis.resume()
    # Redis ran the script after all: J is on the taker's list.
    wait_for(lambda: pair.listed(TAKER), 5, what="the take-over applied")
    assert pair.owner_claims() is None  # Redis says it's no longer the owner's
    # The taker's reconcile finds J a stray (seen twice) and requeues it; it runs once.
    taker = Worker(QUEUES, config=own_config, identity=TAKER)
    taker.reconcile()
    taker.reconcile()
    pair.drain()
    assert [e[0] for e in runs(log, "J")] == ["start", "end"]
    assert in_progress_total(own_config) == 0 and queue_len(own_config) == 0


def test_a_taker_killed_with_the_call_in_flight_leaves_one_owner(own_redis, own_config, log):
    pair = Pair(own_config)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the taker: connects, then blocks on the stalled Redis until killed
        try:
            fetcher = pair.taker_fetcher(socket_timeout=30)
            os.write(ready_w, b"r")
            os.read(go_r, 1)
            pair.taker.take(fetcher)
        finally:
            os._exit(0)
    assert os.read(ready_r, 1) == b"r"
    own_redis.pause()
    try:
        os.write(go_w, b"g")
        time.sleep(0.5)  # the script sent, its reply awaited
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    finally:
        own_redis.resume()
    wait_for(lambda: pair.listed(TAKER), 5, what="the take-over applied")
    assert pair.owner_claims() is None
    # The master requeues a dead child's list; J runs once.
    assert requeue_in_progress(own_config, TAKER) == 1
    pair.drain()
    assert [e[0] for e in runs(log, "J")] == ["start", "end"]
    assert in_progress_total(own_config) == 0 and queue_len(own_config) == 0


def test_a_take_over_that_never_reached_redis_loses_nothing(own_config, log):
    """A taker killed before its script left: the flag says someone tried, Redis says
    the job is still the owner's, and the owner runs it."""
    pair = Pair(own_config)
    pair.slots.set_taken(0, TRYING)
    assert pair.owner_claims() == pair.work
    assert [e[0] for e in runs(log, "J")] == ["start", "end"]
    assert pair.slots.taken(0) == CLEAR
    assert own_config.redis().hget(own_config.keys.ahead, OWNER) is None


def test_a_take_over_that_answered_not_taken_costs_the_owner_nothing(own_redis, own_config, log):
    """A take-over that definitely failed clears the flag it set: the owner's claim
    then needs no round trip (it works with Redis paused)."""
    pair = Pair(own_config)
    pair.slots.set_taken(0, CLEAR)
    own_config.redis().hset(own_config.keys.ahead, OWNER, 99)  # not that fetch: the take fails
    fetcher = pair.taker_fetcher(socket_timeout=2)
    assert pair.taker.take(fetcher) is None
    assert pair.slots.taken(0) == CLEAR
    own_redis.pause()
    try:
        assert pair.owner.claim(pair.work, pair.owner_fetcher) == pair.work
    finally:
        own_redis.resume()


def test_a_failed_take_over_does_not_clear_another_takers_flag(own_config, log):
    """One taker's reply lost (flag left set), a second taker finds nothing to take: the
    flag must stay set, or the owner would start a job the first one holds."""
    pair = Pair(own_config)
    assert pair.taker.take(pair.taker_fetcher(socket_timeout=2)) is not None  # taken...
    pair.slots.set_taken(0, TRYING)  # ...but as if its reply had been lost
    third = Siblings(pair.slots, pair.slots.writer(1))
    assert third.take(Fetcher(own_config, "host:3:third", QUEUES)) is None
    assert pair.slots.taken(0) == TRYING
    assert pair.owner.claim(pair.work, pair.owner_fetcher) is None
