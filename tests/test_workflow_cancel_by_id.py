"""A workflow cancelled by its id (``api.cancel(id)``, ``cogworker cancel ID``, the web
UI's cancel route): a chain's, a group's, a chord's. What of it waits or runs is
cancelled, and nothing of it is pushed after: a chain cancelled while step 1 runs never
starts step 2 or 3; a group's queued members never start; a chord's callback never
fires. Real prefork workers run the jobs; each start is logged to a file (apps.pf_log)."""

from __future__ import annotations

import json
import time

import pytest
from apps.pf_log import events
from prefork_harness import wait_for
from test_cli import cli, done

import cogworker
from cogworker import api
from cogworker.core.inprogress import InProgressList
from cogworker.core.workflow import completion
from cogworker.engine.fetch.fetcher import Fetcher


def _started(log: str) -> list[str]:
    return [tag for event, tag, _, _ in events(log) if event == "start"]


def _ended(log: str) -> list[str]:
    return [tag for event, tag, _, _ in events(log) if event == "end"]


@pytest.fixture
def app(own_config, masters, tmp_path):
    """apps.wf_cancel, its log, and a master of ``procs`` children running it, each
    fetching a job only when its last is done (no look-ahead: a job fetched ahead counts
    as running, and may start before it hears of its cancel)."""
    from apps import wf_cancel

    log = str(tmp_path / "runs.log")

    def start(procs: int):
        master = masters(module="apps.wf_cancel", procs=procs, args=("--no-lookahead",), env={"PF_LOG": log})
        master.wait_children(timeout=60)
        return master

    return wf_cancel, log, start


def _settled_for_a_while(log: str, seconds: float = 2.0) -> None:
    """Nothing more starts for ``seconds`` (what would run has had the time to)."""
    before = list(_started(log))
    time.sleep(seconds)
    assert _started(log) == before


def _chain_after_step_1_started(app) -> tuple[str, str]:
    wc, log, start = app
    start(2)
    # Step 1 runs 4 s: long enough for a CLI process to start and cancel on a loaded machine.
    cid = cogworker.chain(wc.step.si("s1", 4.0), wc.step.si("s2"), wc.step.si("s3")).enqueue()
    wait_for(lambda: "s1" in _started(log), 30, what="step 1 running")
    return cid, log


def _chain_never_went_on(cid: str, log: str) -> None:
    wait_for(lambda: "s1" in _ended(log), 30, what="step 1's sleep over")
    _settled_for_a_while(log)
    assert _started(log) == ["s1"]  # step 2 and 3 never started
    with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
        cogworker.result(cid, timeout=0)
    assert api.cancelled(cid)["was"] == "workflow"


def test_a_chain_cancelled_by_its_id_while_step_1_runs_never_starts_step_2_or_3(app):
    cid, log = _chain_after_step_1_started(app)
    assert api.cancel(cid) is True
    _chain_never_went_on(cid, log)
    assert api.cancel(cid) is False  # nothing of it is left


def test_a_chain_cancelled_by_its_id_through_the_cli(app, own_config):
    cid, log = _chain_after_step_1_started(app)
    assert done(cli("cancel", cid, url=own_config.redis_url)).strip() == f"{cid}: cancelled"
    _chain_never_went_on(cid, log)


def test_a_chain_cancelled_through_the_web_route_with_its_csrf_token(app, own_config):
    from test_web_csrf import client, session

    from cogworker.web import create_app
    from cogworker.web.security import CSRF_COOKIE

    cid, log = _chain_after_step_1_started(app)
    web = create_app(config=own_config)
    cookie, token = session(web)
    path = f"/job/{cid}/cancel"
    forged = client(web).post(path, data={"csrf": "EVIL", "back": "/"}, headers={"cookie": f"{CSRF_COOKIE}={cookie}"})
    assert forged.status_code == 403
    answer = client(web).post(path, data={"csrf": token, "back": "/"}, headers={"cookie": f"{CSRF_COOKIE}={cookie}"})
    assert answer.status_code == 303
    _chain_never_went_on(cid, log)
    page = client(web).get(f"/job/{cid}", headers={"cookie": f"{CSRF_COOKIE}={cookie}"})
    assert page.status_code == 200 and "cancelled" in page.text


