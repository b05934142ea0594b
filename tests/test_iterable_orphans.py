"""The poison rule (``max_orphanings``) for resumable jobs (docs/architecture.md#iterable):
a death after which the job's checkpoint had moved on isn't counted; one at the same
checkpoint is. Real prefork masters, real children SIGKILLed mid-job."""

from __future__ import annotations

import json
import os
import signal

import pytest
from prefork_harness import in_progress_total, wait_for
from test_iterable_prefork import assert_all_once, checkpoint, count, enqueue, env_for, items_done, job_starts

MAX_ORPHANINGS = 3  # the default: the 4th counted death is the last


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "runs.log")


def resumed_at(log, tag, run):
    """Where the ``run``-th start (0 = the first) resumed: -1 from the start."""
    cursor = job_starts(log, tag)[run][0].split("@")[1]
    return -1 if cursor == "None" else int(cursor)


def done(config, jid):
    return int(checkpoint(config, jid).get("done", "0"))


def test_a_job_killed_past_the_limit_while_its_checkpoint_advances_completes(own_redis, own_config, masters, log):
    kills = MAX_ORPHANINGS + 3
    m = masters(module="apps.pf_iter", procs=3, env=env_for(log, PF_ITEM_DELAY="0.005"))
    m.wait_children()
    jid = enqueue("walk", "p")
    for run in range(kills):
        wait_for(lambda run=run: len(job_starts(log, "p")) == run + 1, 30, what=f"run {run + 1} of p")
        # Past its next checkpoint (every 20 items) before the kill: progress since the last death.
        past = resumed_at(log, "p", run) + 1 + 3 * 20
        wait_for(lambda past=past: done(own_config, jid) >= past, 30, 0.005, what=f"p's checkpoint past {past}")
        os.kill(job_starts(log, "p")[run][1], signal.SIGKILL)
    wait_for(lambda: count(log, "job-end", "p")["p"] == 1, 60, what="p finished")
    assert len(job_starts(log, "p")) == kills + 1
    assert [resumed_at(log, "p", run) for run in range(kills + 1)] == sorted(
        {resumed_at(log, "p", run) for run in range(kills + 1)}
    )  # each run resumed further on
    assert_all_once(log, "p", twice_at_most=kills * 20)
    r = own_config.redis()
    assert r.zcard(own_config.keys.dead) == 0 and r.llen(own_config.keys.repeat_orphans) == 0
    wait_for(lambda: in_progress_total(own_config) == 0, 10, what="lists drained")
    assert r.get(own_config.keys.orphanings(jid)) is None  # its success cleared the count
    assert m.alive()


@pytest.mark.parametrize(
    ("at", "deaths"),
    [
        (0, MAX_ORPHANINGS + 1),  # no checkpoint ever: every death counts, as before
        (250, MAX_ORPHANINGS + 2),  # the first run's progress excuses its death; the rest die at 240
    ],
)
def test_a_job_that_dies_again_at_the_same_checkpoint_still_goes_dead(own_redis, own_config, masters, log, at, deaths):
    m = masters(module="apps.pf_iter", procs=3, env=env_for(log))
    m.wait_children()
    jid = enqueue("doomed", "d", at)
    r = own_config.redis()
    entry = json.loads(wait_for(lambda: r.zrange(own_config.keys.dead, 0, -1), 60, 0.05, what="d in dead")[0])
    assert entry["jid"] == jid and entry["error_class"] == "cogworker.ProcessDied"
    starts = job_starts(log, "d")
    assert len(starts) == deaths, [t for t, _ in starts]
    assert len({pid for _, pid in starts}) == deaths  # each run SIGKILLed its own child
    resumed = {resumed_at(log, "d", run) for run in range(1, deaths)}
    assert resumed <= {-1, (at // 20) * 20 - 1}  # always back at the same checkpoint
    assert items_done(log, "d") >= at and not count(log, "job-end", "d")
    assert m.alive()
