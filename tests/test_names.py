"""Queue and job names (issue #25, point 2): one rule for each (printable, no whitespace,
control or format characters, a length limit), applied at enqueue, in the API, on the
worker's command line and in the web UI; names already in Redis that break it are shown
escaped and never crash a page; a log line escapes control characters. Real Redis, real
prefork masters, the web UI over Starlette's TestClient."""

from __future__ import annotations

import json
import logging
import time

import pytest
from apps import core_jobs
from core_util import wait_for

import cogworker
from cogworker import api, names
from cogworker.errors import ConfigurationError
from cogworker.launch.logs import TEXT_FORMAT, TextFormatter, escape_controls
from cogworker.launch.queues import parse_queues

BAD_QUEUES = ["\u200b", "a b", "a\nb", "q\x1b[31m", "\ufeffq", "x" * (names.QUEUE_NAME_MAX + 1), "x" * 100_000]
BAD_JOBS = ["a b", "x" * 100_000, "apps.x\nERROR master: forged log line", "apps.\u200bx", "apps.x\t"]


@pytest.mark.parametrize("name", BAD_QUEUES)
def test_a_queue_name_that_breaks_the_rule_is_refused_everywhere_it_is_given(config, name):
    with pytest.raises(ConfigurationError, match="queue name .* printable characters only|characters long"):
        core_jobs.record.options(queue=name).enqueue(2)
    with pytest.raises(ConfigurationError, match="queue name"):
        cogworker.by_name("apps.core_jobs.record", queue=name)
    with pytest.raises(ConfigurationError, match="queue name"):
        api.Queue(name)
    with pytest.raises(ConfigurationError, match="queue name"):
        api.queue(name)  # not in Redis: refused, not looked up
    with pytest.raises(ConfigurationError, match="invalid queue"):
        parse_queues([name])  # -q NAME on the worker's command line
    with pytest.raises(ConfigurationError, match="queue name"):
        cogworker.periodic("* * * * *", core_jobs.record, args=("x",), name=f"p{len(name)}", queue=name)
    assert config.redis().dbsize() == 0


@pytest.mark.parametrize("name", BAD_JOBS)
def test_a_job_name_that_breaks_the_rule_is_refused_at_enqueue(config, name):
    with pytest.raises(ConfigurationError, match="job name"):
        cogworker.enqueue(name, 1)
    with pytest.raises(ConfigurationError, match="job name"):
        cogworker.by_name(name)
    with pytest.raises(ConfigurationError, match="job name"):
        cogworker.periodic("* * * * *", name, name="nightly")
    assert config.redis().dbsize() == 0


def test_the_error_names_the_bad_character_escaped_on_one_line():
    with pytest.raises(ConfigurationError) as caught:
        names.check_job_name("apps.x\nERROR master: forged log line")
    assert "\n" not in str(caught.value) and "\\n" in str(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        names.check_queue_name("x" * 100_000)
    assert len(str(caught.value)) < 200 and "100000 characters long, more than 128" in str(caught.value)


@pytest.mark.parametrize("name", ["default", "critical-1", "emails.high", "ünïcødé", "队列", "a:b/c"])
def test_names_that_keep_the_rule_work_as_before(config, name):
    jid = core_jobs.record.options(queue=name).enqueue(1)
    assert [q.name for q in api.queues()] == [name] and api.queue(name).size() == 1
    assert names.shown(name) == name and json.loads(config.redis().lpop(config.keys.queue(name)))["jid"] == jid


def plant(config, name: str) -> None:
    """A queue as old code or another client left it: named in ``queues``, one job on it."""
    r = config.redis()
    r.sadd(config.keys.queues, name)
    r.lpush(
        config.keys.queue(name),
        json.dumps(
            {
                "class": "apps.core_jobs.record",
                "args": [1],
                "kwargs": {},
                "jid": "j" * 24,
                "queue": name,
                "retry": 25,
                "enqueued_at": time.time(),
            }
        ),
    )


@pytest.mark.parametrize("name", ["\u200b", "a b", "a\nb", "x" * 100_000])
def test_a_bad_name_already_in_redis_is_listed_escaped_and_can_be_operated_on(config, name):
    plant(config, name)
    core_jobs.record.enqueue(2)
    listed = api.queues()
    assert sorted(q.name for q in listed) == sorted([name, "default"])
    [bad] = [q for q in listed if q.name == name]
    assert bad.size() == 1 and len(bad.shown) <= 80 and bad.shown.isprintable() and " " not in bad.shown
    assert api.queue(name).size() == 1  # known in Redis: taken, so an operator can pause or clear it
    bad.pause()
    assert bad.paused() and api.queue(name).clear() == 1


@pytest.mark.parametrize("name", ["\u200b", "a\nb", "<i>x y", "x" * 100_000])
def test_the_web_ui_shows_a_bad_name_escaped(config, name):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from cogworker.web import create_app
    from cogworker.web.views import quoted

    plant(config, name)
    client = TestClient(create_app(config=config), follow_redirects=False, base_url="http://localhost")
    page = client.get("/queues")
    assert page.status_code == 200
    escaped = names.shown(name).replace("<", "&lt;").replace(">", "&gt;")
    assert escaped in page.text
    if len(name) < 1000:  # a 100,000-character name makes a URL no HTTP client sends
        detail = client.get("/queues/" + quoted(name))
        assert detail.status_code == 200 and escaped in detail.text
    assert client.get("/dead").status_code == 200


def test_a_log_line_escapes_control_characters():
    assert escape_controls("a\nb\r\x1b[31m\u2028\x85") == "a\\nb\\r\\x1b[31m\\u2028\\x85"
    record = logging.LogRecord(
        "cogworker",
        logging.ERROR,
        __file__,
        1,
        "fail: %s jid=%s%s",
        ("apps.x\nERROR master: forged log line", "j", "\nTraceback\nValueError: m\nERROR forged"),
        None,
    )
    record.traceback = "Traceback\nValueError: m\nERROR forged"
    lines = TextFormatter(TEXT_FORMAT).format(record).split("\n")
    assert "fail: apps.x\\nERROR master: forged log line jid=j" in lines[0]
    assert lines[1:] == ["  Traceback", "  ValueError: m", "  ERROR forged"]  # indented under its line
    try:
        raise ValueError("boom\nERROR forged")
    except ValueError:
        import sys

        record = logging.LogRecord("cogworker", logging.ERROR, __file__, 1, "oops", (), sys.exc_info())
    assert all(line.startswith("  ") for line in TextFormatter(TEXT_FORMAT).format(record).split("\n")[1:])


def test_a_forged_name_in_redis_never_starts_a_line_of_a_workers_log(own_config, masters):
    """The issue's forged log line, from a job name already in Redis (enqueue refuses it)."""
    r = own_config.redis()
    r.lpush(
        own_config.keys.queue("default"),
        json.dumps(
            {
                "class": "apps.x\nERROR master: forged log line",
                "args": [],
                "kwargs": {},
                "jid": "f" * 24,
                "queue": "default",
                "retry": 0,
            }
        ),
    )
    m = masters(procs=1)
    wait_for(lambda: r.zcard(own_config.keys.dead) == 1, 20)
    wait_for(lambda: "forged log line" in m.output(), 5)
    out = m.output()
    assert "UnknownJob" in out and "apps.x\\nERROR master: forged log line" in out
    assert not any(line.startswith("ERROR master") for line in out.splitlines())