def test_a_group_cancelled_by_its_id_runs_none_of_its_queued_members(app):
    wc, log, start = app
    gid = cogworker.group(wc.step.si(f"m{i}", 1.0) for i in range(6)).enqueue()
    start(1)
    wait_for(lambda: "m0" in _started(log), 30, what="member 0 running")
    assert api.cancel(gid) is True
    wait_for(lambda: "m0" in _ended(log), 30, what="member 0's sleep over")
    _settled_for_a_while(log)
    assert _started(log) == ["m0"]
    with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
        cogworker.result(gid, timeout=0)
    assert api.cancel(gid) is False


def test_a_chord_cancelled_by_its_id_never_fires_its_callback(app):
    wc, log, start = app
    chord = cogworker.chord(cogworker.group(wc.step.si(f"m{i}", 1.0) for i in range(4)), wc.step.si("callback"))
    cid = chord.enqueue()
    start(2)
    wait_for(lambda: len(_started(log)) >= 2, 30, what="two members running")
    assert api.cancel(cid) is True
    wait_for(lambda: len(_ended(log)) >= 2, 30, what="the running members' sleep over")
    _settled_for_a_while(log, 3.0)
    assert "callback" not in _started(log) and len(_started(log)) == 2  # the queued two never started
    with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
        cogworker.result(cid, timeout=0)
    with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
        cogworker.result(chord.group_id, timeout=0)


def test_a_chain_step_that_completes_after_its_chain_was_cancelled_pushes_no_next_step(config):
    """The race the mark closes: a step whose completion lands after the cancel's first
    write (its entry still listed) settles, and pushes nothing."""
    from apps import wf_cancel as wc

    cid = cogworker.chain(wc.step.si("s1"), wc.step.si("s2")).enqueue()
    fetcher = Fetcher(config, "racer", [("default", None)], block_timeout=0)
    assert fetcher.fetch() is not None
    keys = config.keys
    [raw] = config.redis().lrange(keys.in_progress("racer"), 0, -1)
    from cogworker.transitions import operator

    operator.cancel_workflow(  # the cancel's first step alone, as api.cancel writes it
        config.redis(),
        keys,
        mark_key=keys.cancelled(cid),
        index=keys.cancelled_workflows,
        group=keys.cancelled_workflows,
        result=keys.result(cid),
        result_wait=keys.result_wait(cid),
        group_wait=keys.cancelled_workflows,
        results_index=keys.retained_results,
        declared=[],
        id=cid,
        kind="chain",
        mark=json.dumps({"was": "workflow"}),
        ttl=60,
        now=repr(time.time()),
        most=10,
        result_ttl=60,
    )
    assert InProgressList(config, "racer").complete(raw, completion(json.loads(raw), "s1", 3600)) is True
    assert config.redis().llen(keys.queue("default")) == 0  # s2 was not pushed
    assert config.redis().llen(keys.in_progress("racer")) == 0  # s1 settled


def test_workflow_cancel_marks_are_bounded_by_count(config):
    """Past status_max workflow marks, the oldest go (with their keys); by age, their TTL."""
    from apps import wf_cancel as wc

    cogworker.configure(status_max=3)
    config = cogworker.config.get_config()
    gids = [cogworker.group([wc.step.si(f"g{i}")]).enqueue() for i in range(5)]
    for gid in gids:
        assert api.cancel(gid) is True
    keys = config.keys
    assert config.redis().zcard(keys.cancelled_workflows) == 3
    assert [config.redis().exists(keys.cancelled(g)) for g in gids] == [0, 0, 1, 1, 1]
    assert 0 < config.redis().ttl(keys.cancelled(gids[-1])) <= config.status_ttl


def test_a_chain_whose_last_step_alone_is_queued_is_cancelled_by_its_id(config):
    from apps import wf_cancel as wc

    cid = cogworker.chain(wc.step.si("s1"), wc.step.si("s2")).enqueue()
    fetcher = Fetcher(config, "runner", [("default", None)], block_timeout=0)
    assert fetcher.fetch() is not None
    keys = config.keys
    [raw] = config.redis().lrange(keys.in_progress("runner"), 0, -1)
    assert InProgressList(config, "runner").complete(raw, completion(json.loads(raw), "s1", 3600)) is True
    [last] = config.redis().lrange(keys.queue("default"), 0, -1)
    assert json.loads(last)["jid"] == cid  # the chain's id is its last step's jid
    assert api.cancel(cid) is True
    assert config.redis().llen(keys.queue("default")) == 0
    with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
        cogworker.result(cid, timeout=0)
    assert api.cancel(cid) is False
