"""A malformed Redis URL is one line of error everywhere, never a traceback from inside
redis-py at the first connection: ``configure()``, ``Config``, the ``cogworker`` command
(its own flag and the environment), both worker commands, and an app module that
configures it. Real processes; nothing needs a Redis (the URL is refused before)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import cogworker
from cogworker.errors import ConfigurationError

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
SECRET = "pw-7c1e"

# (url, what the line says): each passed redis-py's parser or validate_redis_url before, and
# failed with a traceback (TypeError, ValueError, RedisError) once a connection was made.
MALFORMED = [
    ("redis://127.0.0.1:6399/0?foo=1", "unknown parameter 'foo'"),
    ("redis://127.0.0.1:6399/0?socket_timeout=abc", "Invalid value for 'socket_timeout' in connection URL"),
    (
        f"rediss://:{SECRET}@127.0.0.1:6399/0?ssl_cert_reqs=none?ssl_cert_reqs=none",
        "Invalid SSL Certificate Requirements Flag: none?ssl_cert_reqs=none",
    ),
    ("redis://127.0.0.1:6399/0?protocol=9", "protocol must be either 2 or 3"),
]
COMMANDS = {
    "stats": ("cogworker", "stats"),
    "health": ("cogworker", "health"),
    "runner": ("cogworker.worker", "apps.basic"),
    "prefork": ("cogworker.prefork.cli", "--procs", "1", "apps.basic"),
}


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": TESTS_DIR, **env}
    for name in ("REDIS_URL", "COGWORKER_REDIS_URL"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=60, cwd=TESTS_DIR, env=full
    )


def the_line(result: subprocess.CompletedProcess[str], says: str) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert SECRET not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if "invalid Redis URL" in line]
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert len([line for line in result.stderr.splitlines() if "INFO" not in line]) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("url, says", MALFORMED)
def test_configure_refuses_it_in_one_line(url, says):
    with pytest.raises(ConfigurationError) as raised:
        cogworker.Config(redis_url=url)
    assert says in str(raised.value) and SECRET not in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("url, says", MALFORMED)
def test_every_command_refuses_it_from_the_environment(url, says, command):
    the_line(run(*COMMANDS[command], env={"REDIS_URL": url}), says)


@pytest.mark.parametrize("url, says", MALFORMED)
def test_the_flag_is_a_usage_error(url, says):
    result = run("cogworker", "stats", "--redis-url", url, env={})
    assert result.returncode == 2
    the_line(result, says)


def test_an_app_module_that_configures_it(tmp_path):
    (tmp_path / "bad_url_app.py").write_text(
        "import cogworker\nfrom apps.basic import add  # noqa: F401\n"
        f"cogworker.configure(redis_url={MALFORMED[2][0]!r})\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), TESTS_DIR])}
    for command in (("cogworker.worker", "bad_url_app"), ("cogworker.prefork.cli", "--procs", "1", "bad_url_app")):
        line = the_line(run(*command, env=env), MALFORMED[2][1])
        assert "can't import 'bad_url_app'" in line
