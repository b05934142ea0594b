"""K jobs per look-ahead (docs/architecture.md#batch) with a real ``cogworker-prefork``
master, real forked children, real signals and a private redis-server.

Each test fills a queue with short jobs (so the children's K grows above 1), then
candidate blockers (``apps.pf_batch.step``): the first that starts with at least two jobs
of its child's look-ahead not started behind it on the child's list blocks until the test
opens its gate. That child then holds a batch behind a running job: the rest of the
batch the blocker came with, or (the blocker being the last of its batch) the next batch,
fetched as it started, its reply not yet read by the child; both are tested. Then:

- TERM, TSTP (quiet), and a graceful stop of that child (TTOU one child fewer, HUP
  replacing it) put the jobs it holds back on their queue at once (while the job in
  front of them still runs), in queue order; they run later, exactly once, uncounted;
  the blocked job finishes (or, past ``--timeout``, is killed and requeued uncounted,
  row 5b of the fate table, and runs again after, never concurrently);
- TERM or TSTP to that child alone (the master returns nothing): the child gives the
  batch back itself once its job ends, in queue order too (it used to reverse it);
- an idle sibling takes over every job of that batch not started (not only one) and
  runs it while the blocker still runs;
- at K = 32 (the deepest batch, for tiny jobs): TERM puts all 31 or 32 back, a SIGKILL
  of the child loses none of its 32 (requeued at once, uncounted, each run once), an idle
  sibling takes all 32 over.

Every start and end is logged with its pid (``apps.pf_faults.log``), from inside the
children; the held jobs are the ones the blocker saw, checked again by the test on the
child's in-progress list before any signal.
"""

from __future__ import annotations

import os
import re
import signal

import pytest
from apps import pf_batch
from apps.pf_faults import events
from prefork_harness import in_progress_total, wait_for

WARM = 40  # short jobs first: K grows over them (1, 2, 4, 8 per fetch)


class Run:
    """A test's jobs, log and gate: ``WARM`` short jobs, then ``candidates`` candidate
    blockers, all in one push (one LPUSH: oldest first). ``hold``: the children's
    ``Depth.HOLD``; 10 ms (5x the default) keeps the candidates, each a round trip of its
    own, in batches of 2-16 even on a loaded machine (at 2 ms they fell to K = 1 there,
    and no candidate had a batch behind it)."""

    def __init__(self, config, tmp_path, candidates=100, blockers=1, at="", min_held=2, hold="0.01"):
        self.config = config
        self.log = str(tmp_path / "runs.log")
        self.gate = tmp_path / "gate"
        self.env = {"PF_LOG": self.log, "PF_GATE": str(self.gate), "PF_BLOCKERS": str(blockers),
                    "PF_BLOCK_AT": at, "PF_MIN_HELD": str(min_held), "PF_HOLD": hold}
        self.blockers = blockers
        self.at = at
        warm = [f"w{i:03d}" for i in range(WARM)]
        cand = [f"c{i:03d}" for i in range(candidates)]
        self.tags = warm + cand
        self.order = {tag: i for i, tag in enumerate(self.tags)}
        self.candidates = cand

    def enqueue(self):
        pf_batch.step.enqueue_many([[t] for t in self.tags[:WARM]] + [[t, True] for t in self.candidates])

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
        return wait_for(self.blocked, 30, what=f"{self.blockers} child(ren) holding a batch behind a blocked job")

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
        return [pf_batch.tag_of(raw) for raw in reversed(r.lrange(self.config.keys.queue("default"), 0, -1))]

    def list_key(self, pid):
        r = self.config.redis()
        keys = [k.decode() for k in r.scan_iter(match=self.config.keys.in_progress_prefix + f"*:{pid}:*")]
        assert len(keys) <= 1, keys
        return keys[0] if keys else None

    def listed(self, pid):
        """The tags on the in-progress list of child ``pid``, newest first."""
        key = self.list_key(pid)
        return [pf_batch.tag_of(raw) for raw in self.config.redis().lrange(key, 0, -1)] if key else []

    def fetched_left(self, pid):
        """n - t of the child's look-ahead record in ``ahead``: the jobs of its last fetch
        still its own."""
        key = self.list_key(pid)
        identity = key[len(self.config.keys.in_progress_prefix):]
        return pf_batch.batch_left(self.config.redis().hget(self.config.keys.ahead, identity))

    def not_started(self, pid, blocker):
        """The entries of ``pid``'s list newer than its running ``blocker``, oldest first."""
        tags = self.listed(pid)
        return list(reversed(tags[:tags.index(blocker)])) if blocker in tags else []

    def in_order(self, tags):
        return sorted(tags, key=self.order.__getitem__)

    def assert_holding(self, pid, blocker, held):
        """The child holds a batch: at least two jobs behind the blocked one, none started."""
        assert len(held) >= 2, held
        assert self.not_started(pid, blocker) == held
        if self.at == "mid":  # the rest of its own batch, which it started
            assert self.fetched_left(pid) > len(held)
        elif self.at == "last":  # the next batch, fetched as it started the last of its batch
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
        """Enqueued, a one-child master started, its blocker waiting with the batch held
        behind it (checked on the child's list): (master, child pid, blocker, held)."""
        self.enqueue()
        m = masters(module="apps.pf_batch", procs=1, env=self.env, **master_args)
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
    m = masters(module="apps.pf_batch", procs=1, env=run.env)
    wait_for(lambda: run.ended() >= set(run.tags), 30, what="every job done")
    wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    return m


