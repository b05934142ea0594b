"""Lifecycle hooks (cogworker.hooks): subscribe/unsubscribe, each event once with its
fields, a raising hook logged and never changing the job's fate."""

from __future__ import annotations

import json
import logging

import pytest
from apps import core_jobs
from core_util import ran

from cogworker.core import hooks
from cogworker.engine.loop import Worker


@pytest.fixture
def seen():
    events: list[hooks.JobEvent] = []

    def record(event: hooks.JobEvent) -> None:
        events.append(event)

    hooks.subscribe(hooks.EVENTS, record)
    yield events
    hooks.unsubscribe(hooks.EVENTS, record)


def _one(worker: Worker) -> None:
    work = worker.fetcher.fetch()
    assert work is not None
    worker.process(work)


def test_success_fires_enqueued_started_succeeded_once(config, seen):
    jid = core_jobs.record.enqueue("a")
    w = Worker([("default", None)], identity="h1", block_timeout=0)
    _one(w)
    assert [(e.name, e.payload["jid"]) for e in seen] == [("enqueued", jid), ("started", jid), ("succeeded", jid)]
    assert seen[0].queue == "default" and seen[1].identity == "h1"
    assert seen[2].duration is not None and seen[2].duration >= 0


def test_failure_fires_retrying_then_dead_with_reason_and_error(config, seen):
    jid = core_jobs.fail_always.enqueue("x")  # retry=2, no backoff
    w = Worker([("default", None)], identity="h2", block_timeout=0)
    _one(w)
    retrying = [e for e in seen if e.name == "retrying"]
    assert len(retrying) == 1 and retrying[0].payload["jid"] == jid
    assert retrying[0].error is not None and retrying[0].error_class and retrying[0].delay == 0
    assert retrying[0].payload["retry_count"] == 1
    r = config.redis()
    [entry] = r.zrange(config.keys.retry, 0, -1)
    r.delete(config.keys.retry)
    payload = json.loads(entry)
    payload["retry_count"] = 2
    r.lpush(config.keys.queue("default"), json.dumps(payload))
    _one(w)
    [dead] = [e for e in seen if e.name == "dead"]
    assert dead.reason == "failed" and dead.payload["jid"] == jid


def test_given_back_fires_once_and_only_after_the_write(config, seen):
    core_jobs.record.enqueue("b")
    w = Worker([("default", None)], identity="h3", block_timeout=0)
    work = w.fetcher.fetch()
    w.stop()
    w.process(work)
    assert [e.name for e in seen] == ["enqueued", "given_back"]
    assert config.redis().llen(config.keys.queue("default")) == 1


def test_a_raising_hook_is_logged_and_the_fate_is_unchanged(config, caplog):
    def boom(event: hooks.JobEvent) -> None:
        raise RuntimeError("hook broke")

    hooks.subscribe(["started", "succeeded", "enqueued"], boom)
    try:
        core_jobs.record.enqueue("c")
        w = Worker([("default", None)], identity="h4", block_timeout=0)
        with caplog.at_level(logging.ERROR, logger="cogworker"):
            _one(w)
            w.finish()
    finally:
        hooks.unsubscribe(["started", "succeeded", "enqueued"], boom)
    r = config.redis()
    assert ran(r) == ["record:c"]
    assert r.llen(config.keys.in_progress("h4")) == 0 and r.zcard(config.keys.dead) == 0
    assert r.zcard(config.keys.retry) == 0
    assert "hook broke" in caplog.text


def test_subscribe_as_decorator_unsubscribe_and_unknown_event():
    @hooks.subscribe("dead")
    def on_dead(event: hooks.JobEvent) -> None:
        pass

    assert hooks.wanted("dead")
    hooks.unsubscribe("dead", on_dead)
    with pytest.raises(ValueError):
        hooks.subscribe("finished", on_dead)


def _list(config, identity: str, *payloads: dict) -> list[bytes]:
    """``payloads`` left on ``identity``'s in-progress list (newest first, as a fetch leaves them)."""
    raws = [json.dumps(p).encode() for p in payloads]
    config.redis().rpush(config.keys.in_progress(identity), *raws)
    return raws


def _orphaned(seen) -> list[tuple[str, bool | None, str | None]]:
    return [(e.payload.get("jid"), e.counted, e.identity) for e in seen if e.name == "orphaned"]


def test_orphaned_fires_once_per_job_requeued_from_a_dead_process(config, seen):
    from cogworker.fleet.recovery import requeue_dead

    _list(config, "gone:1:a", {"class": "x.y", "jid": "j1", "queue": "low"}, {"class": "x.y", "jid": "j2"})
    assert requeue_dead(config, "gone:1:a", "none") == (2, True)
    assert sorted(_orphaned(seen)) == [("j1", True, "gone:1:a"), ("j2", True, "gone:1:a")]
    assert {e.queue for e in seen if e.name == "orphaned"} == {"low", "default"}
    assert [e.name for e in seen] == ["orphaned", "orphaned"]  # nothing else: they were requeued


def test_orphaned_for_a_reaped_child_counted_for_its_running_job_only(config, seen):
    from cogworker.fleet.recovery import requeue_in_progress

    finished, _, _ = _list(
        config,
        "child:2:b",
        {"class": "x.y", "jid": "done"},
        {"class": "x.y", "jid": "ran"},
        {"class": "x.y", "jid": "ahead"},
    )
    assert requeue_in_progress(config, "child:2:b", fence=True, count_orphanings="ran", drop=[finished]) == 2
    assert sorted(_orphaned(seen)) == [("ahead", False, "child:2:b"), ("ran", True, "child:2:b")]


def test_a_stopping_process_requeueing_its_own_list_fires_no_orphaned(config, seen):
    from cogworker.fleet.recovery import requeue_in_progress

    _list(config, "me:3:c", {"class": "x.y", "jid": "mine"})
    assert requeue_in_progress(config, "me:3:c") == 1
    assert _orphaned(seen) == []


def test_a_repeat_orphan_fires_orphaned_then_dead_when_buried(config, seen):
    from cogworker.fleet.recovery import bury_repeat_orphans, requeue_dead

    config.redis().set(config.keys.orphanings("often"), config.max_orphanings)
    _list(config, "gone:4:d", {"class": "x.y", "jid": "often"})
    assert requeue_dead(config, "gone:4:d", "none") == (1, True)
    assert bury_repeat_orphans(config) == 1
    assert [(e.name, e.payload.get("jid")) for e in seen] == [("orphaned", "often"), ("dead", "often")]
    assert seen[0].counted is True and seen[1].reason == "process_died"


def test_a_filtered_hook_sees_only_the_jobs_it_wants_and_no_event_is_built_otherwise(monkeypatch):
    from cogworker.core import hooks

    seen: list[str] = []
    built: list[str] = []
    real = hooks.JobEvent

    def counting(*args, **kwargs):
        built.append(args[0])
        return real(*args, **kwargs)

    def hook(event):
        seen.append(event.payload["jid"])

    monkeypatch.setattr(hooks, "JobEvent", counting)
    monkeypatch.setitem(hooks._subscribers, "given_back", [])
    hooks.subscribe("given_back", hook, when=lambda payload: payload.get("unique_digest"))
    hooks.fire("given_back", {"jid": "plain"})
    hooks.fire("given_back", {"jid": "unique", "unique_digest": "d"})
    assert seen == ["unique"] and built == ["given_back"]
    assert not hooks.wanted("given_back", {"jid": "plain"}) and hooks.wanted("given_back", {"unique_digest": "d"})
    hooks.unsubscribe("given_back", hook)
    assert not hooks.wanted("given_back")
