"""Known-empty queues (cogworker/emptyqueues.py, docs/architecture.md#idle-queues): a
worker of many queues leaves out of its fetch the queues it found empty, so an idle queue
costs its fetch nothing. Each test tries to make a job wait behind a lower queue's because
its queue was left out: a push by every cogworker path that fills a queue, a raw LPUSH, a
hand resume, a stale fetch carrying an ack or a guessed move, a wake stream of the wrong
type; and a random run against a model of strict order."""

from __future__ import annotations

import json
import random
import time

import pytest
import redis
from apps import core_jobs

from cogworker import api
from cogworker.client import enqueue as client
from cogworker.engine.fetch import fetcher as fetch
from cogworker.engine.fetch import idle as emptyqueues
from cogworker.engine.fetch.fetcher import MARK, Fetcher
from cogworker.fleet.poller import Poller

N = 100
ME = "host:1:idle"


def names(n=N):
    return [f"q{i}" for i in range(1, n + 1)]


@pytest.fixture(autouse=True)
def no_rescan(monkeypatch):
    """Left out until a wake (the rescan, every RESCAN, would hide a missing one)."""
    monkeypatch.setattr(emptyqueues, "RESCAN", 60.0)


def fetcher(config, queues=None, identity=ME):
    return Fetcher(config, identity, [(q, None) for q in queues or names()], block_timeout=0)


def push(queue, arg):
    core_jobs.record.options(queue=queue).enqueue(arg)


def raw_push(config, queue, arg):
    """As a client outside cogworker: a bare LPUSH, no wake."""
    config.redis().lpush(
        config.keys.queue(queue),
        json.dumps({"class": "apps.core_jobs.record", "args": [arg], "kwargs": {}, "jid": arg[0] * 24, "queue": queue}),
    )


def arg_of(work):
    return json.loads(work.raw)["args"][0]


def calls(r, command):
    return r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0)


def busy_on_last(config, jobs=3, n=N, named=None):
    """A fetcher that took a job of q<n>, the only queue with jobs (but ``named``, paused):
    the others are left out."""
    for i in range(jobs):
        push(f"q{n}", f"low{i}")
    f = fetcher(config, names(n))
    work = f.fetch()
    assert arg_of(work) == "low0"
    assert f.plan() == ([*(named or []), f"q{n}"], f.empty.at, False) and f.empty.at
    return f, work


def test_idle_queues_are_not_named_while_the_last_one_is_busy(config):
    r = config.redis()
    f, work = busy_on_last(config, jobs=60)
    r.config_resetstat()
    for i in range(1, 60):
        work = f.fetch(ack=work.raw)
        assert arg_of(work) == f"low{i}"
    # Only q100 named: its LMOVE, never an LMPOP over the 99 idle queues; one wake check each.
    assert calls(r, "lmpop") == 0 and calls(r, "lmove") == 59 and calls(r, "xrevrange") == 59
    assert r.llen(config.keys.in_progress(ME)) == 1


def test_queues_after_a_busy_first_one_are_not_named(config):
    """Cut after the queue that gave the last job; when it runs dry, that fetch is not dry:
    the next names every queue, and strict order goes on."""
    r = config.redis()
    for i in range(30):
        push("q1", f"first{i}")
    push("q100", "last")
    f = fetcher(config)
    work = f.fetch()
    assert f.plan() == (["q1"], emptyqueues.EVERY, True)
    r.config_resetstat()
    for i in range(1, 30):
        work = f.fetch(ack=work.raw)
        assert arg_of(work) == f"first{i}"
    assert calls(r, "lmpop") == 0 and calls(r, "xrevrange") == 0  # q1's LMOVE alone, each time
    work = f.fetch(ack=work.raw)  # q1 dry: cut short, nothing; again, every queue named
    assert (work.queue, arg_of(work)) == ("q100", "last")
    assert f.fetch(ack=work.raw) is None
    assert r.llen(config.keys.in_progress(ME)) == 0


