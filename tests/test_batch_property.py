"""Property test of a batch against a model, on a real Redis and the real scripts: random
interleavings of its jobs' outcomes (success, retry, dead, an orphan re-run, a zombie
whose list was requeued trying to settle, a replayed settlement, a cancel while queued or
while running, a dead job revived by an operator) and of the block's close never fire a callback twice, never while the
batch is open, on_complete and on_success never before the last job settled, on_success
never once a job failed, on_death only once one is dead."""

from __future__ import annotations

import json

from apps import batchjobs as bj
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_util import Model

import cogworker
from cogworker import api
from cogworker.core import fate, settlement
from cogworker.core.batchscope import BatchScope
from cogworker.engine.fetch.fetcher import Fetcher

KINDS = ["success", "retry", "dead", "orphan", "zombie", "replay", "cancel", "cancel_running", "close", "revive"]
EVENTS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(KINDS)), min_size=1, max_size=30)
FINAL = ("succeeded", "dead", "cancelled")


class Batch(Model):
    """The batch under test (its callbacks pushed onto queue "cb"), and its model (states:
    queued | succeeded | dead | cancelled)."""

    def __init__(self, config, n: int) -> None:
        super().__init__(config, n)
        cb = bj.callback.options(queue="cb")
        self.batch = cogworker.batch(on_success=cb.s("success"), on_complete=cb.s("complete"), on_death=cb.s("death"))
        self.batch.open()
        with BatchScope(self.batch.bid):  # the batch stays open until a "close" event
            for i in range(n):  # one queue per job, so each event acts on the job it names
                bj.work.options(queue=f"m{i}").enqueue(f"j{i}")
        self.open = True
        self.revived: set[int] = set()

    def act(self, i: int, kind: str) -> None:
        if kind == "close":
            self.batch.close()
            self.open = False
            return
        if self.state[i] == "dead" and kind == "revive" and i not in self.revived:  # the dead set holds it once
            self.revive(i)
            return
        if self.state[i] != "queued":
            self.replay(i, kind)
            return
        if kind == "cancel":
            assert api.cancel(self.payload_jid(i))
            self.state[i] = "cancelled"
            return
        f, raw, payload = self.fetch(i)
        if kind == "cancel_running":
            self.cancel_running(i, f, raw, payload)
        elif kind in ("success", "replay"):
            decision = self.succeed(i, f, raw, payload, kind, None, "succeeded")
            assert isinstance(decision, fate.Complete)  # never an ack that rides on a fetch
        elif kind in ("retry", "dead"):
            self.fail(i, f, raw, payload, kind, retries=25)
        else:
            self.lose(f, raw, payload, kind, None)

    def cancel_running(self, i: int, f: Fetcher, raw: bytes, payload: dict) -> None:
        """Cancelled while it runs, then it ends (told, or done anyway)."""
        self.r.sadd(self.config.keys.in_progress_identities, f.identity)  # as a worker's start does
        assert api.cancel(payload["jid"])
        settlement.apply(f, raw, fate.decide(self.config, payload, fate.Cancelled()))
        # Its success, had it ignored the cancel, finds nothing listed: it changes nothing.
        done = fate.decide(self.config, payload, fate.Succeeded(0.0, None))
        assert settlement.apply(f, raw, done) is False
        self.state[i] = "cancelled"

    def revive(self, i: int) -> None:
        """An operator moves the dead job back to its queue; it runs and succeeds: counted
        once already (dead), it changes nothing in the batch."""
        _, raw, _ = self.settled[i]
        assert api.DeadSet().retry(json.loads(raw)["jid"])
        self.revived.add(i)
        f, raw, payload = self.fetch(i)
        decision = fate.decide(self.config, payload, fate.Succeeded(0.0, None))
        assert settlement.apply(f, raw, decision) is True

    def payload_jid(self, i: int) -> str:
        [raw] = self.r.lrange(self.config.keys.queue(f"m{i}"), 0, -1)
        return str(json.loads(raw)["jid"])

    def check(self) -> None:
        pushed = sorted(json.loads(p)["args"][0] for p in self.r.lrange(self.config.keys.queue("cb"), 0, -1))
        settled = all(s in FINAL for s in self.state)
        expected = []
        if not self.open:
            if "dead" in self.state:
                expected.append("death")
            if settled:
                expected.append("complete")
                if all(s == "succeeded" for s in self.state):
                    expected.append("success")
        assert pushed == sorted(expected), (self.open, self.state, pushed)
        info = api.batch(self.batch.bid)
        assert info is not None
        assert (info.total, info.pending) == (self.n, self.state.count("queued"))
        assert (info.succeeded, info.dead, info.cancelled) == tuple(self.state.count(s) for s in FINAL)
        assert info.closed is (not self.open)
        assert (info.done_at is not None) is (settled and not self.open)
        jobs = dict(api.batch_jobs(self.batch.bid))
        assert sorted(jobs.values()) == sorted("pending" if s == "queued" else s for s in self.state)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 4), events=EVENTS)
def test_a_batch_fires_each_callback_exactly_once_at_the_right_moment(config, n, events):
    config.redis().flushall()
    Batch(config, n).play(events, then=[(0, "close")])
