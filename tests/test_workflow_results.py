"""Results, signatures, chains, groups and chords against a real Redis: a single-process
worker in a thread, or a real prefork master for a result fetched by another process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest
from apps import wf
from core_util import RunningWorker, wait_for
from prefork_harness import in_progress_total

import cogworker
from cogworker import api
from cogworker.client import results
from cogworker.core import fate, workflow
from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.errors import ConfigurationError
from cogworker.prefork import reaped

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": TESTS_DIR, "COGWORKER_REDIS_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args], capture_output=True, text=True, timeout=60, cwd=TESTS_DIR, env=env
    )


# -- result() -----------------------------------------------------------------------------


def test_result_across_a_fetch_by_another_process(own_config, masters, own_redis):
    m = masters(module="apps.wf", procs=1)
    m.wait_children()
    jid = wf.slow_add.enqueue(20, 22, 0.3)  # fetched and run by the master's child
    assert cogworker.result(jid, timeout=30) == 42
    g = cogworker.group(wf.add.s(i, 1) for i in range(5)).enqueue()
    assert cogworker.result(g, timeout=30) == [1, 2, 3, 4, 5]
    assert asyncio.run(cogworker.result_async(jid, timeout=5)) == 42
    wait_for(lambda: in_progress_total(own_config) == 0, 10)


@pytest.mark.parametrize("args", [(), ("--concurrency", "3")])
def test_results_of_async_jobs_and_of_jobs_in_flight(own_config, masters, args):
    m = masters(module="apps.wf", procs=1, args=args)
    m.wait_children()
    jids = [wf.async_add.enqueue(i, 1) for i in range(6)] + [wf.slow_add.enqueue(i, 2, 0.05) for i in range(6)]
    assert [cogworker.result(j, timeout=30) for j in jids] == [i + 1 for i in range(6)] + [i + 2 for i in range(6)]
    cid = cogworker.chord([wf.async_add.s(i, i) for i in range(8)], wf.total.s()).enqueue()
    assert cogworker.result(cid, timeout=30) == 56
    wait_for(lambda: in_progress_total(own_config) == 0, 10)


def test_a_dead_job_raises_job_failed_with_its_error(config):
    with RunningWorker():
        jid = wf.boom.enqueue(7)
        with pytest.raises(cogworker.JobFailed) as caught:
            cogworker.result(jid, timeout=10)
    failure = caught.value
    assert (failure.jid, failure.error_class, failure.error_message) == (jid, "ValueError", "boom 7")
    assert "raise ValueError" in failure.traceback and failure.job_class == "apps.wf.boom"
    assert str(failure) == f"apps.wf.boom jid={jid} ended dead: ValueError: boom 7"
    assert api.result(jid).state == "dead"


def test_a_timeout_raises_result_timeout_and_waiting_does_not_poll(config):
    r = config.redis()
    r.config_resetstat()
    started = time.monotonic()
    with pytest.raises(cogworker.ResultTimeout, match="no result for jid=nope within 3s"):
        cogworker.result("nope", timeout=3)
    assert time.monotonic() - started >= 3
    stats = r.info("commandstats")
    # Blocked on the wake list in chunks of half the socket timeout (2 s here): a handful
    # of reads in 3 s, not a poll loop.
    assert stats["cmdstat_hgetall"]["calls"] <= 5, stats["cmdstat_hgetall"]
    assert stats["cmdstat_blpop"]["calls"] <= 4, stats["cmdstat_blpop"]
    with pytest.raises(cogworker.ResultTimeout):
        asyncio.run(cogworker.result_async("nope", timeout=0.2))


def test_a_waiter_wakes_when_the_result_lands_and_other_waiters_too(config):
    jid = wf.add.enqueue(2, 3)
    got: list[object] = []

    async def two() -> None:
        got.extend(
            await asyncio.gather(cogworker.result_async(jid, timeout=20), cogworker.result_async(jid, timeout=20))
        )

    with RunningWorker():
        asyncio.run(two())
    assert got == [5, 5]


def test_an_expired_result_says_so_and_every_key_is_bounded_by_ttl(config):
    r = config.redis()
    with RunningWorker():
        jid = wf.add.options(result_ttl=50).enqueue(1, 1)
        assert cogworker.result(jid, timeout=10) == 2
        default = wf.add.enqueue(2, 2)
        assert cogworker.result(default, timeout=10) == 4
    keys = config.keys
    assert 0 < r.ttl(keys.result(jid)) <= 100  # twice its result_ttl
    assert 3600 < r.ttl(keys.result(default)) <= 7200  # Config.result_ttl, 1 h
    assert 0 < r.ttl(keys.result_wait(jid)) <= 300
    # Time-injected: past its TTL the result is "expired", whatever Redis still holds.
    later = time.time() + 51
    expired = f"the result of jid={jid} expired at .* \\(kept 50s, result_ttl\\)"
    with pytest.raises(cogworker.ResultExpired, match=expired):
        results.peek(jid, now=later)
    assert api.result(jid, now=later).state == "expired"
    assert results.peek(jid) == 2
    # Gone from Redis altogether (past twice its TTL): no result, within the timeout.
    r.delete(keys.result(jid))
    with pytest.raises(cogworker.ResultTimeout):
        cogworker.result(jid, timeout=0)
    assert api.result(jid) is None


def test_group_state_is_bounded_while_running_and_after(config):
    r = config.redis()
    config = cogworker.configure(workflow_ttl=600)
    g = cogworker.group(wf.add.s(i, i) for i in range(3)).enqueue()
    assert 0 < r.ttl(config.keys.group(g)) <= 600  # while its members run: workflow_ttl
    assert api.result(g).state == "running"
    with pytest.raises(cogworker.ResultTimeout):
        cogworker.result(g, timeout=0)
    with RunningWorker():
        assert cogworker.result(g, timeout=10) == [0, 2, 4]
    assert 3600 < r.ttl(config.keys.group(g)) <= 7200  # then twice its results' TTL
    with pytest.raises(cogworker.ResultExpired, match=f"group {g}"):
        results.peek(g, now=time.time() + 3601)


def test_a_value_that_cant_be_kept_fails_the_job_with_why(config):
    r = config.redis()
    with RunningWorker():
        jid = wf.unkeepable.enqueue()
        assert wait_for(lambda: r.zcard(config.keys.retry) == 1, 10)
    entry = json.loads(r.zrange(config.keys.retry, 0, -1)[0])
    assert entry["jid"] == jid and entry["error_class"] == "TypeError"
    assert "its return value can't be kept as a result" in entry["error_message"]


def test_results_off_writes_nothing_more(config):
    r = config.redis()
    payload = json.loads(json.dumps(wf.member.s(1).bound.payload((1,), {})))
    assert "wf" not in payload
    with RunningWorker():
        jid = wf.member.enqueue(3)
        assert wait_for(lambda: r.llen("test:log") == 2, 10)
    assert not r.exists(config.keys.result(jid))
    assert not [k for k in r.keys("*") if b"result" in k]


def test_bad_input_is_one_clear_error(config):
    with pytest.raises(TypeError, match="result\\(\\) takes a jid"):
        cogworker.result(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timeout in seconds"):
        cogworker.result("x", timeout=-1)
    with pytest.raises(ConfigurationError, match="results must be True or False"):
        cogworker.job(results="yes")(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="result_ttl must be a whole number"):
        wf.add.options(result_ttl=0)
    with pytest.raises(ConfigurationError, match="result_ttl must be"):
        cogworker.Config(result_ttl=0)
    with pytest.raises(TypeError, match="chain takes signatures"):
        cogworker.chain(wf.add)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="can't take these arguments"):
        wf.add.si(1)


# -- signatures, chains, groups, chords -----------------------------------------------------


def test_a_signature_is_json_and_back(config):
    sig = wf.add.options(queue="low", result_ttl=60).s(10)
    data = json.loads(json.dumps(sig.to_dict()))
    assert data == {
        "job": "apps.wf.add",
        "args": [10],
        "kwargs": {},
        "immutable": False,
        "options": {"queue": "low", "retry": 25, "result_ttl": 60, "results": True},
    }
    back = cogworker.Signature.from_dict(data)
    assert (back.name, back.args, back.bound.opts.queue, back.bound.opts.result_ttl) == (
        "apps.wf.add",
        (10,),
        "low",
        60,
    )
    assert cogworker.Signature.from_dict(wf.add.si(1, 2).to_dict()).immutable
    with RunningWorker():
        assert cogworker.result(wf.add.s(1, 2).enqueue(), timeout=10) == 3


def test_chains_pass_results_and_si_takes_none(config):
    with RunningWorker():
        assert (
            cogworker.result(cogworker.chain(wf.add.s(1, 2), wf.add.s(10), wf.add.s(100)).enqueue(), timeout=10) == 113
        )
        assert cogworker.result(cogworker.chain(wf.add.s(1, 2), wf.add.si(5, 5)).enqueue(), timeout=10) == 10
        assert cogworker.result(cogworker.chain(wf.add.s(4, 4)).enqueue(), timeout=10) == 8


def test_a_chain_stops_at_a_dead_step(config):
    r = config.redis()
    with RunningWorker():
        cid = cogworker.chain(wf.add.s(1, 2), wf.boom.si(9), wf.add.s(100)).enqueue()
        with pytest.raises(cogworker.JobFailed, match="apps.wf.boom jid=.* \\(in .*\\) ended dead: ValueError: boom 9"):
            cogworker.result(cid, timeout=10)
        time.sleep(0.3)  # nothing after it may run
    assert [line.split(b"|")[1] for line in r.lrange("test:log", 0, -1)] == [b"add:1:2", b"add:1:2"]
    assert api.result(cid).failed_jid != cid


def test_a_chord_gets_the_list_and_a_dead_member_stops_it(config):
    r = config.redis()
    with RunningWorker():
        cid = cogworker.chord(cogworker.group(wf.add.s(i, i) for i in range(10)), wf.total.s()).enqueue()
        assert cogworker.result(cid, timeout=10) == 90
        fixed = cogworker.chord([wf.add.s(1, 1)], wf.add.si(0, 7)).enqueue()
        assert cogworker.result(fixed, timeout=10) == 7
        chord = cogworker.chord(cogworker.group([wf.add.s(1, 1), wf.boom.s(3)]), wf.total.s())
        bad = chord.enqueue()
        with pytest.raises(cogworker.JobFailed, match="boom 3"):
            cogworker.result(bad, timeout=10)
        with pytest.raises(cogworker.JobFailed, match="boom 3"):
            cogworker.result(chord.group_id, timeout=10)
        time.sleep(0.3)
    assert r.lrange("test:total", 0, -1) == [repr([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]).encode()]
    assert cogworker.result(cogworker.group([]).enqueue(), timeout=0) == []


# -- the script: exactly once under replay ---------------------------------------------------


def test_a_replayed_completion_changes_nothing(config):
    r = config.redis()
    chord = cogworker.chord([wf.add.s(1, 1), wf.add.s(2, 2)], wf.total.s())
    cid = chord.enqueue()
    f = Fetcher(config, "replay:1", [("default", None)], block_timeout=0)
    works = [f.fetch(), f.fetch()]
    for work in works:
        payload = json.loads(work.raw)
        value = sum(payload["args"])
        decision = fate.decide(config, payload, fate.Succeeded(0.0, value))
        assert isinstance(decision, fate.Complete)
        assert f.complete(work.raw, decision.done) is True
        assert f.complete(work.raw, decision.done) is False  # replayed: nothing written twice
        assert fate.from_wire(decision.to_wire()) == decision
    assert r.hget(config.keys.group(chord.group_id), "left") == b"0"
    callbacks = r.lrange(config.keys.queue("default"), 0, -1)
    assert len(callbacks) == 1 and json.loads(callbacks[0])["args"] == [[2, 4]]
    assert json.loads(callbacks[0])["jid"] == cid
    assert r.llen(config.keys.in_progress("replay:1")) == 0


def test_a_dead_childs_owed_completion_is_applied_not_dropped():
    done = workflow.Completion("j1", "3", "60")
    owed = reaped.reap(
        {"jid": "j1"}, acks={"j1", "j2"}, owes={"j1": fate.Complete(done)}, torn=False, stop_reason=None, crashed=True
    )
    assert owed.decisions == {"j1": fate.Complete(done), "j2": fate.DROP}


def test_a_completion_redis_refused_is_owed_then_written_once(config, monkeypatch):
    from cogworker import store
    from cogworker.core.inprogress import InProgressList
    from cogworker.engine import loop

    monkeypatch.setattr(loop, "RECONCILE_INTERVAL", 0.2)
    real, refused = InProgressList.complete, []

    def flaky(self, raw, done):
        if len(refused) < 3:  # every attempt of the first settle fails: the completion is owed
            refused.append(done.jid)
            raise store.ConnectionError("Redis away (test)")
        return real(self, raw, done)

    monkeypatch.setattr(InProgressList, "complete", flaky)
    r = config.redis()
    with RunningWorker():
        cid = cogworker.chain(wf.add.s(1, 2), wf.add.s(10)).enqueue()
        assert cogworker.result(cid, timeout=20) == 13
    assert len(refused) == 3
    assert [line.split(b"|")[:2] for line in r.lrange("test:log", 0, -1)] == [
        [b"start", b"add:1:2"],
        [b"end", b"add:1:2"],
        [b"start", b"add:3:10"],
        [b"end", b"add:3:10"],
    ]


def test_the_master_writes_a_dead_childs_owed_completion(config):
    r = config.redis()
    jid = wf.add.enqueue(5, 6)
    f = Fetcher(config, "gone:1", [("default", None)], block_timeout=0)
    work = f.fetch()
    decision = fate.decide(config, json.loads(work.raw), fate.Succeeded(0.0, 11))
    owed = reaped.reap({"jid": jid}, acks={jid}, owes={jid: decision}, torn=False, stop_reason=None, crashed=True)
    drop, keep = reaped.apply(config, "gone:1", owed, [work.raw])
    assert (drop, keep) == ([], [])
    assert r.llen(config.keys.in_progress("gone:1")) == 0  # settled: nothing left to requeue
    assert cogworker.result(jid, timeout=0) == 11


def test_cli_result(config, redis_server):
    with RunningWorker():
        jid = wf.add.enqueue(40, 2)
        assert cogworker.result(jid, timeout=10) == 42
        dead = wf.boom.enqueue(1)
        with pytest.raises(cogworker.JobFailed):
            cogworker.result(dead, timeout=10)
    shown = cli(redis_server.url, "result", jid)
    assert shown.returncode == 0 and "succeeded" in shown.stdout and "42" in shown.stdout
    as_json = json.loads(cli(redis_server.url, "result", jid, "--json").stdout)
    assert as_json["value"] == 42 and as_json["state"] == "succeeded"
    failed = cli(redis_server.url, "result", dead)
    assert failed.returncode == 1 and "ValueError: boom 1" in failed.stdout and "traceback" in failed.stdout
    missing = cli(redis_server.url, "result", "nope")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "no result kept" in missing.stderr
