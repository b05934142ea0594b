"""Which server cogworker runs on (Redis, Valkey, Dragonfly), what it refuses, and the one
line per feature the server lacks (cogworker/store/server.py)."""

from __future__ import annotations

import logging

import pytest
import redis

from cogworker.errors import RedisVersionError
from cogworker.store import server
from cogworker.testing.binaries import server_binary

# INFO server as each reports it (the fields that tell them apart, copied from their replies).
REDIS_62 = {"redis_version": "6.2.14", "redis_mode": "standalone"}
REDIS_70 = {"redis_version": "7.0.15", "redis_mode": "standalone"}
VALKEY_8 = {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.1.8"}
VALKEY_9 = {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"}
DRAGONFLY = {"redis_version": "7.4.0", "dragonfly_version": "df-v1.34.1", "redis_mode": "standalone"}


@pytest.mark.parametrize(
    ("info", "name", "version"),
    [
        (REDIS_62, "Redis", "6.2.14"),
        (REDIS_70, "Redis", "7.0.15"),
        (VALKEY_8, "Valkey", "8.1.8"),
        (VALKEY_9, "Valkey", "9.1.2"),
        (DRAGONFLY, "Dragonfly", "1.34.1"),
    ],
)
def test_the_server_is_told_by_its_info(info, name, version):
    found = server.identify(info)
    assert (found.name, found.version) == (name, version)
    assert str(found) == f"{name} {version}"


def test_the_running_server_is_named_as_the_fixtures_name_it(config):
    found = server.identify(config.redis().info("server"))
    assert server_binary().version == str(found)


def test_only_redis_before_6_2_is_refused():
    said = server.refusal(server.identify({"redis_version": "6.0.16"}))
    assert said is not None and "6.0.16" in said and "6.2" in said and "\n" not in said
    said = server.refusal(server.identify({"redis_version": "6.0.9", "valkey_version": "9.1.2"}))
    assert said is not None and said.startswith("Valkey 9.1.2 (as Redis 6.0.9) is too old")
    for info in (REDIS_62, REDIS_70, VALKEY_8, VALKEY_9, DRAGONFLY):
        assert server.refusal(server.identify(info)) is None


def test_lmpop_missing_before_redis_7_is_one_line_naming_the_versions_that_have_it():
    (line,) = server.lacking(server.identify(REDIS_62))
    assert "Redis 6.2.14 lacks LMPOP (Redis 7.0, Valkey 7.2)" in line and "\n" not in line
    for info in (REDIS_70, VALKEY_8, VALKEY_9):
        assert server.lacking(server.identify(info)) == []


def test_dragonfly_is_said_to_be_untested_and_needs_no_flag_for_undeclared_keys():
    (line,) = server.lacking(server.identify(DRAGONFLY))
    assert "Dragonfly 1.34.1 is untested" in line and "\n" not in line
    assert "allow-undeclared-keys" not in line  # every script's keys are declared (tests/test_dragonfly_rules.py)


def test_a_worker_on_redis_6_2_says_once_what_it_lacks(config, monkeypatch, caplog):
    real_info = redis.Redis.info

    def old_info(self, section=None, *args, **kwargs):
        reply = real_info(self, section, *args, **kwargs)
        reply.pop("valkey_version", None)
        reply.pop("server_name", None)
        reply["redis_version"] = "6.2.14"
        return reply

    monkeypatch.setattr(redis.Redis, "info", old_info)
    with caplog.at_level(logging.WARNING, logger="cogworker"):
        server.warn_lacking(config.redis(), "worker")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"worker: {server.lacking(server.identify(REDIS_62))[0]}"]
    assert lines[0].startswith("worker: Redis 6.2.14 lacks LMPOP")


def test_a_server_away_is_no_warning(monkeypatch, caplog):
    away = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    with caplog.at_level(logging.WARNING, logger="cogworker"):
        server.warn_lacking(away, "master")
    assert caplog.records == []


def test_check_refuses_in_one_line(config, monkeypatch):
    monkeypatch.setattr(redis.Redis, "info", lambda self, *a, **kw: {"redis_version": "5.0.7"})
    with pytest.raises(RedisVersionError, match=r"^Redis 5\.0\.7 is too old: .*6\.2"):
        server.check(config.redis())