def child_index(proc):
    """The child's index, from its process title (``cogworker: child N ...``)."""
    found = re.search(r"cogworker: child (\d+)", " ".join(proc.cmdline()))
    assert found, proc.cmdline()
    return int(found.group(1))


# Where the blocked job is in its child's batches: inside one (the jobs behind it are the
# rest of its batch), or the last of one (behind it: the next batch, fetched as it started,
# the reply unread by the child).
AT = pytest.mark.parametrize("at", ["mid", "last"], ids=["mid-batch", "next-batch"])


@pytest.mark.parametrize(("at", "blocker_outlives_timeout"), [("mid", False), ("last", False), ("mid", True)],
                         ids=["mid-batch", "next-batch", "killed-at-timeout"])
def test_term_puts_a_held_batch_back_at_once(run_of, masters, at, blocker_outlives_timeout):
    run = run_of(at=at)
    m, pid, blocker, held = run.hold(masters, args=["--timeout", "1" if blocker_outlives_timeout else "30"])
    before = run.queued()
    m.signal(signal.SIGTERM)
    if not blocker_outlives_timeout:
        # Back at once, in queue order, while the job in front of them still runs.
        wait_for(lambda: run.queued() == held + before, 10, what="the held batch back on its queue")
        assert not run.events("end", blocker) and run.not_started(pid, blocker) == []
        run.release()
        assert m.wait_exit(20) == 0, m.output()
        assert run.runs(blocker) == [("start", pid), ("end", pid)]  # it finished, and was acked
        assert run.queued() == held + before
    else:
        # The blocked job outlives --timeout: killed, requeued at the fetch end, uncounted.
        assert m.wait_exit(20) == 0, m.output()
        out = m.output()
        assert out.index("looked-ahead jobs are back on their queues") < out.index("still running at --timeout")
        assert run.queued() == [blocker] + held + before
        assert run.runs(blocker) == [("start", pid)]
    assert in_progress_total(run.config) == 0
    assert not [e for e in run.events("start") if e[1] in held]  # none of them started in that child
    drain(run, masters)
    if blocker_outlives_timeout:
        runs = run.runs(blocker)
        assert runs[0] == ("start", pid) and [e for e, _ in runs[1:]] == ["start", "end"] and runs[1][1] != pid
        run.tags.remove(blocker)  # its one run that ended: checked above
    run.assert_held_ran_elsewhere_once(pid, held)


@AT
def test_quiet_puts_a_held_batch_back_at_once(run_of, masters, at):
    run = run_of(at=at)
    m, pid, blocker, held = run.hold(masters)
    before = run.queued()
    m.signal(signal.SIGTSTP)
    wait_for(lambda: run.queued() == held + before, 10, what="the held batch back on its queue")
    assert not run.events("end", blocker) and run.not_started(pid, blocker) == []
    run.release()
    wait_for(lambda: run.events("end", blocker), 10, what="the blocked job's end")
    wait_for(lambda: in_progress_total(run.config) == 0, 5, what="its ack")  # quiet: acked at once
    assert run.queued() == held + before  # quiet: nothing more was fetched
    assert run.runs(blocker) == [("start", pid), ("end", pid)]
    assert m.alive()
    m.signal(signal.SIGTERM)
    assert m.wait_exit(20) == 0, m.output()
    drain(run, masters)
    run.assert_held_ran_elsewhere_once(pid, held)


