"""Bad payload fields (docs/architecture.md#payload): a job whose workflow or other fields a
worker can't read is filed in dead once, with its real error, its body never run, and the
worker (the single-process runner, or a prefork master's children) lives on and runs the
next good job. A forged member of a finished batch or group changes nothing there."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from apps import batchjobs as bj
from apps.pf_faults import events
from core_util import RunningWorker, wait_for
from prefork_harness import in_progress_total, lrange
from prefork_harness import wait_for as wait_until
from worker_process import Process

import cogworker
from cogworker import api
from cogworker.core.fate import parse_payload

INF = "1e400"  # what JSON text can say that Python's decoder reads as inf

# (what a payload's wf or fields say, as JSON text spliced in; what the error says)
BAD = [
    ('"wf": {"g": "g-x", "i": "abc"}', "'wf.i' must be a whole number"),
    ('"wf": {"g": "g-x", "i": ' + INF + "}", "'wf.i' must be a whole number"),
    ('"wf": {"ttl": Infinity}', "'wf.ttl' must be a number of seconds"),
    ('"wf": {"ttl": NaN}', "'wf.ttl' must be a number of seconds"),
    ('"wf": {"chain": [5]}', "'wf.chain[0]' must be an object"),
    ('"wf": {"chain": [{}]}', "'wf.chain[0].class' must be a non-empty string"),
    ('"wf": {"b": 5}', "'wf.b' must be a non-empty string"),
    ('"wf": {"lttl": -1, "chain": []}', "'wf.lttl' must be a number of seconds"),
    ('"wf": ["x"]', "'wf' must be an object"),
    ('"timeout": ' + INF, "'timeout' must be a number of seconds"),
    ('"retry": ' + INF, "'retry' must be a whole number"),
    ('"retry_count": "x"', "'retry_count' must be a whole number"),
    ('"unique_for": NaN, "unique_digest": "d"', "'unique_for' must be a number of seconds"),
    ('"enqueued_at": ' + INF, "'enqueued_at' must be a time"),
    ('"kwargs": [1]', "'kwargs' must be an object"),
]


def raw_job(
    jid: str, tag: Any, extra: str, job: str = "apps.pf.record", retry: int = 25, args: list[Any] | None = None
) -> bytes:
    head = json.dumps(
        {
            "class": job,
            "args": [tag] if args is None else args,
            "jid": jid,
            "queue": "default",
            "created_at": time.time(),
            "retry": retry,
        }
    )
    return (head[:-1] + ", " + extra + "}").encode()


@pytest.mark.parametrize("extra, why", BAD)
def test_parse_payload_names_the_bad_field(extra, why):
    got, said = parse_payload(raw_job("j1", "t", extra))
    assert got is None and said.startswith("bad payload: ") and why in said, said


@pytest.mark.parametrize(
    "extra",
    [
        '"wf": {"ttl": 3600}',
        '"wf": {"g": "g-1", "i": 0, "b": "b-1", "ttl": 60}',
        '"wf": {"chain": [{"class": "a.b", "jid": "x", "args": [], "kwargs": {}, "queue": "q", "retry": 3, '
        '"timeout": 5, "imm": true, "ttl": 60}], "last": "x", "lttl": 3600}',
        '"retry": false, "retry_count": 3, "timeout": 0.5, "unique_for": 60, "unique_until": "start", '
        '"unique_digest": "ab", "iter_done": 7, "iter_cursor": {"k": [1]}, "at": 1.5, "enqueued_at": 2',
        '"args": null, "kwargs": null, "wf": null, "timeout": null',
    ],
)
def test_parse_payload_takes_good_fields(extra):
    got, said = parse_payload(raw_job("j1", "t", extra))
    assert got is not None and said == ""


def test_a_field_longer_than_ten_years_is_refused_at_enqueue_too():
    from cogworker.core import fields, payload

    with pytest.raises(cogworker.ConfigurationError, match="at most"):
        payload.JobOptions.build(timeout=fields.MAX_SECONDS + 1)
    payload.JobOptions.build(timeout=fields.MAX_SECONDS)


def _push_bad_then_good(r: Any, queue_key: str) -> list[str]:
    jids = []
    for n, (extra, _) in enumerate(BAD):
        jid = f"bad{n:02d}" + "0" * 19
        r.lpush(queue_key, raw_job(jid, f"bad{n}", extra))
        jids.append(jid)
    return jids


def _check_dead(r: Any, config: Any, jids: list[str]) -> None:
    dead = [json.loads(raw) for raw in r.zrange(config.keys.dead, 0, -1)]
    assert sorted(e["jid"] for e in dead) == sorted(jids)  # each once
    for entry in dead:
        n = int(entry["jid"][3:5])
        assert entry["error_class"] == "cogworker.BadPayload"
        assert entry["error_message"].startswith("bad payload: ") and BAD[n][1] in entry["error_message"]
    assert not [t for t in lrange(config, "test:ran") if t.startswith("bad")]  # no body ran


def test_single_process_runner_files_each_bad_job_once_and_lives_on(own_config):
    r = own_config.redis()
    jids = _push_bad_then_good(r, own_config.keys.queue("default"))
    worker = Process("cogworker.worker", "apps.pf", "--no-cron", url=own_config.redis_url)
    try:
        wait_until(lambda: r.zcard(own_config.keys.dead) >= len(BAD), 30, what="bad jobs in dead")
        from apps import pf

        pf.record.enqueue("good")
        wait_until(lambda: lrange(own_config, "test:ran") == ["good"], 30, what="the good job")
        assert worker.proc.poll() is None, worker.output()  # alive
        _check_dead(r, own_config, jids)
        assert in_progress_total(own_config) == 0
    finally:
        assert worker.stop() == 0


def test_prefork_files_each_bad_job_once_and_no_child_dies(own_config, masters):
    r = own_config.redis()
    m = masters(procs=2)
    children = m.wait_children()
    jids = _push_bad_then_good(r, own_config.keys.queue("default"))
    wait_until(lambda: r.zcard(own_config.keys.dead) >= len(BAD), 30, what="bad jobs in dead")
    from apps import pf

    pf.record.enqueue("good")
    wait_until(lambda: lrange(own_config, "test:ran") == ["good"], 30, what="the good job")
    _check_dead(r, own_config, jids)
    assert m.alive() and m.child_pids() == children  # no child was killed by a bad job
    assert in_progress_total(own_config) == 0
    assert "ProcessDied" not in m.output()


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = str(tmp_path / "runs.log")
    monkeypatch.setenv("PF_LOG", path)
    return path


def _fired(path: str) -> list[str]:
    return sorted(tag.split("@")[0] for event, tag, _, _ in events(path) if event == "cb-start")


def test_a_forged_member_of_a_finished_batch_fires_nothing(config, log):
    r = config.redis()
    with cogworker.batch(
        on_success=bj.callback.s("success"), on_complete=bj.callback.s("complete"), on_death=bj.callback.s("death")
    ) as b:
        bj.work.enqueue("j1")
    with RunningWorker():
        wait_for(lambda: len(_fired(log)) == 2, 20)
        assert _fired(log) == ["complete", "success"]
        # A job that names the batch but never joined it, dying in it.
        forged = raw_job("f" * 24, "forged", f'"wf": {{"b": "{b.bid}"}}', job="apps.batchjobs.doomed", retry=0)
        r.lpush(config.keys.queue("default"), forged)
        assert wait_for(lambda: r.zcard(config.keys.dead) == 1, 20)
        time.sleep(1.0)  # a callback pushed now would have run by then
    assert _fired(log) == ["complete", "success"]  # no on_death after on_success
    info = api.batch(b.bid)
    assert (info.total, info.succeeded, info.dead) == (1, 1, 0)
    assert info.callbacks["on_death"]["fired_at"] is None


@pytest.mark.parametrize(
    "job, args, retry",
    [("apps.wf.add", [5, 5], 25), ("apps.wf.boom", [1], 0)],
    ids=["succeeding", "dying"],
)
def test_a_forged_group_index_neither_fires_nor_fails_a_chord(config, job, args, retry):
    r = config.redis()
    from apps import wf

    chord = cogworker.chord([wf.add.s(1, 2), wf.add.s(3, 4)], wf.total.s())
    cid = chord.enqueue()
    # Before its members run (RPUSH: the end a worker takes from): a forged member 7.
    forged = raw_job("g" * 24, "", f'"wf": {{"g": "{chord.group_id}", "i": 7}}', job=job, args=args, retry=retry)
    r.rpush(config.keys.queue("default"), forged)
    with RunningWorker():
        assert cogworker.result(cid, timeout=20) == 10
    assert [x.decode() for x in r.lrange("test:total", 0, -1)] == ["[3, 7]"]  # fired once, after both
    assert r.hget(config.keys.group(chord.group_id), "failed") is None
