"""Public API (docs/architecture.md#contracts), Redis key names (#redis-keys) and the job payload contract."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
from apps import core_jobs
from core_util import RunningWorker, queued, ran, wait_for

import cogworker
from cogworker import config as config_module
from cogworker.client import jobs as jobs_module
from cogworker.keys import Keys

PAYLOAD_FIELDS = {"class", "args", "kwargs", "jid", "queue", "retry", "created_at", "enqueued_at"}


# -- configure() and the environment ---------------------------------------------------


def test_redis_url_from_env_order(monkeypatch):
    monkeypatch.setattr(config_module, "_config", None)
    monkeypatch.setenv("COGWORKER_REDIS_URL", "redis://first.example:1111/1")
    monkeypatch.setenv("REDIS_URL", "redis://second.example:2222/2")
    assert cogworker.get_config().redis_url == "redis://first.example:1111/1"

    monkeypatch.setattr(config_module, "_config", None)
    monkeypatch.delenv("COGWORKER_REDIS_URL")
    assert cogworker.get_config().redis_url == "redis://second.example:2222/2"

    monkeypatch.setattr(config_module, "_config", None)
    monkeypatch.delenv("REDIS_URL")
    assert cogworker.get_config().redis_url == "redis://localhost:6379/0"
    assert cogworker.get_config().namespace == "cogworker"


def test_configure_without_url_uses_env(monkeypatch, redis_server):
    monkeypatch.setattr(config_module, "_config", None)
    monkeypatch.setenv("COGWORKER_REDIS_URL", redis_server.url)
    monkeypatch.setenv("REDIS_URL", "redis://second.example:2222/2")
    cfg = cogworker.configure()
    assert cfg.redis_url == redis_server.url
    assert cogworker.get_config() is cfg
    assert cfg.redis().ping()


def test_configure_rejects_bad_values(config):
    with pytest.raises(cogworker.ConfigurationError, match="unknown setting"):
        cogworker.configure(redis_url=config.redis_url, no_such_setting=1)
    with pytest.raises(cogworker.ConfigurationError, match="invalid Redis URL"):
        cogworker.configure(redis_url="redis://localhost:notaport/0")


def test_namespace_prefixes_every_key(config, redis_server):
    cfg = cogworker.configure(redis_url=redis_server.url, namespace="myapp")
    try:
        r = cfg.redis()
        core_jobs.record.enqueue("ns")
        core_jobs.record.enqueue_in(60, "later")
        assert r.llen("myapp:queue:default") == 1
        assert r.smembers("myapp:queues") == {b"default"}
        assert r.zcard("myapp:schedule") == 1
        with RunningWorker():
            assert wait_for(lambda: ran(r) == ["record:ns"])
        assert r.llen("myapp:queue:default") == 0
        assert not [k for k in r.keys("*") if k.startswith(b"cogworker:")]
    finally:
        cogworker.configure(redis_url=redis_server.url, namespace="cogworker")


# -- Redis key names (docs/architecture.md#redis-keys, a contract) ---------------------


def test_key_names_are_design_section_4():
    k = Keys()
    assert k.queue("default") == "cogworker:queue:default"
    assert k.queues == "cogworker:queues"
    assert k.schedule == "cogworker:schedule"
    assert k.retry == "cogworker:retry"
    assert k.dead == "cogworker:dead"
    assert k.in_progress("h:1:ab") == "cogworker:in_progress:h:1:ab"
    assert k.in_progress_identities == "cogworker:in_progress_identities"
    assert k.processes == "cogworker:processes"
    assert k.process("h:1:ab") == "cogworker:process:h:1:ab"
    assert k.last_beat == "cogworker:last_beat"
    assert k.workers("h:1:ab") == "cogworker:workers:h:1:ab"
    assert k.orphanings("j1") == "cogworker:orphanings:j1"
    assert k.repeat_orphans == "cogworker:repeat_orphans"
    assert k.unsettled == "cogworker:unsettled"
    assert k.stats_processed == "cogworker:stats:processed"
    assert k.stats_failed == "cogworker:stats:failed"
    assert k.unique("d1") == "cogworker:unique:d1"
    assert k.periodic_prefix == "cogworker:periodic:"
    tagged = Keys("{cogworker}")
    assert tagged.queue("x") == "{cogworker}:queue:x" and tagged.dead == "{cogworker}:dead"


def test_keys_have_the_design_types(config):
    """What a run leaves in Redis, with the types docs/architecture.md#redis-keys gives them."""
    r = config.redis()
    k = config.keys
    core_jobs.record.enqueue("a")
    core_jobs.record.enqueue_in(60, "b")
    core_jobs.fail_custom_backoff.enqueue("c")  # -> retry
    core_jobs.fail_no_retry.enqueue("d")  # -> dead
    assert r.type(k.queue("default")) == b"list"
    assert r.type(k.queues) == b"set"
    assert r.type(k.schedule) == b"zset"
    with RunningWorker() as w:
        assert wait_for(lambda: r.zcard(k.retry) == 1 and r.zcard(k.dead) == 1)
        assert r.type(k.in_progress_identities) == b"set"
        assert w.identity.encode() in r.smembers(k.in_progress_identities)
        core_jobs.sleepy.enqueue("e", 0.5)
        assert wait_for(lambda: "start:e" in ran(r))
        assert r.type(k.in_progress(w.identity)) == b"list"
        assert r.type(k.last_beat) == b"hash"
    assert wait_for(lambda: r.get(k.stats_processed) == b"2" and r.get(k.stats_failed) == b"2")
    assert r.type(k.retry) == b"zset" and r.type(k.dead) == b"zset"
    assert r.type(k.stats_processed) == b"string"