def test_a_lookahead_cut_short_leaves_the_lower_queues_to_the_next_fetch(config):
    for i in range(5):
        push("q1", f"first{i}")
    for i in range(5):
        push("q100", f"last{i}")
    f = fetcher(config)
    got = [arg_of(f.fetch())]
    while len(got) < 10:
        ahead = f.send_ahead(len(got), None, None, 4)
        works = f.read_ahead_all(ahead)
        got += [arg_of(w) for w in works] or [arg_of(f.fetch())]
    assert got == [f"first{i}" for i in range(5)] + [f"last{i}" for i in range(5)]


# Each fill runs up to its yield before the fetcher finds q50 empty, and the rest after.
def _enqueue(config):
    yield
    push("q50", "high")


def _enqueue_backlogged(config):
    """The client's plain LPUSH (it saw q50 backlogged before) finds q50 empty: it wakes."""
    key = config.keys.queue("q50")
    yield
    client._backlogged.add(key)
    push("q50", "high")
    assert key not in client._backlogged


def _enqueue_many(config):
    yield
    core_jobs.record.options(queue="q50").enqueue_many([("high",)])


def _scheduled(config):
    core_jobs.record.options(queue="q50").enqueue_in(0.3, "high")
    yield
    time.sleep(0.35)
    assert Poller(config).poll() == 1


def _given_back(config):
    other = fetcher(config, ["q50"], identity="host:2:other")
    push("q50", "high")
    work = other.fetch()
    yield
    assert other.give_back(work.raw)


def _dead_retried(config):
    yield
    raw = json.dumps(
        {
            "class": "apps.core_jobs.record",
            "args": ["high"],
            "kwargs": {},
            "jid": "d" * 24,
            "queue": "q50",
            "retry": 0,
            "created_at": 1.0,
            "enqueued_at": 1.0,
        }
    )
    config.redis().zadd(config.keys.dead, {raw: time.time()})
    assert api.DeadSet(config).retry_all() == 1


@pytest.mark.parametrize("fill", [_enqueue, _enqueue_backlogged, _enqueue_many, _scheduled, _given_back, _dead_retried])
def test_a_job_put_on_a_left_out_queue_by_cogworker_runs_first(config, fill):
    steps = fill(config)
    next(steps)
    f, work = busy_on_last(config)
    next(steps, None)
    got = f.fetch(ack=work.raw)
    assert (got.queue, arg_of(got)) == ("q50", "high")
    assert config.redis().lrange(config.keys.in_progress(ME), 0, -1) == [got.raw]  # the ack landed


def test_a_stale_fetch_takes_nothing_and_the_next_names_every_queue(config):
    r = config.redis()
    f, work = busy_on_last(config)
    push("q50", "high")
    r.config_resetstat()
    got = f.fetch(ack=work.raw)
    assert arg_of(got) == "high"
    assert calls(r, "evalsha") == 2  # the stale fetch (its ack landed), then every queue named
    assert r.llen(config.keys.queue("q100")) == 2  # the stale one moved nothing
    assert f.plan()[1] == emptyqueues.EVERY or "q50" in f.plan()[0]


def test_the_fast_fetch_gone_stale_puts_its_guessed_job_back(config, monkeypatch):
    monkeypatch.setattr(fetch, "FAST_MIN_BYTES", 0)  # the fast fetch after any job
    r = config.redis()
    f, work = busy_on_last(config)
    push("q50", "high")
    got = f.fetch(ack=work.raw)  # the guess, q100's next job, was moved and moved back
    assert arg_of(got) == "high"
    assert [arg_of(fetch.Work(raw, "")) for raw in reversed(r.lrange(config.keys.queue("q100"), 0, -1))] == [
        "low1",
        "low2",
    ]
    assert r.lrange(config.keys.in_progress(ME), 0, -1) == [got.raw]
    assert MARK not in r.lrange(config.keys.in_progress(ME), 0, -1)


def test_a_raw_lpush_to_a_left_out_queue_waits_at_most_the_rescan(config, monkeypatch):
    """The bound for writers outside cogworker, which don't wake the stream."""
    monkeypatch.setattr(emptyqueues, "RESCAN", 0.3)
    f, work = busy_on_last(config, jobs=5)
    raw_push(config, "q50", "raw")
    work = f.fetch(ack=work.raw)
    assert arg_of(work) == "low1"  # left out, within the bound
    time.sleep(0.35)
    got = f.fetch(ack=work.raw)
    assert (got.queue, arg_of(got)) == ("q50", "raw")


