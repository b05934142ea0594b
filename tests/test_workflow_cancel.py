"""A cancelled job of a group, chord or chain settles its workflow as a dead one does
(cancel.lua, _workflow.lua's wf_cancelled): the group fails, the chord's callback never
fires, and the results raise JobFailed naming cogworker.Cancelled, at once, not after a
timeout. A single-process worker in a thread runs the rest."""

from __future__ import annotations

import json
import time

import pytest
from apps import wf
from core_util import RunningWorker, wait_for

import cogworker
from cogworker import api


def _member_jid(config, index: int) -> str:
    for raw in config.redis().lrange(config.keys.queue("default"), 0, -1):
        payload = json.loads(raw)
        if payload.get("wf", {}).get("i") == index:
            return str(payload["jid"])
    raise AssertionError(f"member {index} not queued")


def test_a_cancelled_queued_member_fails_its_chord(config):
    chord = cogworker.chord(cogworker.group(wf.member.s(i) for i in range(3)), wf.total.s())
    cid = chord.enqueue()
    jid = _member_jid(config, 1)
    assert api.cancel(jid)
    with pytest.raises(cogworker.JobFailed) as caught:
        cogworker.result(chord.group_id, timeout=0)
    assert (caught.value.jid, caught.value.error_class) == (jid, "cogworker.Cancelled")
    with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
        cogworker.result(cid, timeout=0)
    with RunningWorker():
        wait_for(lambda: config.redis().llen(config.keys.queue("default")) == 0, 20)
        time.sleep(0.5)
    assert config.redis().lrange("test:total", 0, -1) == []  # the callback never fired
    assert api.result(chord.group_id).state == "dead"


def test_a_cancelled_running_member_fails_its_group(config):
    gid = cogworker.group([wf.member.s(0), wf.member.s(1, 1.5)]).enqueue()
    jid = _member_jid(config, 1)
    with RunningWorker():
        wait_for(lambda: any(line.startswith(b"start|1|") for line in config.redis().lrange("test:log", 0, -1)), 20)
        assert api.cancel(jid)
        with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
            cogworker.result(gid, timeout=5)
        wait_for(lambda: any(line.startswith(b"end|1|") for line in config.redis().lrange("test:log", 0, -1)), 20)
    with pytest.raises(cogworker.JobFailed):
        cogworker.result(gid, timeout=0)  # its end changed nothing


def test_a_cancelled_step_ends_its_chain_with_job_failed(config):
    cid = cogworker.chain(wf.add.s(1, 2), wf.add.s(10)).enqueue()
    [raw] = config.redis().lrange(config.keys.queue("default"), 0, -1)
    assert api.cancel(json.loads(raw)["jid"])
    with pytest.raises(cogworker.JobFailed, match="cogworker.Cancelled"):
        cogworker.result(cid, timeout=0)
