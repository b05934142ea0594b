"""Property test of a chord against a model, on a real Redis and the real scripts: random
interleavings of its members' outcomes (success, retry, dead, an orphan re-run, a zombie
whose list was requeued trying to settle, a replayed settlement) never fire the callback
twice, never before the last member succeeded, and never once a member is dead."""

from __future__ import annotations

import json

import pytest
from apps import wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_util import Model

import cogworker

KINDS = ["success", "retry", "dead", "orphan", "zombie", "replay"]
EVENTS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(KINDS)), min_size=1, max_size=30)


class Chord(Model):
    """The chord under test, and the model it is checked against (states: queued | done | dead)."""

    def __init__(self, config, n: int) -> None:
        super().__init__(config, n)
        # One queue per member, so each event acts on the member it names.
        members = [wf.add.options(queue=f"m{i}").s(i, i) for i in range(n)]
        self.chord = cogworker.chord(cogworker.group(members), wf.total.options(queue="cb").s())
        self.id = self.chord.enqueue()

    def act(self, i: int, kind: str) -> None:
        if self.state[i] != "queued":
            self.replay(i, kind)
            return
        f, raw, payload = self.fetch(i)
        if kind in ("success", "replay"):
            self.succeed(i, f, raw, payload, kind, payload["args"][0] * 2, "done")
        elif kind in ("retry", "dead"):
            self.fail(i, f, raw, payload, kind)
        else:
            self.lose(f, raw, payload, kind, 0)

    def check(self) -> None:
        fired = self.r.lrange(self.config.keys.queue("cb"), 0, -1)
        all_done = all(s == "done" for s in self.state)
        assert len(fired) == (1 if all_done else 0), (self.state, fired)
        if fired:
            assert json.loads(fired[0])["args"] == [[i * 2 for i in range(self.n)]]
        group = self.r.hgetall(self.config.keys.group(self.chord.group_id))
        assert int(group[b"left"]) == self.state.count("queued") + self.state.count("dead")
        if "dead" in self.state:
            with pytest.raises(cogworker.JobFailed):
                cogworker.result(self.chord.group_id, timeout=0)
            with pytest.raises(cogworker.JobFailed):
                cogworker.result(self.id, timeout=0)
        elif all_done:
            assert cogworker.result(self.chord.group_id, timeout=0) == [i * 2 for i in range(self.n)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 4), events=EVENTS)
def test_a_chord_fires_exactly_once_at_the_right_moment(config, n, events):
    config.redis().flushall()
    Chord(config, n).play(events)