def test_a_hand_resume_counts_at_the_next_fetch(config):
    """A paused queue is never counted empty: SREM by hand wakes nobody."""
    r = config.redis()
    push("q1", "paused-job")
    r.sadd(config.keys.paused, "q1")
    f, work = busy_on_last(config, named=["q1"])
    r.srem(config.keys.paused, "q1")
    got = f.fetch(ack=work.raw)
    assert arg_of(got) == "paused-job"


def test_a_pause_then_resume_through_the_api(config):
    r = config.redis()
    f, work = busy_on_last(config)
    api.Queue("q50", config).pause()
    push("q50", "high")  # a wake, but q50 is paused: q100 goes on
    work = f.fetch(ack=work.raw)
    assert arg_of(work) == "low1"
    api.Queue("q50", config).resume()
    got = f.fetch(ack=work.raw)
    assert arg_of(got) == "high" and r.llen(config.keys.queue("q50")) == 0


def test_a_wake_stream_of_the_wrong_type_leaves_nothing_out(config):
    r = config.redis()
    r.set(config.keys.wake, "not a stream")
    for i in range(3):
        push("q100", f"low{i}")
    f = fetcher(config)
    work = f.fetch()
    assert f.plan()[0] == names()
    raw_push(config, "q50", "raw")
    assert arg_of(f.fetch(ack=work.raw)) == "raw"  # strict, as before the stream broke


def test_a_redis_restarted_empty_makes_the_next_fetch_name_every_queue(own_config, own_redis):
    """The wake ID the left-out queues were empty at is gone with the stream: the first
    fetch after the restart is stale, so jobs written there (even without a wake) are
    taken in strict order; nothing the restart left is lost."""
    f, work = busy_on_last(own_config)
    own_redis.kill()  # SIGKILL: the stream, the queues and the scripts go with it
    own_redis.restart()
    raw_push(own_config, "q100", "low-after")
    raw_push(own_config, "q50", "high-after")
    got = None
    for _ in range(3):  # the first call may meet the dead connection
        try:
            got = f.fetch(ack=work.raw)
            break
        except redis.ConnectionError:
            continue
    assert (got.queue, arg_of(got)) == ("q50", "high-after")
    assert arg_of(f.fetch(ack=got.raw)) == "low-after"


def test_a_wake_stream_deleted_by_hand_makes_the_next_fetch_name_every_queue(config):
    r = config.redis()
    f, work = busy_on_last(config)
    r.delete(config.keys.wake)
    raw_push(config, "q50", "high")
    got = f.fetch(ack=work.raw)
    assert (got.queue, arg_of(got)) == ("q50", "high")


def test_a_paused_set_of_the_wrong_type_pauses_nothing_and_loses_nothing(config):
    r = config.redis()
    r.set(config.keys.paused, "garbage")
    f, work = busy_on_last(config)
    push("q50", "high")
    got = f.fetch(ack=work.raw)
    assert (got.queue, arg_of(got)) == ("q50", "high")
    got = f.fetch(ack=got.raw)
    assert arg_of(got) == "low1"


def test_one_queue_reads_no_wake_stream(config):
    r = config.redis()
    for i in range(20):
        push("default", f"j{i}")
    f = fetcher(config, ["default"])
    r.config_resetstat()
    work = f.fetch()
    for _ in range(19):
        work = f.fetch(ack=work.raw)
    assert calls(r, "xrevrange") == 0


