"""The harness of the look-ahead tests under prefork (test_lookahead_k_prefork,
test_lookahead_k32_prefork; their docstrings tell the scenario): a test's jobs, log
and gate (``Run``: short jobs so the children's K grows, then candidate blockers, one of
which holds a look-ahead behind it), a master to drain what is left, and a child's index."""

from __future__ import annotations

import re

import pytest
from apps import pf_ahead
from apps.pf_faults import events
from prefork_harness import in_progress_total, wait_for

WARM = 40  # short jobs first: K grows over them (1, 2, 4, 8 per fetch)


class Run:
    """A test's jobs, log and gate: ``WARM`` short jobs, then ``candidates`` candidate
    blockers, all in one push (one LPUSH: oldest first). ``hold``: the children's
    ``Depth.HOLD``; 30 ms (15x the default) keeps the candidates, each a round trip of its
    own, in look-aheads of 2 or more even on a loaded machine (at 2 ms they fell to K = 1
    there, and at 10 ms once, under the parallel suite, no candidate of 100 had the next
    look-ahead behind it). Candidates past the blocker cost nothing: 300 give the rarer
    placement ("last") its chances at any K."""

    def __init__(self, config, tmp_path, candidates=300, blockers=1, at="", min_held=2, hold="0.03"):
        self.config = config
        self.log = str(tmp_path / "runs.log")
        self.gate = tmp_path / "gate"
        self.env = {
            "PF_LOG": self.log,
            "PF_GATE": str(self.gate),
            "PF_BLOCKERS": str(blockers),
            "PF_BLOCK_AT": at,
            "PF_MIN_HELD": str(min_held),
            "PF_HOLD": hold,
        }
        self.blockers = blockers
        self.at = at
        warm = [f"w{i:03d}" for i in range(WARM)]
        cand = [f"c{i:03d}" for i in range(candidates)]
        self.tags = warm + cand
        self.order = {tag: i for i, tag in enumerate(self.tags)}
        self.candidates = cand

    def enqueue(self):
        pf_ahead.step.enqueue_many([[t] for t in self.tags[:WARM]] + [[t, True] for t in self.candidates])

    def events(self, kind=None, tag=None):
        return [e for e in events(self.log) if (kind is None or e[0] == kind) and (tag is None or e[1] == tag)]

    def blocked(self):
        """{pid: (blocker's tag, the jobs it held, oldest first)}, once ``blockers`` blocked."""
        out = {}
        held: dict[int, list[str]] = {}
        for kind, tag, pid, _ in self.events():
            if kind == "held":
                held.setdefault(pid, []).append(tag)
            elif kind == "block":
                out[pid] = (tag, held.get(pid, []))
        return out if len(out) >= self.blockers else None

    def wait_blocked(self):
        return wait_for(self.blocked, 30, what=f"{self.blockers} child(ren) holding a look-ahead behind a blocked job")

    def runs(self, tag):
        """[(event, pid)] of starts and ends."""
        return [(e[0], e[2]) for e in self.events(tag=tag) if e[0] in ("start", "end")]

    def ended(self):
        return {e[1] for e in self.events("end")}

    def release(self):
        self.gate.touch()

    # -- what Redis shows --------------------------------------------------------------------

    def queued(self):
        """The queue's tags, next to fetch first."""
        r = self.config.redis()
        return [pf_ahead.tag_of(raw) for raw in reversed(r.lrange(self.config.keys.queue("default"), 0, -1))]

    def list_key(self, pid):
        r = self.config.redis()
        keys = [k.decode() for k in r.scan_iter(match=self.config.keys.in_progress_prefix + f"*:{pid}:*")]
        assert len(keys) <= 1, keys
        return keys[0] if keys else None

    def listed(self, pid):
        """The tags on the in-progress list of child ``pid``, newest first."""
        key = self.list_key(pid)
        return [pf_ahead.tag_of(raw) for raw in self.config.redis().lrange(key, 0, -1)] if key else []

    def fetched_left(self, pid):
        """n - t of the child's look-ahead record in ``ahead``: the jobs of its last fetch
        still its own."""
        key = self.list_key(pid)
        identity = key[len(self.config.keys.in_progress_prefix) :]
        return pf_ahead.ahead_left(self.config.redis().hget(self.config.keys.ahead, identity))

    def not_started(self, pid, blocker):
        """The entries of ``pid``'s list newer than its running ``blocker``, oldest first."""
        tags = self.listed(pid)
        return list(reversed(tags[: tags.index(blocker)])) if blocker in tags else []

    def in_order(self, tags):
        return sorted(tags, key=self.order.__getitem__)

    def assert_holding(self, pid, blocker, held):
        """The child holds a look-ahead: at least two jobs behind the blocked one, none started."""
        assert len(held) >= 2, held
        assert self.not_started(pid, blocker) == held
        if self.at == "mid":  # the rest of its own look-ahead, which it started
            assert self.fetched_left(pid) > len(held)
        elif self.at == "last":  # the next look-ahead, fetched as it started the last of its look-ahead
            assert self.fetched_left(pid) == len(held)
        assert not [e for e in self.events("start") if e[1] in held]
        assert not self.events("end", blocker)

    def assert_each_ran_once(self):
        """Every job started once and ended once, in the same process (never twice)."""
        for tag in self.tags:
            runs = self.runs(tag)
            assert [e for e, _ in runs] == ["start", "end"] and runs[0][1] == runs[1][1], (tag, runs)

    def assert_nothing_counted(self):
        r = self.config.redis()
        assert list(r.scan_iter(match=self.config.keys.orphanings("*"))) == []

    def hold(self, masters, **master_args):
        """Enqueued, a one-child master started, its blocker waiting with the look-ahead held
        behind it (checked on the child's list): (master, child pid, blocker, held)."""
        self.enqueue()
        m = masters(module="apps.pf_ahead", procs=1, env=self.env, **master_args)
        ((pid, (blocker, held)),) = self.wait_blocked().items()
        self.assert_holding(pid, blocker, held)
        return m, pid, blocker, held

    def assert_held_ran_elsewhere_once(self, pid, held):
        """Every job ran exactly once, none of the held ones in the child that held them,
        and no orphaning was counted."""
        self.assert_each_ran_once()
        assert not any(p == pid for tag in held for _, p in self.runs(tag))
        self.assert_nothing_counted()


@pytest.fixture
def run_of(own_config, tmp_path):
    return lambda **kw: Run(own_config, tmp_path, **kw)


def drain(run, masters):
    """A new master runs whatever is left on the queue."""
    m = masters(module="apps.pf_ahead", procs=1, env=run.env)
    wait_for(lambda: run.ended() >= set(run.tags), 30, what="every job done")
    wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    return m


def child_index(proc):
    """The child's index, from its process title (``cogworker: child N ...``)."""
    found = re.search(r"cogworker: child (\d+)", " ".join(proc.cmdline()))
    assert found, proc.cmdline()
    return int(found.group(1))


# Where the blocked job is in its child's look-aheads: inside one (the jobs behind it are the
# rest of its look-ahead), or the last of one (behind it: the next look-ahead, fetched as it started,
# the reply unread by the child).
AT = pytest.mark.parametrize("at", ["mid", "last"], ids=["mid-look-ahead", "next-look-ahead"])
