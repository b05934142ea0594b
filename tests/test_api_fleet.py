"""cogworker.api under a running fleet: real masters, their poller, real workers."""

from __future__ import annotations

import time
from collections import Counter

from api_util import entry, failed, fill
from prefork_harness import wait_for

from cogworker import api

RUNS = 1000


def test_retry_races_the_poller_and_two_masters(own_config, masters, tmp_path):
    """Every job is retried by an operator while the poller may move it too (retry, due
    now) or while workers run (dead): each runs exactly once."""
    r = own_config.redis()
    log = tmp_path / "starts.log"
    ms = [masters(module="apps.api_app", procs=2) for _ in range(2)]
    for m in ms:
        m.wait_children()
    for start in range(0, RUNS, 20):
        tags = range(start, start + 20)
        now = time.time()
        for i in tags:
            raw = failed("apps.api_app.mark", [str(log), "default", str(i)], jid=f"jid{i}")
            r.zadd(own_config.keys.retry if i % 2 else own_config.keys.dead, {raw: now - 1})
        for i in tags:
            (api.RetrySet() if i % 2 else api.DeadSet()).retry(f"jid{i}")
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= RUNS, timeout=60, what="every run")
    time.sleep(1.0)  # a duplicate would show up by now
    runs = Counter(line.split()[2] for line in log.read_text().splitlines())
    assert runs == Counter({str(i): 1 for i in range(RUNS)})
    assert api.RetrySet().size() == api.DeadSet().size() == 0


def test_pause_under_load(own_config, masters, tmp_path):
    """No job of a paused queue is taken after pause() returns (the ones already fetched,
    still on an in-progress list then, may start); the other queue keeps running; after
    resume everything runs once."""
    from apps import api_app

    r = own_config.redis()
    log = tmp_path / "starts.log"
    m = masters(module="apps.api_app", procs=2, args=("-q", "a", "-q", "b"))
    m.wait_children()
    per_queue = 150
    for q in ("a", "b"):
        api_app.mark.options(queue=q).enqueue_many([(str(log), q, f"{q}{i}", 0.01) for i in range(per_queue)])
    wait_for(lambda: log.exists() and sum(" a " in x for x in log.read_text().splitlines()) >= 10, what="a running")
    api.Queue("a").pause()
    paused_at = time.time()
    # Fetched before the pause: every job no longer on the queue once pause() returned
    # (nothing is taken from it after). Read from the queue, not from the in-progress lists,
    # where a job fetched ahead could start and end before they were read.
    queued = {api.JobRecord.parse(raw, "").args[2] for raw in r.lrange(own_config.keys.queue("a"), 0, -1)}
    fetched = {f"a{i}" for i in range(per_queue)} - queued
    api_app.mark.options(queue="a").enqueue_many([(str(log), "a", f"late{i}", 0.0) for i in range(20)])
    wait_for(lambda: sum(" b " in x for x in log.read_text().splitlines()) == per_queue, timeout=30, what="b drained")
    time.sleep(0.5)
    lines = [x.split() for x in log.read_text().splitlines()]
    after = [tag for at, q, tag in lines if q == "a" and float(at) > paused_at]
    assert set(after) <= fetched, f"started after pause() returned: {set(after) - fetched}"
    waiting = api.Queue("a").size()
    assert waiting >= 20
    assert api.Queue("a").paused() and api.stats().enqueued == waiting
    api.Queue("a").resume()
    wait_for(lambda: len(log.read_text().splitlines()) == 2 * per_queue + 20, timeout=30, what="a drained")
    time.sleep(0.5)
    runs = Counter(x.split()[2] for x in log.read_text().splitlines())
    assert set(runs.values()) == {1} and len(runs) == 2 * per_queue + 20


def test_retry_all_on_100k_dead_entries(own_config, own_redis, capsys):
    """Chunked: each script call moves at most CHUNK entries. The time and Redis's longest
    command are printed for the closing note (never asserted)."""
    from cogworker.api import sets

    r = own_config.redis()
    n = 100_000
    fill(
        r,
        own_config.keys.dead,
        [failed("apps.api_app.mark", ["-", "q", str(i)], queue="bulk") for i in range(n)],
        time.time() - n,
    )
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 1_000_000)  # commands inside scripts are logged too
    r.slowlog_reset()
    started = time.perf_counter()
    assert api.DeadSet().retry_all() == n
    took = time.perf_counter() - started
    log = r.slowlog_get(1_000_000)
    scripts = [e for e in log if e["command"].startswith(b"EVALSHA")]
    longest = max(scripts, key=lambda e: e["duration"])
    assert len(scripts) >= n // sets.CHUNK and api.Queue("bulk").size() == n and api.DeadSet().size() == 0
    fill(r, own_config.keys.dead, [entry("x", [i]) for i in range(n)], 0)
    r.slowlog_reset()
    started = time.perf_counter()
    cleared = api.DeadSet().clear()
    clear_took = time.perf_counter() - started
    clear_log = [e for e in r.slowlog_get(1_000_000) if e["command"].startswith(b"ZREMRANGEBYRANK")]
    clear_longest = max(clear_log, key=lambda e: e["duration"])
    median = sorted(e["duration"] for e in scripts)[len(scripts) // 2]
    assert cleared == n
    with capsys.disabled():
        print(
            f"\nretry_all of {n} dead entries: {took:.2f} s, {len(scripts)} script calls of {sets.CHUNK}; "
            f"script median {median / 1000:.2f} ms, longest {longest['duration'] / 1000:.2f} ms"
        )
        print(
            f"clear of {n}: {clear_took:.2f} s, {len(clear_log)} ZREMRANGEBYRANK; "
            f"longest {clear_longest['duration'] / 1000:.2f} ms"
        )