@AT
def test_hup_puts_a_replaced_childs_held_batch_back_at_once(run_of, masters, at):
    run = run_of(at=at)
    m, pid, blocker, held = run.hold(masters)
    m.signal(signal.SIGHUP)

    def back():
        """Off the child's list: on the queue, in order, or run by another child (its
        replacement is forked once it has left, after its job; the batch doesn't wait)."""
        queued = run.queued()
        elsewhere = {e[1] for e in run.events("start") if e[2] != pid}
        return (run.not_started(pid, blocker) == [] and queued == run.in_order(queued)
                and all(tag in queued or tag in elsewhere for tag in held))

    wait_for(back, 10, what="the held batch back on its queue")
    assert not run.events("end", blocker)
    run.release()
    wait_for(lambda: run.ended() >= set(run.tags), 30, what="every job done")
    wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    (new,) = m.wait_children(1)
    assert new != pid
    run.assert_each_ran_once()
    assert run.runs(blocker) == [("start", pid), ("end", pid)]
    assert all(run.runs(tag) == [("start", new), ("end", new)] for tag in held)
    run.assert_nothing_counted()
    assert m.alive()


def test_ttou_puts_the_stopped_childs_held_batch_back_at_once(run_of, masters):
    """Both children hold a batch behind a blocked job; TTOU stops the highest-indexed one:
    its batch goes back, the other's stays with it."""
    run = run_of(candidates=150, blockers=2)
    m = masters(module="apps.pf_batch", procs=2, env=run.env)
    m.wait_children()
    run.enqueue()
    blocked = run.wait_blocked()
    for pid, (blocker, held) in blocked.items():
        run.assert_holding(pid, blocker, held)
    index = {p.pid: child_index(p) for p in m.children()}
    assert sorted(index.values()) == [0, 1] and set(index) == set(blocked)
    (gone,) = [p for p, i in index.items() if i == 1]  # TTOU stops the highest index
    (kept,) = [p for p, i in index.items() if i == 0]
    before = run.queued()
    m.signal(signal.SIGTTOU)
    gone_blocker, gone_held = blocked[gone]
    kept_blocker, kept_held = blocked[kept]
    wait_for(lambda: run.queued() == run.in_order(gone_held + before), 10, what="the held batch back on its queue")
    assert not run.events("end", gone_blocker) and run.not_started(gone, gone_blocker) == []
    assert run.not_started(kept, kept_blocker) == kept_held  # not the other child's
    run.release()
    wait_for(lambda: run.ended() >= set(run.tags), 30, what="every job done")
    wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    assert m.wait_children(1) == {kept}
    run.assert_each_ran_once()
    assert run.runs(gone_blocker) == [("start", gone), ("end", gone)]
    assert all(run.runs(tag) == [("start", kept), ("end", kept)] for tag in gone_held + kept_held)
    run.assert_nothing_counted()
    assert m.alive()


@AT
def test_an_idle_sibling_takes_over_every_job_of_a_held_batch(run_of, masters, at):
    """One child holds a batch behind a blocked job; its sibling drains the queue, then,
    idle, takes each job of that batch not started (one per take) and runs it, while the
    blocker still runs."""
    run = run_of(at=at)
    m = masters(module="apps.pf_batch", procs=2, env=run.env)
    m.wait_children()
    run.enqueue()
    ((pid, (blocker, held)),) = run.wait_blocked().items()
    assert len(held) >= 2, held
    (other,) = m.child_pids() - {pid}
    rest = set(run.tags) - {blocker}
    wait_for(lambda: run.ended() >= rest, 30, what="every job but the blocked one done")
    assert not run.events("end", blocker)  # all that while, it was blocked
    assert all(run.runs(tag) == [("start", other), ("end", other)] for tag in held)
    assert run.not_started(pid, blocker) == []
    run.release()
    wait_for(lambda: run.events("end", blocker), 10, what="the blocked job's end")
    wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    run.assert_each_ran_once()
    assert run.runs(blocker) == [("start", pid), ("end", pid)]
    run.assert_nothing_counted()
    assert m.child_pids() == {pid, other} and m.alive()


