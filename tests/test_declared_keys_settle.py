"""Every key the settling scripts touch is one they were given (docs/architecture.md#transitions):
complete, file, file_head, settle_dead, cancel, batch_close and cancel_workflow, run by a
real worker and the real API against a private redis-server whose MONITOR shows each
script call (its KEYS) followed by each command the script ran, whose keys the server
itself names (COMMAND GETKEYS). The callbacks a group or a batch fires (their queue,
result, unique lock, named by the record), and the marks shed (named by an index), are
the keys these scripts once built from the namespace; here each fires or is shed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from apps import batchjobs as bj
from apps import wf
from apps.pf_faults import events
from core_util import RunningWorker, wait_for
from declared_util import Line, Monitor, calls, undeclared

import cogworker
from cogworker import api
from cogworker.fleet import recovery

WATCHED = ("complete", "file", "file_head", "settle_dead", "cancel", "batch_close", "cancel_workflow")


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = str(tmp_path / "runs.log")
    monkeypatch.setenv("PF_LOG", path)
    return path


@pytest.fixture
def watched(own_config):
    """Call it to stop watching: every key a script touched was declared (the settling
    scripts' and every other's the worker ran); the commands seen."""
    client = own_config.redis()
    monitor = Monitor(client)

    def check() -> list[Line]:
        commands = monitor.stop(client)
        assert undeclared(client, commands) == []
        return commands

    yield check


def fired(path: str) -> list[str]:
    return sorted(tag.split("@")[0] for event, tag, _, _ in events(path) if event == "cb-start")


def test_a_chords_callback_is_pushed_on_declared_keys_one_call_more_for_the_last_member(own_config, watched):
    with RunningWorker():
        cid = cogworker.chord(cogworker.group(wf.add.s(i, i) for i in range(4)), wf.total.s()).enqueue()
        assert cogworker.result(cid, timeout=10) == 12
    commands = watched()
    # Four members, the callback, and once more the last member, asked for the callback's queue.
    assert calls(commands, "complete") == 4 + 1 + 1


def test_a_dead_member_fails_its_chord_on_declared_keys(own_config, watched):
    with RunningWorker():
        chord = cogworker.chord(cogworker.group([wf.add.s(1, 1), wf.boom.s(3)]), wf.total.s())
        cid = chord.enqueue()
        with pytest.raises(cogworker.JobFailed, match="boom 3"):
            cogworker.result(cid, timeout=10)
    assert calls(watched(), "file") >= 1


def test_a_dead_chain_step_settles_in_its_one_call_its_keys_read_from_its_payload(own_config, watched):
    """What a dead job's payload names (its result, its chain's) Python declares up front:
    no round trip more."""
    with RunningWorker():
        cid = cogworker.chain(wf.boom.s(1), wf.add.s(2)).enqueue()
        with pytest.raises(cogworker.JobFailed, match="boom 1"):
            cogworker.result(cid, timeout=10)
    assert calls(watched(), "file") == 1


def test_a_batchs_callbacks_fire_on_declared_keys_at_its_last_job_and_at_its_close(own_config, log, watched):
    with cogworker.batch(
        on_success=bj.unique_callback.s("success"),
        on_complete=bj.callback.s("complete"),
        on_death=bj.callback.s("death"),
    ) as b:
        bj.work.enqueue("j0")
        bj.doomed.enqueue("j1")  # dead: on_death at once (file), on_complete at the last
    with RunningWorker():
        assert wait_for(lambda: fired(log) == ["complete", "death"], 20)
        with cogworker.batch(
            on_success=bj.unique_callback.s("success2"), on_complete=bj.callback.s("complete2")
        ) as late:
            bj.work.enqueue("j2")
            wait_for(lambda: api.batch(late.bid).succeeded == 1, 20)
        assert wait_for(lambda: fired(log) == ["complete", "complete2", "death", "success2"], 20)
    assert api.batch(b.bid).dead == 1
    commands = watched()
    assert calls(commands, "batch_close") == 2 + 1  # the second close asked for its callbacks' keys


def test_a_cancel_settles_a_batch_and_a_chord_on_declared_keys(own_config, log, watched):
    with cogworker.batch(on_complete=bj.callback.s("complete")):
        jid = bj.work.enqueue("j0")
    assert api.cancel(jid) is True  # its batch's last job: on_complete fires
    cid = cogworker.chord(cogworker.group([wf.add.s(1, 1)]), wf.total.s()).enqueue()
    member = json.loads(own_config.redis().lindex(own_config.keys.queue("default"), 0))["jid"]
    assert api.cancel(member) is True  # its group fails: so does the callback's result
    with pytest.raises(cogworker.JobFailed, match="Cancelled"):
        cogworker.result(cid, timeout=0)  # the callback's result, named by the group's record
    with RunningWorker():
        assert wait_for(lambda: fired(log) == ["complete"], 20)
    assert calls(watched(), "cancel") == 2 * 2


def test_a_workflow_cancel_sheds_old_marks_on_declared_keys(own_config, watched):
    cogworker.configure(status_max=2)
    config = cogworker.config.get_config()
    chords = [cogworker.chord([wf.add.s(i, i)], wf.total.s()).enqueue() for i in range(3)]
    for cid in chords:
        assert api.cancel(cid) is True
    assert [config.redis().exists(config.keys.cancelled(c)) for c in chords] == [0, 1, 1]
    assert calls(watched(), "cancel_workflow") >= 3


def test_what_retention_sheds_is_declared_too(own_config, watched):
    """Past status_max kept results (complete) and cancel marks (cancel), the oldest go
    with their keys: each named by the index, each declared before it goes."""
    cogworker.configure(status_max=3)
    config = cogworker.config.get_config()
    keys, r = config.keys, config.redis()
    with RunningWorker():
        jids = [wf.add.enqueue(i, i) for i in range(8)]
        assert cogworker.result(jids[-1], timeout=10) == 14
        assert wait_for(lambda: all(r.hget(keys.result(j), "status") for j in jids[-3:]), 10)
    assert r.zcard(keys.retained_results) <= 4 and r.exists(keys.result(jids[0])) == 0
    queued = [bj.work.enqueue(f"c{i}") for i in range(8)]
    assert all(api.cancel(jid) for jid in queued)
    assert r.zcard(keys.retained_cancelled) <= 4 and r.exists(keys.cancelled(queued[0])) == 0
    commands = watched()
    assert calls(commands, "complete") > 8 and calls(commands, "cancel") > 8  # (some asked, once a group)


def _taken(config: Any, jid: str) -> bytes:
    """Job ``jid`` off its queue, as it was there."""
    queue, r = config.keys.queue("default"), config.redis()
    raw = next(e for e in r.lrange(queue, 0, -1) if jid.encode() in e)
    r.lrem(queue, 1, raw)
    return bytes(raw)


def test_recovery_files_and_settles_batch_members_on_declared_keys(own_config, log, watched):
    keys, r = own_config.keys, own_config.redis()
    with cogworker.batch(on_complete=bj.callback.s("complete"), on_death=bj.callback.s("death")):
        jid = bj.work.enqueue("j0")
    r.lpush(keys.repeat_orphans, _taken(own_config, jid))  # parked: buried in dead by file_head
    assert recovery.bury_repeat_orphans(own_config) == 1
    with cogworker.batch(on_complete=bj.callback.s("complete2")):
        jid = bj.work.enqueue("j1")
    raw = _taken(own_config, jid)
    r.zadd(keys.dead, {raw: time.time()})  # filed raw: settle_dead tells its batch
    recovery.complete_raw_burials(own_config, [raw])
    with RunningWorker():
        assert wait_for(lambda: fired(log) == ["complete", "complete2", "death"], 20)
    commands = watched()
    assert calls(commands, "file_head") == 2 and calls(commands, "settle_dead") == 2


def test_the_check_sees_a_key_a_script_builds(own_config):
    """The check above reports a key a script touches outside its KEYS (as these scripts
    once built a callback's queue from the namespace)."""
    builds = "redis.call('SET', KEYS[1], '1') redis.call('INCR', ARGV[1] .. 'stats:x') return 1"
    client = own_config.redis()
    monitor = Monitor(client)
    client.eval(builds, 1, "given", "ns:")
    commands = monitor.stop(client)
    assert [line.split(": ", 1)[1] for line in undeclared(client, commands)] == ["INCR ns:stats:x"]
    assert undeclared(client, commands, only=WATCHED) == []  # (not one of the watched scripts)
