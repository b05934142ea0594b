"""K jobs per look-ahead (docs/architecture.md#lookahead-k) with a real ``cogworker-prefork``
master, real forked children, real signals and a private redis-server.

Each test fills a queue with short jobs (so the children's K grows above 1), then
candidate blockers (``apps.pf_ahead.step``): the first that starts with at least two jobs
of its child's look-ahead not started behind it on the child's list blocks until the test
opens its gate. That child then holds a look-ahead behind a running job: the rest of the
look-ahead the blocker came with, or (the blocker being the last of its look-ahead) the next look-ahead,
fetched as it started, its reply not yet read by the child; both are tested. Then:

- TERM, TSTP (quiet), and a graceful stop of that child (TTOU one child fewer, HUP
  replacing it) put the jobs it holds back on their queue at once (while the job in
  front of them still runs), in queue order; they run later, exactly once, uncounted;
  the blocked job finishes (or, past ``--timeout``, is killed and requeued uncounted,
  row 5b of the fate table, and runs again after, never concurrently);
- TERM or TSTP to that child alone (the master returns nothing): the child gives the
  look-ahead back itself once its job ends, in queue order too (it used to reverse it);
- an idle sibling takes over every job of that look-ahead not started (not only one) and
  runs it while the blocker still runs.

(At K = 32, the deepest look-ahead: test_lookahead_k32_prefork; the harness, ``Run``:
lookahead_harness.)

Every start and end is logged with its pid (``apps.pf_faults.log``), from inside the
children; the held jobs are the ones the blocker saw, checked again by the test on the
child's in-progress list before any signal.
"""

from __future__ import annotations

import os
import signal

import pytest
from lookahead_harness import AT, child_index, drain, run_of  # noqa: F401 (run_of: a fixture)
from prefork_harness import in_progress_total, wait_for


@pytest.mark.parametrize(
    ("at", "blocker_outlives_timeout"),
    [("mid", False), ("last", False), ("mid", True)],
    ids=["mid-look-ahead", "next-look-ahead", "killed-at-timeout"],
)
def test_term_puts_a_held_lookahead_back_at_once(run_of, masters, at, blocker_outlives_timeout):  # noqa: F811
    run = run_of(at=at)
    m, pid, blocker, held = run.hold(masters, args=["--timeout", "1" if blocker_outlives_timeout else "30"])
    before = run.queued()
    m.signal(signal.SIGTERM)
    if not blocker_outlives_timeout:
        # Back at once, in queue order, while the job in front of them still runs.
        wait_for(lambda: run.queued() == held + before, 10, what="the held look-ahead back on its queue")
        assert not run.events("end", blocker) and run.not_started(pid, blocker) == []
        run.release()
        assert m.wait_exit(20) == 0, m.output()
        assert run.runs(blocker) == [("start", pid), ("end", pid)]  # it finished, and was acked
        assert run.queued() == held + before
    else:
        # The blocked job outlives --timeout: cogworker.Shutdown raised in it a grace before
        # the kill, handed back at the fetch end, uncounted.
        assert m.wait_exit(20) == 0, m.output()
        out = m.output()
        assert out.index("looked-ahead jobs are back on their queues") < out.index("at the shutdown deadline")
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
def test_quiet_puts_a_held_lookahead_back_at_once(run_of, masters, at):  # noqa: F811
    run = run_of(at=at)
    m, pid, blocker, held = run.hold(masters)
    before = run.queued()
    m.signal(signal.SIGTSTP)
    wait_for(lambda: run.queued() == held + before, 10, what="the held look-ahead back on its queue")
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
def test_hup_puts_a_replaced_childs_held_lookahead_back_at_once(run_of, masters, at):  # noqa: F811
    run = run_of(at=at)
    m, pid, blocker, held = run.hold(masters)
    m.signal(signal.SIGHUP)

    def back():
        """Off the child's list: on the queue, in order, or run by another child (its
        replacement is forked once it has left, after its job; the look-ahead doesn't wait)."""
        queued = run.queued()
        elsewhere = {e[1] for e in run.events("start") if e[2] != pid}
        return (
            run.not_started(pid, blocker) == []
            and queued == run.in_order(queued)
            and all(tag in queued or tag in elsewhere for tag in held)
        )

    wait_for(back, 10, what="the held look-ahead back on its queue")
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


def test_ttou_puts_the_stopped_childs_held_lookahead_back_at_once(run_of, masters):  # noqa: F811
    """Both children hold a look-ahead behind a blocked job; TTOU stops the highest-indexed one:
    its look-ahead goes back, the other's stays with it."""
    run = run_of(blockers=2)
    m = masters(module="apps.pf_ahead", procs=2, env=run.env)
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
    wait_for(lambda: run.queued() == run.in_order(gone_held + before), 10, what="the held look-ahead back on its queue")
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
def test_an_idle_sibling_takes_over_every_job_of_a_held_lookahead(run_of, masters, at):  # noqa: F811
    """One child holds a look-ahead behind a blocked job; its sibling drains the queue, then,
    idle, takes each job of that look-ahead not started (one per take) and runs it, while the
    blocker still runs."""
    run = run_of(at=at)
    m = masters(module="apps.pf_ahead", procs=2, env=run.env)
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
def test_a_child_signalled_alone_gives_its_held_lookahead_back_in_queue_order(run_of, masters, at, sig):  # noqa: F811
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