@AT
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGTSTP], ids=["TERM", "TSTP"])
def test_a_child_signalled_alone_gives_its_held_batch_back_in_queue_order(run_of, masters, at, sig):
    """TERM or TSTP to the child alone (as a platform signalling the whole group, or an
    operator, may): the master returns nothing; the child gives back what it holds once
    its job ends, claiming each first, in queue order: they run next, oldest first."""
    run = run_of(at=at)
    m, pid, blocker, held = run.hold(masters)
    before = run.queued()
    os.kill(pid, sig)
    run.release()
    wait_for(lambda: run.events("end", blocker), 10, what="the blocked job's end")
    if sig == signal.SIGTSTP:  # quiet: the child stays, fetching nothing
        wait_for(lambda: run.listed(pid) == [], 5, what="nothing left on its list")
        assert run.queued() == held + before
        m.signal(signal.SIGTERM)
        assert m.wait_exit(20) == 0, m.output()
        m = drain(run, masters)
    else:  # it leaves; its replacement runs the rest
        wait_for(lambda: run.ended() >= set(run.tags), 30, what="every job done")
        wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    (new,) = m.wait_children(1)
    assert new != pid
    assert [e[1] for e in run.events("start") if e[2] == new] == held + before  # in queue order
    assert run.runs(blocker) == [("start", pid), ("end", pid)]
    run.assert_each_ran_once()
    run.assert_nothing_counted()


# K = 32: the blocker waits with a whole batch of 32 behind it (the next one, "last") or
# the 31 others of its own ("mid"). $PF_HOLD makes K reach 32 however loaded the machine.
def k32(at):
    return {"at": at, "candidates": 160, "min_held": 32 if at == "last" else 31, "hold": "0.1"}


@AT
def test_term_puts_a_held_batch_of_32_back_at_once(run_of, masters, at):
    run = run_of(**k32(at))
    m, pid, blocker, held = run.hold(masters)
    assert len(held) == (32 if at == "last" else 31)
    before = run.queued()
    m.signal(signal.SIGTERM)
    wait_for(lambda: run.queued() == held + before, 10, what="the held batch of 32 back on its queue")
    assert not run.events("end", blocker) and run.not_started(pid, blocker) == []
    run.release()
    assert m.wait_exit(20) == 0, m.output()
    assert run.runs(blocker) == [("start", pid), ("end", pid)]
    assert in_progress_total(run.config) == 0
    drain(run, masters)
    run.assert_held_ran_elsewhere_once(pid, held)


def test_a_sigkilled_child_holding_a_batch_of_32_loses_none_of_it(run_of, masters):
    """SIGKILL with 32 jobs fetched ahead behind the running one: the master requeues its
    whole list at once; the 32 run once each in the replacement child, uncounted; the job it
    was running runs again (its one orphaning is far within the orphan limit)."""
    run = run_of(**k32("last"))
    m, pid, blocker, held = run.hold(masters)
    assert len(held) == 32
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: run.ended() >= set(run.tags), 60, what="every job done, the held 32 included")
    wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    (new,) = m.wait_children(1)
    assert new != pid
    runs = run.runs(blocker)
    assert runs == [("start", pid), ("start", new), ("end", new)], runs
    run.tags.remove(blocker)  # its two starts: checked above
    assert all(run.runs(tag) == [("start", new), ("end", new)] for tag in held)
    run.assert_each_ran_once()
    # The blocker's orphaning (counted at the kill, tests/test_lookahead.py) went with its
    # ack; none was left for the 32.
    run.assert_nothing_counted()
    assert m.alive()


def test_an_idle_sibling_takes_over_a_held_batch_of_32(run_of, masters):
    run = run_of(**{**k32("last"), "candidates": 320})
    m = masters(module="apps.pf_batch", procs=2, env=run.env)
    m.wait_children()
    run.enqueue()
    ((pid, (blocker, held)),) = run.wait_blocked().items()
    assert len(held) == 32
    (other,) = m.child_pids() - {pid}
    wait_for(lambda: run.ended() >= set(run.tags) - {blocker}, 60, what="every job but the blocked one done")
    assert not run.events("end", blocker)
    assert all(run.runs(tag) == [("start", other), ("end", other)] for tag in held)  # all 32 taken over
    run.release()
    wait_for(lambda: run.events("end", blocker), 10, what="the blocked job's end")
    wait_for(lambda: in_progress_total(run.config) == 0 and not run.queued(), 5, what="nothing left")
    run.assert_each_ran_once()
    run.assert_nothing_counted()
    assert m.child_pids() == {pid, other} and m.alive()