# -- @job ------------------------------------------------------------------------------


def test_job_without_arguments_has_defaults():
    assert isinstance(core_jobs.record, cogworker.Job)
    assert core_jobs.record.name == "apps.core_jobs.record"
    assert core_jobs.record.opts.queue == "default"
    assert core_jobs.record.opts.retry == 25
    assert jobs_module.registry["apps.core_jobs.record"] is core_jobs.record


def test_job_with_arguments():
    opts = core_jobs.charge.opts
    assert (opts.queue, opts.retry, opts.timeout, opts.unique_for) == ("critical", 3, 30, 600)
    assert core_jobs.fail_retry_false.opts.retry == 0

    @cogworker.job()
    def empty_parens():
        return "ok"

    assert empty_parens.opts.queue == "default"
    assert empty_parens() == "ok"
    assert empty_parens.name.endswith("test_job_with_arguments.<locals>.empty_parens")


@pytest.mark.parametrize(
    "options, match",
    [
        ({"queeu": "x"}, "queeu"),
        ({"retries": 3}, "retries"),
        ({"retry": -1}, "retry"),
        ({"retry": "3"}, "retry"),
        ({"queue": ""}, "queue"),
        ({"timeout": 0}, "timeout"),
        ({"unique_until": "never"}, "unique_until"),
    ],
)
def test_bad_option_fails_at_decoration(options, match):
    with pytest.raises(cogworker.ConfigurationError, match=match):

        @cogworker.job(**options)
        def never_defined():
            pass


def test_bad_option_fails_in_options():
    with pytest.raises(cogworker.ConfigurationError, match="bogus"):
        core_jobs.record.options(bogus=1)


def test_inline_call_runs_now_and_writes_no_job(config):
    r = config.redis()

    @cogworker.job
    def add(x, y):
        return x + y

    assert add(1, 2) == 3
    assert add(x=2, y=5) == 7
    assert r.keys("cogworker:*") == []


# -- enqueue ---------------------------------------------------------------------------


def test_enqueue_writes_the_payload_contract(config):
    r = config.redis()
    before = time.time()
    jid = core_jobs.record.enqueue("x")
    assert isinstance(jid, str) and len(jid) >= 16
    [payload] = queued(r, config)
    assert PAYLOAD_FIELDS <= set(payload)
    assert payload["class"] == "apps.core_jobs.record"
    assert payload["args"] == ["x"] and payload["kwargs"] == {}
    assert payload["jid"] == jid
    assert payload["queue"] == "default" and payload["retry"] == 25
    assert before <= payload["created_at"] <= time.time()
    assert payload["enqueued_at"] == payload["created_at"]
    assert r.smembers(config.keys.queues) == {b"default"}
    assert core_jobs.record.enqueue("x") != jid  # every job its own jid


def test_enqueue_kwargs_run(config):
    r = config.redis()
    core_jobs.sleepy.enqueue("kw", seconds=0)
    [payload] = queued(r, config)
    assert payload["args"] == ["kw"] and payload["kwargs"] == {"seconds": 0}
    with RunningWorker():
        assert wait_for(lambda: ran(r) == ["start:kw", "done:kw"])


def test_fifo_order(config):
    r = config.redis()
    for i in range(5):
        core_jobs.record.enqueue(i)
    with RunningWorker():
        assert wait_for(lambda: len(ran(r)) == 5)
    assert ran(r) == [f"record:{i}" for i in range(5)]


def test_enqueue_in_and_enqueue_at(config):
    r = config.redis()
    k = config.keys
    now = time.time()
    a = core_jobs.record.enqueue_in(30, "in")
    b = core_jobs.record.enqueue_at(now + 100, "at-epoch")
    c = core_jobs.record.enqueue_at(datetime.now(UTC) + timedelta(seconds=200), "at-dt")
    scores = {json.loads(raw)["jid"]: score for raw, score in r.zrange(k.schedule, 0, -1, withscores=True)}
    assert set(scores) == {a, b, c}
    assert now + 30 <= scores[a] <= time.time() + 30
    assert scores[b] == pytest.approx(now + 100)
    assert now + 199 <= scores[c] <= time.time() + 201
    assert r.llen(k.queue("default")) == 0
    # Due already: straight onto the queue.
    d = core_jobs.record.enqueue_at(now - 5, "past")
    assert [p["jid"] for p in queued(r, config)] == [d]
    with pytest.raises(ValueError, match="timezone"):
        core_jobs.record.enqueue_at(datetime.now(), "naive")
    with pytest.raises(TypeError):
        core_jobs.record.enqueue_in("soon", "x")


