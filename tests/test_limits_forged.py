"""A forged or damaged limiter record (numbers that aren't: "1e999", "nan", "inf", "x")
is shown, marked unreadable, on every face: the API, the Limits page, `cogworker limits`
and /metrics' sample. Against a real redis-server; the page through Starlette's TestClient,
the command as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from cogworker import api
from cogworker.config import count, number
from cogworker.metrics.exporter import sample_redis

TESTS = os.path.dirname(os.path.abspath(__file__))

FORGED = {
    # name: (kind, n, per, over)
    "huge": ("concurrency", "1e999", "0", "3"),
    "notanumber": ("concurrency", "nan", "0", "nan"),
    "endless": ("window", "5", "inf", "1e999"),
    "words": ("window", "x", "-2", "-1"),
    "fine": ("window", "20", "2", "4"),
}


def forge(config) -> None:
    r, keys, now = config.redis(), config.keys, time.time()
    for name, (kind, n, per, over) in FORGED.items():
        record = keys.limit_keys(name)[0]
        r.hset(record, mapping={"kind": kind, "n": n, "per": per, "seen": repr(now), "over": over})
        r.zadd(keys.limits, {name: now})
    r.zadd(keys.limits, {"forever": float("inf")})  # a last-used score no clock gives
    r.hset(keys.limit_keys("forever")[0], mapping={"kind": "concurrency", "n": "2"})
    r.set(keys.limits_over, "1e999")


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": TESTS}
    env.pop("COGWORKER_REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "cogworker", "limits", "--redis-url", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=TESTS,
        env=env,
    )


def test_the_api_marks_each_unusable_number_and_keeps_the_rest(config):
    forge(config)
    rows = {x.name: x for x in api.limiters(config)}
    assert set(rows) == {*FORGED, "forever"}
    assert (rows["huge"].limit, rows["huge"].unreadable, rows["huge"].over) == (0, ("n",), 3)
    assert (rows["notanumber"].limit, rows["notanumber"].unreadable) == (0, ("n", "over"))
    assert rows["endless"].limit == 5 and rows["endless"].per is None and rows["endless"].unreadable == ("per", "over")
    assert rows["words"].unreadable == ("n", "per", "over")
    fine = rows["fine"]
    assert (fine.limit, fine.per, fine.over, fine.unreadable) == (20, 2.0, 4, ())
    assert rows["forever"].last_used is None and rows["forever"].limit == 2
    assert api.deferrals(config) == 0
    json.dumps([x.to_json() for x in rows.values()], allow_nan=False)  # strict JSON: no NaN, no Infinity


def test_the_limits_page_answers_200_and_shows_every_row(config):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from cogworker.web import create_app

    forge(config)
    with TestClient(create_app(), base_url="http://localhost") as client:
        page = client.get("/limits")
    assert page.status_code == 200, page.text[-2000:]
    for name in [*FORGED, "forever"]:
        assert f"<td>{name}</td>" in page.text
    assert "unreadable: n" in page.text and "unreadable: per, over" in page.text and "20 per 2 s" in page.text


def test_the_limits_command_exits_0_and_shows_every_row(config):
    forge(config)
    text = cli(config.redis_url)
    assert text.returncode == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines()[1:]}
    assert set(lines) == {*FORGED, "forever"}
    assert "? at once (unreadable: n)" in lines["huge"]
    assert "5 per ? (unreadable: per, over)" in lines["endless"]
    assert "20 per 2.0s" in lines["fine"]
    as_json = cli(config.redis_url, "--json")
    assert as_json.returncode == 0, as_json.stderr
    found = json.loads(as_json.stdout)
    assert found["deferrals"] == 0 and {x["name"] for x in found["limiters"]} == {*FORGED, "forever"}


def test_the_metrics_sample_reads_a_forged_deferral_count_as_none(config):
    forge(config)
    sample = sample_redis(config, ["default"])
    assert sample.up and sample.limit_deferrals == 0


@pytest.mark.parametrize(
    ("reply", "as_number", "as_count"),
    [
        (b"3", 3.0, 3),
        (b"2.5", 2.5, 2),
        ("7", 7.0, 7),
        (4, 4.0, 4),
        (b"1e999", None, 0),
        (b"-1e999", None, 0),
        (b"nan", None, 0),
        (b"inf", None, 0),
        (float("inf"), None, 0),
        (10**400, None, 0),
        (b"x", None, 0),
        (b"\xff", None, 0),
        (b"", None, 0),
        (None, None, 0),
        (True, None, 0),
        ([1], None, 0),
    ],
)
def test_one_parser_reads_every_number_from_redis(reply, as_number, as_count):
    assert number(reply) == as_number and count(reply) == as_count
    assert number(reply, -1.0) == (-1.0 if as_number is None else as_number)
    assert count(reply, None) == (None if as_number is None else as_count)
