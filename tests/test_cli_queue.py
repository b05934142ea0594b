"""``cogworker queue NAME``, ``cogworker clear QUEUE`` and ``cogworker stats --watch``, run
as subprocesses against a real redis-server (the web UI could list and clear a queue; the
command could not, and had no watch mode)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest
from api_util import entry

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def env_for(url: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": TESTS_DIR, "COGWORKER_REDIS_URL": url}
    env.pop("REDIS_URL", None)
    return env


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_for(url),
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def filled(config):
    r = config.redis()
    r.sadd(config.keys.queues, "default", "other")
    now = time.time()
    # LPUSH: the first pushed is the next to run (fetch takes from the right end).
    for i in range(30):
        r.lpush(config.keys.queue("default"), entry("apps.x.add", [i, i], jid=f"j{i:02d}", enqueued_at=now - 60 + i))
    r.lpush(config.keys.queue("other"), b"\xffnot json")
    return config


def test_queue_name_lists_its_jobs_the_next_to_run_first(filled):
    shown = cli(filled.redis_url, "queue", "default", "--limit", "5")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("queue default: 30 jobs, latency ")
    assert lines[1].split() == ["JID", "CLASS", "ARGS", "ENQUEUED"]
    assert [line.split()[0] for line in lines[2:7]] == ["j00", "j01", "j02", "j03", "j04"]
    assert "apps.x.add  [0, 0]" in lines[2] and "ago" in lines[2]
    assert lines[7] == "(5 of 30, the next to run first; --limit N for more)"
    document = json.loads(cli(filled.redis_url, "queue", "default", "--json").stdout)
    assert document["size"] == 30 and document["paused"] is False and len(document["jobs"]) == 25
    assert document["jobs"][0]["jid"] == "j00" and document["jobs"][0]["args"] == [0, 0]
    raw = cli(filled.redis_url, "queue", "other")
    assert raw.returncode == 0 and "(raw)" in raw.stdout and "not json" in raw.stdout


def test_queue_name_errors_and_pause_still_works(filled):
    unknown = cli(filled.redis_url, "queue", "nope")
    assert unknown.returncode == 1 and "no queue named 'nope' (known: default, other)" in unknown.stderr
    bad = cli(filled.redis_url, "queue", "a", "b")
    assert bad.returncode == 2 and "give NAME (its jobs) or pause|resume NAME" in bad.stderr
    assert len(bad.stderr.splitlines()) == 1
    paused = cli(filled.redis_url, "queue", "pause", "default")
    assert paused.returncode == 0 and "queue default: paused" in paused.stdout
    assert ", paused" in cli(filled.redis_url, "queue", "default").stdout.splitlines()[0]
    assert cli(filled.redis_url, "queue", "resume", "default").returncode == 0


def test_clear_asks_refuses_without_a_terminal_and_clears_with_yes(filled):
    r = filled.redis()
    refused = cli(filled.redis_url, "clear", "default")
    assert refused.returncode == 2 and "refused without --yes" in refused.stderr
    assert r.llen(filled.keys.queue("default")) == 30
    assert cli(filled.redis_url, "clear", "nope", "--yes").returncode == 1
    cleared = cli(filled.redis_url, "clear", "default", "--yes")
    assert cleared.returncode == 0 and cleared.stdout == "queue default: 30 jobs deleted\n"
    assert r.llen(filled.keys.queue("default")) == 0
    again = json.loads(cli(filled.redis_url, "clear", "default", "--yes", "--json").stdout)
    assert again == {"queue": "default", "deleted": 0}


def read_until(fd: int, wanted: bytes, timeout: float = 20.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the pty closed: the process is gone
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_stats_watch_writes_plain_lines_to_a_pipe_and_survives_a_redis_outage(own_config, own_redis):
    r = own_config.redis()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker", "stats", "--watch", "0.2"],
        env=env_for(own_redis.url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        fd = proc.stdout.fileno()
        first = read_until(fd, b"\n")
        assert b" processed=0 failed=0 " in first and b"\x1b" not in first
        r.set(own_config.keys.stats_processed, 41)
        later = read_until(fd, b"processed=41 ")
        assert b"processed=41 " in later and later.count(b"\n") >= 1 and b"\x1b" not in later
        own_redis.stop()
        down = read_until(fd, b"did not answer")
        assert b"did not answer (ConnectionError); trying again in 0.2s" in down
        assert proc.poll() is None  # the watch goes on
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stats_watch_redraws_in_place_on_a_terminal(config):
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker", "stats", "--watch", "0.3"],
        env=env_for(config.redis_url),
        stdout=child,
        stderr=child,
        stdin=subprocess.DEVNULL,
    )
    os.close(child)
    try:
        seen = read_until(main, b"Ctrl-C")
        seen += read_until(main, b"\x1b[H\x1b[2Jcogworker stats", timeout=10)
        assert seen.count(b"\x1b[H\x1b[2Jcogworker stats every 0.3s (Ctrl-C to stop)") >= 2
        assert b"processed" in seen and b"default latency" in seen and b"no live processes" in seen
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)


def test_stats_watch_json_is_one_document_per_line(config):
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker", "stats", "--watch", "0.2", "--json"],
        env=env_for(config.redis_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        seen = read_until(proc.stdout.fileno(), b"\n", timeout=20)
        while seen.count(b"\n") < 2:
            more = read_until(proc.stdout.fileno(), b"\n", timeout=20)
            assert more, seen
            seen += more
        documents = [json.loads(line) for line in seen.splitlines()[:2]]
        assert all(set(d) == {"at", "stats", "queues", "processes"} for d in documents)
        assert documents[1]["at"] > documents[0]["at"] and documents[0]["stats"]["processed"] == 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