def test_options_override_per_call(config):
    r = config.redis()
    jid = core_jobs.record.options(queue="low", retry=0).enqueue("o")
    [payload] = queued(r, config, "low")
    assert payload["jid"] == jid and payload["retry"] == 0 and payload["queue"] == "low"
    core_jobs.record.options(retry=False).enqueue("f")
    assert queued(r, config)[0]["retry"] == 0
    assert r.smembers(config.keys.queues) == {b"low", b"default"}
    assert core_jobs.record.opts.queue == "default"  # the job itself unchanged
    core_jobs.record.options(queue="low").enqueue_in(10, "later")
    assert json.loads(r.zrange(config.keys.schedule, 0, 0)[0])["queue"] == "low"


def test_enqueue_many_is_one_pipeline(config, monkeypatch):
    r = config.redis()
    direct: list[tuple] = []
    executes = []
    real_execute_command = redis.Redis.execute_command
    real_pipe_execute = redis.client.Pipeline.execute

    def spy_command(self, *args, **kwargs):
        direct.append(args)
        return real_execute_command(self, *args, **kwargs)

    def spy_execute(self, *args, **kwargs):
        executes.append(len(self.command_stack))
        return real_pipe_execute(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "execute_command", spy_command)
    monkeypatch.setattr(redis.client.Pipeline, "execute", spy_execute)
    jids = core_jobs.sleepy.enqueue_many([("a", 0), (("b",), {"seconds": 0}), ["c", 0]] + [(i, 0) for i in range(97)])
    monkeypatch.undo()
    assert len(jids) == 100 and len(set(jids)) == 100 and all(isinstance(j, str) for j in jids)
    assert direct == [] and len(executes) == 1
    stored = queued(r, config)[::-1]  # LPUSH: oldest at the right
    assert [p["jid"] for p in stored] == jids
    assert stored[1]["args"] == ["b"] and stored[1]["kwargs"] == {"seconds": 0}
    assert stored[2]["args"] == ["c", 0]


def test_enqueue_by_name(config):
    r = config.redis()
    # A name this process never imported: the defaults apply.
    jid = cogworker.enqueue("some.other_app.jobs.send_mail", "to@example.com", subject="hi")
    [payload] = queued(r, config)
    assert payload["class"] == "some.other_app.jobs.send_mail" and payload["jid"] == jid
    assert payload["args"] == ["to@example.com"] and payload["kwargs"] == {"subject": "hi"}
    assert payload["queue"] == "default" and payload["retry"] == 25
    # A registered one: its options apply.
    cogworker.enqueue("apps.core_jobs.fail_no_retry", "n")
    assert queued(r, config)[0]["retry"] == 0
    # And the worker runs a job enqueued by name.
    r.delete(config.keys.queue("default"))
    cogworker.enqueue("apps.core_jobs.record", "byname")
    with RunningWorker():
        assert wait_for(lambda: ran(r) == ["record:byname"])
    with pytest.raises(TypeError):
        cogworker.enqueue("", 1)


class Opaque:
    pass


@pytest.mark.parametrize("bad", [Opaque(), {1, 2}, b"bytes", math.nan, datetime.now(UTC), {"nested": [object()]}])
def test_non_json_arguments_raise_and_write_nothing(config, bad):
    r = config.redis()
    calls = [
        lambda: core_jobs.record.enqueue(bad),
        lambda: core_jobs.sleepy.enqueue("t", seconds=bad),
        lambda: core_jobs.record.enqueue_in(10, bad),
        lambda: core_jobs.record.enqueue_at(time.time() + 10, bad),
        lambda: core_jobs.record.options(queue="low").enqueue(bad),
        lambda: core_jobs.record.enqueue_many([("fine",), (bad,), ("fine too",)]),
        lambda: cogworker.enqueue("apps.core_jobs.record", bad),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="JSON"):
            call()
    assert r.dbsize() == 0


def test_enqueue_at_by_name_and_empty_bulk(config):
    r = config.redis()
    at = time.time() + 50
    jid = cogworker.enqueue_at("some.app.jobs.later", at, 1, x=2)
    [(raw, score)] = r.zrange(config.keys.schedule, 0, -1, withscores=True)
    payload = json.loads(raw)
    assert payload["jid"] == jid and payload["class"] == "some.app.jobs.later"
    assert payload["args"] == [1] and payload["kwargs"] == {"x": 2}
    assert score == pytest.approx(at)
    assert core_jobs.record.enqueue_many([]) == []
    with pytest.raises(TypeError):
        core_jobs.record.enqueue_many([object()])
