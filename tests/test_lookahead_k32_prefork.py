"""K = 32 jobs per look-ahead (the deepest look-ahead, for tiny jobs; docs/architecture.md#lookahead-k)
with a real ``cogworker-prefork`` master, real forked children, real signals and a private
redis-server: a blocked job with a whole look-ahead of 32 behind it (the next one) or the 31
others of its own. TERM puts all 31 or 32 back at once, a SIGKILL of the child loses none
of its 32 (requeued at once, uncounted, each run once), an idle sibling takes all 32 over.
The scenario and its checks: test_lookahead_k_prefork, lookahead_harness."""

from __future__ import annotations

import os
import signal

from lookahead_harness import AT, drain, run_of  # noqa: F401 (run_of: a fixture)
from prefork_harness import in_progress_total, wait_for


# K = 32: the blocker waits with a whole look-ahead of 32 behind it (the next one, "last") or
# the 31 others of its own ("mid"). $PF_HOLD makes K reach 32 however loaded the machine.
# Candidates past the blocker cost nothing: 320 give "last" (once per look-ahead of 32) ten
# chances (160 once gave it none under the parallel suite).
def k32(at):
    return {"at": at, "candidates": 320, "min_held": 32 if at == "last" else 31, "hold": "0.1"}


@AT
def test_term_puts_a_held_lookahead_of_32_back_at_once(run_of, masters, at):  # noqa: F811
    run = run_of(**k32(at))
    m, pid, blocker, held = run.hold(masters)
    assert len(held) == (32 if at == "last" else 31)
    before = run.queued()
    m.signal(signal.SIGTERM)
    wait_for(lambda: run.queued() == held + before, 10, what="the held look-ahead of 32 back on its queue")
    assert not run.events("end", blocker) and run.not_started(pid, blocker) == []
    run.release()
    assert m.wait_exit(20) == 0, m.output()
    assert run.runs(blocker) == [("start", pid), ("end", pid)]
    assert in_progress_total(run.config) == 0
    drain(run, masters)
    run.assert_held_ran_elsewhere_once(pid, held)


def test_a_sigkilled_child_holding_a_lookahead_of_32_loses_none_of_it(run_of, masters):  # noqa: F811
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


def test_an_idle_sibling_takes_over_a_held_lookahead_of_32(run_of, masters):  # noqa: F811
    run = run_of(**{**k32("last"), "candidates": 480})
    m = masters(module="apps.pf_ahead", procs=2, env=run.env)
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
