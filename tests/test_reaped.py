"""The master's decisions for a dead child (prefork/reaped.py), without forking."""

from __future__ import annotations

import json

from cogworker.core import fate
from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.prefork import reaped

RUNNING = {"jid": "j1", "class": "app.slow", "queue": "default", "deadline": None, "run_at": 0.0}


def test_a_child_dead_with_a_running_job_counts_an_orphaning_for_that_job_only():
    r = reaped.reap(dict(RUNNING), set(), {}, torn=False, stop_reason=None, crashed=True)
    assert r.count_orphanings == "j1"
    assert r.decisions == {} and r.timed_out == []


def test_a_looked_ahead_job_is_never_counted_and_finished_jobs_are_dropped():
    # Ran j0 (its ack rode on the look-ahead fetch), holds j2 fetched ahead, runs nothing.
    r = reaped.reap(None, {"j0"}, {}, torn=False, stop_reason=None, crashed=True)
    assert r.count_orphanings is False
    assert r.decisions == {"j0": fate.DROP}


def test_a_torn_slot_counts_every_job():
    r = reaped.reap(None, set(), {}, torn=True, stop_reason=None, crashed=True)
    assert r.count_orphanings is True


def test_a_child_stopped_by_the_master_counts_nothing_and_files_what_it_owed():
    filing = fate.File("cogworker:retry", 1.0, "{}", True, 5.0)
    owes = {"j3": filing, "j4": fate.ACK}
    for reason in ("shutdown", "memory", "killed"):
        r = reaped.reap(dict(RUNNING), set(), owes, torn=False, stop_reason=reason, crashed=False)
        assert r.count_orphanings is False and r.timed_out == []
        assert r.decisions == {"j3": filing, "j4": fate.DROP}


def test_a_child_killed_for_its_timeout_files_that_job_as_failed(config):
    r = reaped.reap(dict(RUNNING), set(), {}, torn=False, stop_reason="timeout", crashed=False)
    assert r.timed_out == [RUNNING] and r.count_orphanings is False
    raw = json.dumps({"jid": "j1", "class": "app.slow", "queue": "default", "retry": 0, "timeout": 1}).encode()
    config.redis().rpush(config.keys.in_progress("gone"), raw)
    drop, keep = reaped.apply(config, "gone", r, [raw])
    assert drop == [] and keep == []
    [(entry, _)] = config.redis().zrange(config.keys.dead, 0, -1, withscores=True)
    assert json.loads(entry)["error_class"] == "cogworker.JobTimeout"
    assert r.stats and r.stats[0][0] == "app.slow"  # the failure the child couldn't count
    assert Fetcher(config, "gone", []).listed() == []


def test_decisions_cross_the_pipe_unchanged():
    for decision in (
        fate.ACK,
        fate.GIVE_BACK,
        fate.DROP,
        fate.Park("{}"),
        fate.File("cogworker:dead", 2.5, '{"jid": "x"}', False, 0.0, "interrupted"),
    ):
        assert fate.from_wire(decision.to_wire()) == decision


def test_a_child_with_jobs_in_flight_counts_each_running_job_and_files_only_the_late_ones():
    late = {**RUNNING, "jid": "late", "deadline": 100.0}
    fine = {**RUNNING, "jid": "fine", "deadline": 200.0}
    r = reaped.reap([late, fine], {"acked"}, {}, torn=False, stop_reason=None, crashed=True)
    assert r.count_orphanings == "late\nfine" and r.decisions == {"acked": fate.DROP}
    r = reaped.reap([late, fine], set(), {}, torn=False, stop_reason="timeout", crashed=False, now=110.0)
    assert r.timed_out == [late] and r.count_orphanings is False
    r = reaped.reap([late, {**fine, "jid": ""}], set(), {}, torn=False, stop_reason=None, crashed=True)
    assert r.count_orphanings is True  # a jid it couldn't record: every job counts
    assert reaped.reap([], set(), {}, torn=False, stop_reason=None, crashed=True).count_orphanings is False
