"""A count reads in its number wherever the command and the web UI count: "1 job
deleted", "2 jobs deleted", "1 entry" (real Redis, the command as a subprocess, the UI
over HTTP)."""

from __future__ import annotations

import time

import pytest
from api_util import entry, failed
from test_cli_queue import cli

from cogworker.wording import counted

pytest.importorskip("starlette")
from web_util import client_for, page_token  # noqa: E402

from cogworker.web import create_app  # noqa: E402


def test_counted():
    assert [counted(n, "job") for n in (0, 1, 2, 1200)] == ["0 jobs", "1 job", "2 jobs", "1200 jobs"]
    assert counted(1200, "job", grouped=True) == "1,200 jobs"
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == "3 entries"


def test_the_command_counts_one_and_two(config):
    r = config.redis()
    r.sadd(config.keys.queues, "default")
    r.lpush(config.keys.queue("default"), entry("apps.x.add", [1, 1], jid="one"))
    assert cli(config.redis_url, "queue", "default").stdout.startswith("queue default: 1 job, latency ")
    assert cli(config.redis_url, "clear", "default", "--yes").stdout == "queue default: 1 job deleted\n"
    r.lpush(config.keys.queue("default"), entry("apps.x.add", [1, 1]), entry("apps.x.add", [2, 2]))
    assert cli(config.redis_url, "clear", "default", "--yes").stdout == "queue default: 2 jobs deleted\n"
    r.zadd(config.keys.dead, {failed("apps.x.add", [1, 1], jid="d1"): time.time()})
    out = cli(config.redis_url, "delete", "--all", "--from", "dead", "--yes").stdout
    assert out.strip() == "delete: 1 dead entry deleted"


def test_the_web_ui_counts_one(config):
    r = config.redis()
    r.sadd(config.keys.queues, "default")
    r.lpush(config.keys.queue("default"), entry("apps.x.add", [1, 1], jid="one"))
    r.zadd(config.keys.dead, {failed("apps.x.add", [1, 1], jid="d1"): time.time()})
    client = client_for(create_app(config=config))
    queue = client.get("/queues/default").text
    assert "1 job ·" in queue and "1 jobs" not in queue
    assert "Delete all 1 job of queue default?" in queue
    dead = client.get("/dead").text
    assert "1 entry," in dead and "1 entries" not in dead
    cleared = client.post(
        "/queues/default/clear",
        data={"csrf": page_token(queue), "action": "clear", "back": "/queues/default", "confirm": "yes"},
    )
    assert cleared.status_code == 303
    assert "cleared: 1 job" in client.get(cleared.headers["location"]).text