def test_weighted_queues_drain_every_job_once(config):
    queues = names(20)
    pushed = [(random.choice(queues), f"j{i}") for i in range(200)]
    for q, arg in pushed:
        push(q, arg)
    f = Fetcher(config, ME, [(q, 1 + i % 3) for i, q in enumerate(queues)], block_timeout=0)
    got, work = [], f.fetch()
    while work is not None:
        got.append((work.queue, arg_of(work)))
        if len(got) % 7 == 0:  # more arrive on queues found empty
            q = random.choice(queues)
            push(q, f"late{len(got)}")
            pushed.append((q, f"late{len(got)}"))
        work = f.fetch(ack=work.raw)
    assert sorted(got) == sorted(pushed)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_strict_order_against_a_model(config, seed):
    """Random pushes (cogworker's paths), pauses and resumes (the API), and fetches: each
    fetch takes what a fetch naming every queue would (the model), never a lower queue's job."""
    rnd = random.Random(seed)
    queues = names(12)
    model: dict[str, list[str]] = {q: [] for q in queues}
    paused: set[str] = set()
    f, work, n = fetcher(config, queues), None, 0
    for _ in range(400):
        op = rnd.random()
        if op < 0.45:
            q, n = rnd.choice(queues), n + 1
            push(q, f"{q}-{n}")
            model[q].append(f"{q}-{n}")
        elif op < 0.5:
            q = rnd.choice(queues)
            (api.Queue(q, config).resume if q in paused else api.Queue(q, config).pause)()
            paused.symmetric_difference_update({q})
        else:
            work = f.fetch(ack=work.raw if work else None)
            expected = next((q for q in queues if model[q] and q not in paused), None)
            if expected is None:
                assert work is None
            else:
                assert (work.queue, arg_of(work)) == (expected, model[expected].pop(0))


def test_prefork_children_of_many_queues_run_every_job_once_and_a_new_high_one_soon(
    own_config, masters, tmp_path, monkeypatch
):
    """Real children of 30 queues, busy on the last: every job runs exactly once (start and
    end in one process), a job pushed meanwhile to a queue they left out starts after at
    most the jobs the children had fetched ahead (two children, K <= 8, docs/architecture.md#lookahead-k),
    not the 50 ms of jobs until the rescan,
    and late pushes to every queue all run."""
    from apps import pf_faults
    from prefork_harness import in_progress_total, wait_for

    log = str(tmp_path / "runs.log")
    monkeypatch.setenv("PF_LOG", log)
    queues = names(30)
    low = [f"low{i}" for i in range(3000)]
    pf_faults.logged.options(queue="q30").enqueue_many([(t,) for t in low])
    masters(module="apps.pf_idle", procs=2, args=[a for q in queues for a in ("-q", q)], env={"PF_LOG": log})

    def ends():
        return {e[1] for e in pf_faults.events(log) if e[0] == "end"}

    wait_for(lambda: len(ends()) >= 200, 30, what="the children busy on q30")
    pf_faults.logged.options(queue="q1").enqueue("high")
    pf_faults.log("pushed", "high")
    late = [f"late{i}" for i in range(60)]
    for i, tag in enumerate(late):
        pf_faults.logged.options(queue=queues[i % 29]).enqueue(tag)
    tags = [*low, "high", *late]
    wait_for(lambda: ends() >= set(tags), 60, what="every job done")
    wait_for(lambda: in_progress_total(own_config) == 0, 10, what="nothing left in progress")

    events = pf_faults.events(log)
    for tag in tags:
        runs = [(e[0], e[2]) for e in events if e[1] == tag and e[0] in ("start", "end")]
        assert [k for k, _ in runs] == ["start", "end"] and runs[0][1] == runs[1][1], (tag, runs)
    # Counted from the push's return: each child may run the rest of the look-ahead it holds
    # (K - 1), its running job, and the look-ahead fetched before the push (K); the next fetch
    # of each, stale, takes nothing, and the one after takes "high" (docs/architecture.md#idle-queues).
    kinds = [(e[0], e[1]) for e in events]
    pushed, started = kinds.index(("pushed", "high")), kinds.index(("start", "high"))
    low_between = [t for k, t in kinds[pushed:started] if k == "start" and t.startswith("low")]
    # K is at most Depth.MAX (32: K grows only while K - 1 jobs fit in the hold budget, so
    # in time the wait is bounded by that budget, not by K).
    from cogworker.engine.lookahead import Depth

    assert len(low_between) <= 2 * (2 * Depth.MAX), low_between
