"""The ``cogworker`` command facing bad input: fields of any size, and names that break
the naming rule. Tables are checked in-process (how much work a row costs) and through
the real command against a real redis-server."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from test_cli import cli, done

from cogworker.cli.output import one_line_cut, pairs, table

BIG = 20_000_000  # the 20 MB error message


def python_calls(work: Callable[[], Any], budget: int) -> int:
    """How many Python and C function calls ``work`` makes; stops it (AssertionError)
    past ``budget``: a deterministic bound on its work, where a clock would be a timed
    assertion."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1
            if calls > budget:
                sys.setprofile(None)
                raise AssertionError(f"more than {budget} calls")

    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_a_table_row_with_a_20mb_cell_costs_no_more_than_a_short_one():
    """Before, the widest column shrank one character per pass: 20 million passes (36 s
    for ``jobs dead --limit 5``). Now no cell is read past the table's width."""
    headers = ["JID", "CLASS", "QUEUE", "FAILED", "RETRIES", "ERROR"]

    def rows(error: str) -> list[list[str]]:
        return [[f"j{i}", "apps.jobs.charge", "default", "1m ago", "3", error if i == 0 else "small"] for i in range(5)]

    short = python_calls(lambda: table(headers, rows("ValueError: " + "x" * 200)), 100_000)
    huge = python_calls(lambda: table(headers, rows("ValueError: " + "x" * BIG)), 100_000)
    assert huge <= short + 50
    out = table(headers, rows("ValueError: " + "x" * BIG))
    assert max(len(line) for line in out.splitlines()) <= 100
    assert out.splitlines()[1].endswith("…")
    assert python_calls(lambda: pairs([("error_message", "y" * BIG), ("jid", "abc")]), 1_000) < 1_000


@pytest.mark.parametrize(
    "text, limit",
    [
        ("a  b\n\nc", 3),
        ("a  b\n\nc", 10),
        (" " * 5000 + "word " * 10, 8),
        ("\t\n" * 3000, 4),
        ("x" * 1000, 10),
        ("", 5),
        ("one two", 7),
    ],
)
def test_one_line_cut_is_one_line_cut(text, limit):
    assert one_line_cut(text, limit) == " ".join(text.split())[: limit + 1]


def test_jobs_dead_with_a_20mb_error_message(redis_server):
    """The real command: the row with the 20 MB message is cut to the terminal, the
    others shown whole."""
    client = redis_server.client()
    client.flushall()
    now = time.time()
    for i in range(6):
        message = "declined " + ("z" * BIG if i == 0 else f"order {i}")
        entry = {
            "class": "apps.jobs.charge",
            "args": [i],
            "kwargs": {},
            "jid": f"{i:024x}",
            "queue": "default",
            "retry": 0,
            "created_at": now,
            "enqueued_at": now,
            "retry_count": 1,
            "error_class": "ValueError",
            "error_message": message,
            "failed_at": now - i,
        }
        client.zadd("cogworker:dead", {json.dumps(entry): now - i})
    out = done(cli("jobs", "dead", "--limit", "5", url=redis_server.url))
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["JID", "CLASS", "QUEUE"] and len(lines) == 7
    assert f"{0:024x}" in lines[1] and lines[1].endswith("…")
    assert "ValueError: declined order 1" in out and lines[-1] == "(5 of 6; --limit N for more)"


@pytest.mark.parametrize("name", ["\u200b", "a\nb", "x" * 100_000])
def test_queues_and_stats_show_a_bad_queue_name_escaped(redis_server, name):
    """Before, a zero-width space in ``queues`` made both commands exit 2."""
    from cogworker.names import shown

    client = redis_server.client()
    client.flushall()
    client.sadd("cogworker:queues", name, "default")
    client.lpush(
        f"cogworker:queue:{name}",
        json.dumps({"class": "apps.x.y", "args": [], "kwargs": {}, "jid": "b" * 24, "queue": name, "retry": 0}),
    )
    for command in (["queues"], ["stats"]):
        out = done(cli(*command, url=redis_server.url))
        assert shown(name)[:40] in out, out
    listed = json.loads(cli("queues", "--json", url=redis_server.url).stdout)["queues"]
    assert sorted(q["name"] for q in listed) == sorted([name, "default"])  # JSON: the name as it is
    if len(name) < 1000:  # an argument on a command line
        assert "paused" in done(cli("queue", "pause", name, url=redis_server.url))
        assert client.sismember("cogworker:paused", name)
    result = cli("queue", "pause", "a b", url=redis_server.url)
    assert result.returncode == 2 and "queue name a\\x20b has" in result.stderr
    assert "printable characters only" in result.stderr and len(result.stderr.splitlines()) == 1
