"""A unique job's lock release rides on the prefork child's next look-ahead fetch, with the
job's ack (docs/architecture.md#riders): no round trip of its own per job. Every rule
of unique jobs holds: the lock is freed once the job succeeded, and a child killed while it
held releases (and acks) for a fetch it never sent has its master free those locks, as it
drops the acks for it, long before their TTL."""

from __future__ import annotations

from pathlib import Path

import pytest
from apps import unique_rides
from prefork_harness import wait_for

from cogworker import api
from cogworker.testing.servers import PreforkWorker
from cogworker.transitions import call, push

N = 300


def _reads(client) -> int:
    return int(client.info("stats")["total_reads_processed"])


def _locks(client) -> list[bytes]:
    return list(client.scan_iter(match="cogworker:unique:*", count=1000))


def _drain(
    config, tmp_path: Path, tags: list[tuple[str, str]], args: tuple[str, ...] = ()
) -> tuple[PreforkWorker, int]:
    """Enqueues ``tags`` (job, tag) while the queue is paused, then drains them with one
    child (no sibling to idle: the look-ahead's K grows); Redis's reads until they all ran."""
    client = config.redis()
    api.Queue("default").pause()
    jobs = {
        "mark": unique_rides.mark,
        "killer": unique_rides.killer,
        "plain": unique_rides.plain,
        "flusher": unique_rides.flusher,
        "cutter": unique_rides.cutter,
    }
    for name, tag in tags:
        assert jobs[name].enqueue(tag) is not None
    worker = PreforkWorker(
        config.redis_url, "apps.unique_rides", procs=1, args=args, env={"COGWORKER_TEST_LOG": str(tmp_path / "log")}
    )
    worker.wait_ready()
    before = _reads(client)
    api.Queue("default").resume()
    log = tmp_path / "log"
    # Waited for on the file, not on Redis: the harness's own polling would count as reads.
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= len(tags), timeout=60, what="every job ran")
    reads = _reads(client) - before
    worker.wait_idle(60)
    return worker, reads


def test_a_unique_jobs_release_rides_on_the_next_fetch(config, tmp_path):
    client = config.redis()
    worker, reads = _drain(config, tmp_path, [("mark", f"m{n}") for n in range(N)])
    try:
        # Each success's release went out with a later fetch, the last ones with the idle fetch.
        wait_for(lambda: not _locks(client), timeout=10, what="every lock released")
        ran = (tmp_path / "log").read_text().split()
        assert sorted(ran[::2]) == sorted(f"m{n}" for n in range(N))
        # A release of its own is one more read per job for Redis: the drain made far fewer
        # than one per job (the fetches of K jobs, the master's beats).
        assert reads < 0.5 * N, reads
        # A duplicate is taken again once its job succeeded.
        assert unique_rides.mark.enqueue("m0") is not None
    finally:
        worker.stop()


@pytest.mark.parametrize("before", [40, 120])
def test_a_child_killed_holding_releases_has_its_master_free_them(config, tmp_path, before):
    """The killer holds releases unless it is the last job of its look-ahead (whose fetch
    carried them): tried again, with new jobs, until the master says it released some (the
    chance of a miss is about 1/K each time)."""
    client = config.redis()
    for attempt in range(5):
        run = tmp_path / str(attempt)
        run.mkdir()
        tags = [("mark", f"{attempt}m{n}") for n in range(before)]
        tags += [("killer", f"{attempt}k"), *[("mark", f"{attempt}n{n}") for n in range(20)]]
        worker, _ = _drain(config, run, tags)
        try:
            assert (run / "log.killed").exists()  # it did die once, mid look-ahead
            # The master dropped the held acks and released their locks, not their TTL (an hour).
            wait_for(lambda: not _locks(client), timeout=10, what="every lock released")
            ran = (run / "log").read_text().split()[::2]
            assert sorted(ran) == sorted(tag for _, tag in tags)  # each once: none lost, none run twice
            exercised = "unique lock(s) of" in worker.output()
        finally:
            worker.stop()
        if exercised:
            return
    raise AssertionError("the killer never died holding releases: the master's path was not exercised")


def test_releases_refused_with_the_scripts_flushed_are_written_again(config, tmp_path):
    """A flush between a job's end and the next fetch: Redis refuses the releases riding on
    it (NOSCRIPT, as it refuses the fetch); each is written again, and every lock is freed
    at once, not at its TTL (an hour). Nothing is lost or run twice."""
    client = config.redis()
    tags = [
        (name, f"{round}{name[0]}{n}")
        for round in range(4)
        for name, n in [("flusher", 0), *(("mark", n) for n in range(40))]
    ]
    worker, _ = _drain(config, tmp_path, tags, args=("--verbose",))
    try:
        wait_for(lambda: not _locks(client), timeout=10, what="every lock released")
        ran = (tmp_path / "log").read_text().split()[::2]
        assert sorted(ran) == sorted(tag for _, tag in tags)
        # Each flush had releases ride into it after (the path under test was taken).
        assert worker.output().count("a write riding on the fetch was refused (NoScriptError: ") >= 4
        assert "not made" not in worker.output()
    finally:
        worker.stop()


def test_releases_whose_replies_were_lost_with_the_connection_are_written_again(config, tmp_path):
    """The connection closed while the fetch and the releases riding on it were out: it is
    unknown whether they ran, so each release is written again (a compare-and-delete: twice
    does no harm), and every lock is freed at once, not at its TTL."""
    client = config.redis()
    tags = [
        (name, f"{round}{name[0]}{n}")
        for round in range(4)
        for name, n in [*(("mark", n) for n in range(40)), ("cutter", 0)]
    ]
    worker, _ = _drain(config, tmp_path, tags, args=("--verbose",))
    try:
        wait_for(lambda: not _locks(client), timeout=10, what="every lock released")
        ran = (tmp_path / "log").read_text().split()[::2]
        assert sorted(ran) == sorted(tag for _, tag in tags)
        assert "write(s) riding on the fetch got no reply (Connection closed by server.)" in worker.output()
        assert "not made" not in worker.output()
    finally:
        worker.stop()


def test_the_releases_of_one_fetch_are_one_compare_and_delete_call(config):
    """Released together only where each owner still holds its lock: a lock a later
    duplicate took (another owner), or one already gone, is left as it is."""
    client = config.redis()
    keys = config.keys
    client.set(keys.unique("a"), "j1")
    client.set(keys.unique("b"), "j2")
    client.set(keys.unique("c"), "someone-else")
    calls = [
        push.release_lock_call(lock=keys.unique(d), owner=j)
        for d, j in [("a", "j1"), ("b", "j2"), ("c", "j3"), ("d", "j4")]
    ]
    (one,) = push.merged(calls)
    assert one.script == "release_locks"
    assert call.run(client, one) == 2
    assert client.get(keys.unique("a")) is None and client.get(keys.unique("b")) is None
    assert client.get(keys.unique("c")) == b"someone-else"
    assert push.merged(calls[:1]) == calls[:1]  # a lone release stays release_lock
