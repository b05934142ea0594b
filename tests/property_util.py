"""What the property tests of a chord and of a batch share (tests/test_workflow_property.py,
tests/test_batch_property.py): one queue per job (``m{i}``), so each event fetches the job
it names with a Fetcher of its own and settles it through the real scripts, as a worker
would; a settlement sent again is refused; a retry is made due at once; an orphan's or a
zombie's list is requeued."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import pytest

from cogworker.core import fate, settlement
from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.errors import Fenced


class Model(ABC):
    """The jobs' states (``queued`` first) and the settlement each one's last run filed;
    a test's model says what each event does (``act``) and what must hold after it (``check``)."""

    def __init__(self, config: Any, n: int) -> None:
        self.config, self.r, self.n = config, config.redis(), n
        self.state = ["queued"] * n
        self.settled: dict[int, tuple[Fetcher, bytes, fate.Decision]] = {}
        self.step = 0

    @abstractmethod
    def act(self, i: int, kind: str) -> None: ...

    @abstractmethod
    def check(self) -> None: ...

    def play(self, events: Iterable[tuple[int, str]], then: Iterable[tuple[int, str]] = ()) -> None:
        """Checked first and after every event: ``events`` (each on job ``i % n``), ``then``,
        and at last a success for every job (each still queued runs and succeeds)."""
        self.check()
        for i, kind in [*((i % self.n, kind) for i, kind in events), *then, *((i, "success") for i in range(self.n))]:
            self.act(i, kind)
            self.check()

    def fetch(self, i: int) -> tuple[Fetcher, bytes, dict]:
        self.step += 1
        f = Fetcher(self.config, f"prop:{self.step}", [(f"m{i}", None)], block_timeout=0)
        work = f.fetch()
        assert work is not None, (i, self.state)
        return f, work.raw, json.loads(work.raw)

    def replay(self, i: int, kind: str) -> None:
        """A settled job's settlement sent again, long after: it changes nothing."""
        if kind == "replay" and i in self.settled:
            f, raw, decision = self.settled[i]
            assert settlement.apply(f, raw, decision) is False

    def succeed(
        self, i: int, f: Fetcher, raw: bytes, payload: dict, kind: str, result: Any, state: str
    ) -> fate.Decision:
        """The run returned ``result``: settled once (``kind`` "replay": its reply lost, sent
        again at once and refused); the job is in ``state`` now."""
        decision = fate.decide(self.config, payload, fate.Succeeded(0.0, result))
        assert settlement.apply(f, raw, decision) is True
        if kind == "replay":
            assert settlement.apply(f, raw, decision) is False
        self.state[i], self.settled[i] = state, (f, raw, decision)
        return decision

    def fail(self, i: int, f: Fetcher, raw: bytes, payload: dict, kind: str, retries: int | None = None) -> None:
        """The run raised: filed for a retry (made due at once: back on its queue; ``retries``,
        if given, the job's retry count) or, with no retry left (``kind`` "dead"), in the dead
        set; its filing replayed is refused."""
        if kind == "dead":
            payload["retry"] = 0
        elif retries is not None:
            payload["retry"] = retries
        decision = fate.decide(self.config, payload, fate.Raised(ValueError(f"no {i}")))
        assert settlement.apply(f, raw, decision) is True
        assert settlement.apply(f, raw, decision) is False  # a replayed filing
        if kind == "retry":  # due: the poller puts it back on its queue
            for entry in self.r.zrange(self.config.keys.retry, 0, -1):
                self.r.zrem(self.config.keys.retry, entry)
                self.r.lpush(self.config.keys.queue(f"m{i}"), entry)
        else:
            self.state[i], self.settled[i] = "dead", (f, raw, decision)

    def lose(self, f: Fetcher, raw: bytes, payload: dict, kind: str, result: Any) -> None:
        """Its process died (orphan) or froze and was declared dead (zombie): its list is
        requeued; the zombie wakes and tries to settle the run it had finished (with
        ``result``), and is fenced."""
        f.requeue_all(mode="reclaim")
        if kind == "zombie":
            decision = fate.decide(self.config, payload, fate.Succeeded(0.0, result))
            with pytest.raises(Fenced):
                settlement.apply(f, raw, decision)
