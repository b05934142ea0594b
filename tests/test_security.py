"""Security: a payload can't make the worker import a module (only registered jobs run,
plus modules under ``import_prefixes``); the Redis password never shows in a message or
a log line."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest
from core_util import RunningWorker, wait_for, zentries

import cogworker
from cogworker import config as config_module
from cogworker.client.jobs import importable, resolve
from cogworker.errors import ConfigurationError, UnknownJob

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
SECRET = "s3cr3t-Pw"

MODULE_CODE = """
import cogworker
with open({imported!r}, "a") as f:
    f.write("imported\\n")

@cogworker.job(retry=0)
def hello(tag):
    with open({ran!r}, "a") as f:
        f.write(tag + "\\n")
"""


@pytest.fixture
def side_effect_module(tmp_path, monkeypatch):
    """A module on sys.path (as the working directory is) whose import writes a file."""
    name = f"sidefx_{secrets.token_hex(4)}"
    imported, ran = tmp_path / "imported", tmp_path / "ran"
    (tmp_path / f"{name}.py").write_text(MODULE_CODE.format(imported=str(imported), ran=str(ran)))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, imported, ran
    sys.modules.pop(name, None)


def _payload(name, retry):
    return {
        "class": name,
        "args": ["x"],
        "kwargs": {},
        "jid": secrets.token_hex(12),
        "queue": "default",
        "retry": retry,
        "created_at": time.time(),
        "enqueued_at": time.time(),
    }


# -- only registered jobs run -----------------------------------------------------------------


@pytest.mark.parametrize("retry, zset", [(0, "dead"), (2, "retry")])
def test_unregistered_module_is_never_imported(config, side_effect_module, retry, zset):
    name, imported, ran = side_effect_module
    r = config.redis()
    r.lpush(config.keys.queue("default"), json.dumps(_payload(f"{name}.hello", retry)))
    with RunningWorker() as w:
        assert wait_for(lambda: r.zcard(getattr(config.keys, zset)) == 1)
        assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) == 0)
    [(entry, _)] = zentries(r, getattr(config.keys, zset))
    assert entry["error_class"] == "cogworker.UnknownJob" and "not registered" in entry["error_message"]
    assert not imported.exists() and not ran.exists()
    assert name not in sys.modules


def test_import_prefixes_allow_lazy_imports(config, side_effect_module):
    name, imported, ran = side_effect_module
    cogworker.configure(import_prefixes=[name])
    cogworker.enqueue(f"{name}.hello", "lazy")
    with RunningWorker():
        assert wait_for(lambda: ran.exists() and ran.read_text() == "lazy\n")
    assert imported.read_text() == "imported\n" and name in sys.modules


def test_prefixes_match_whole_components(tmp_path, monkeypatch):
    tag = secrets.token_hex(4)
    app, apple = f"app_{tag}", f"app_{tag}le"
    marks = tmp_path / "marks"
    for module in (app, apple):
        (tmp_path / f"{module}.py").write_text(
            f"import cogworker\nopen({str(marks)!r}, 'a').write({module!r} + '\\n')\n"
            "@cogworker.job\ndef job():\n    pass\n"
        )
    pkg = f"pkg_{tag}"
    (tmp_path / pkg / "tasks").mkdir(parents=True)
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "tasks" / "__init__.py").write_text("")
    (tmp_path / pkg / "tasks" / "mail.py").write_text("import cogworker\n@cogworker.job\ndef send():\n    pass\n")
    (tmp_path / pkg / "other.py").write_text(f"open({str(marks)!r}, 'a').write('other\\n')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert importable(app, [app]) and importable(f"{app}.x.y", [app])
        assert not importable(apple, [app]) and not importable(app, [f"{app}.x"])
        with pytest.raises(UnknownJob):
            resolve(f"{apple}.job", [app])
        assert apple not in sys.modules and not marks.exists()
        assert resolve(f"{app}.job", [app]).name == f"{app}.job"
        assert resolve(f"{pkg}.tasks.mail.send", [f"{pkg}.tasks"]).name == f"{pkg}.tasks.mail.send"
        with pytest.raises(UnknownJob):
            resolve(f"{pkg}.other.x", [f"{pkg}.tasks"])
        assert f"{pkg}.other" not in sys.modules
        assert marks.read_text() == f"{app}\n"
    finally:
        for module in [m for m in sys.modules if tag in m]:
            del sys.modules[module]


def test_import_prefixes_setting(monkeypatch, config):
    monkeypatch.setenv("COGWORKER_IMPORT_PREFIXES", "app.tasks, lib.jobs")
    assert config_module.Config(redis_url=config.redis_url).import_prefixes == ("app.tasks", "lib.jobs")
    assert cogworker.configure(import_prefixes=["x.y"]).import_prefixes == ("x.y",)
    for bad in (["app tasks"], [""], [1], "a..b", 5):
        with pytest.raises(ConfigurationError, match="import_prefixes"):
            cogworker.configure(import_prefixes=bad)


# -- the Redis password never shows ------------------------------------------------------------

BAD_URLS = [
    f"redis://:{SECRET}@localhost:notaport/0",  # bad port
    f"redis://:{SECRET}@localhost:99999/0",  # port out of range
    f"http://:{SECRET}@localhost:6379/0",  # bad scheme
    f"redis://:{SECRET}@/0",  # no host
    f"redis://user:{SECRET}@localhost:x/0",
    f"user:{SECRET}@localhost",  # no scheme at all
    f"redis://:{SECRET}@[::1/0",  # urlparse's own error
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_invalid_url_message_hides_the_password(url):
    with pytest.raises(ConfigurationError) as info:
        config_module.validate_redis_url(url)
    message = str(info.value)
    assert "invalid Redis URL" in message and SECRET not in message and "***" in message


@pytest.mark.parametrize(
    "url, shown",
    [
        (f"redis://:{SECRET}@host:6379/0", "redis://:***@host:6379/0"),
        (f"redis://user:{SECRET}@host/0", "redis://user:***@host/0"),
        (f"rediss://{SECRET}@host", "rediss://***@host"),
        (f"redis://:{SECRET[:3]}@{SECRET[3:]}@host/1", "redis://:***@host/1"),  # an unencoded @
        (f"unix://:{SECRET}@/tmp/redis.sock", "unix://:***@/tmp/redis.sock"),
        (f"redis://host/0?password={SECRET}&db=1", "redis://host/0?password=***&db=1"),
        ("redis://host:6379/0", "redis://host:6379/0"),
    ],
)
def test_redact_url(url, shown):
    assert config_module.redact_url(url) == shown


def test_config_repr_hides_the_password(config):
    cfg = config_module.Config(redis_url=f"redis://:{SECRET}@localhost:6379/0")
    assert SECRET not in repr(cfg) and "redis://:***@localhost:6379/0" in repr(cfg)


@pytest.mark.parametrize("entry", ["cogworker.worker", "cogworker.prefork.cli"])
def test_command_lines_hide_the_password_of_a_bad_url(entry):
    proc = subprocess.run(
        [sys.executable, "-m", entry, "--redis-url", BAD_URLS[0], "apps.core_jobs"],
        cwd=TESTS_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "invalid Redis URL" in proc.stderr and SECRET not in proc.stderr + proc.stdout


def test_connection_failure_logs_hide_the_password(own_redis):
    """Wrong password (AUTH refused) and then no server at all: the runner logs both
    and never the password."""
    own_redis.client().config_set("requirepass", "the-right-one")
    url = f"redis://:{SECRET}@127.0.0.1:{own_redis.port}/0"
    env = dict(os.environ, COGWORKER_REDIS_URL=url, PYTHONUNBUFFERED="1")
    env.pop("REDIS_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker.worker", "apps.core_jobs"],
        cwd=TESTS_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        time.sleep(3)
        own_redis.stop()
        time.sleep(2)
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
    assert "Redis unavailable" in out and "AuthenticationError" in out, out
    assert f"(Redis redis://:***@127.0.0.1:{own_redis.port}/0)" in out
    assert SECRET not in out


# -- no command keeps the password in its command line (`ps`, /proc/<pid>/cmdline) -----------

COGWORKER = os.path.join(os.path.dirname(sys.executable), "cogworker")
COMMANDS = [
    [COGWORKER, "web"],
    [COGWORKER, "stats"],
    [COGWORKER, "queues"],
    [COGWORKER, "queue", "pause", "default"],
    [COGWORKER, "jobs", "dead"],
    [COGWORKER, "job", "j1"],
    [COGWORKER, "retry", "j1"],
    [COGWORKER, "delete", "j1", "--yes"],
    [COGWORKER, "processes"],
    [COGWORKER, "periodic", "list"],
    [COGWORKER, "health"],
    [COGWORKER, "worker", "apps.core_jobs"],
    [sys.executable, "-m", "cogworker", "stats"],
    [sys.executable, "-m", "cogworker.worker", "apps.core_jobs"],
    [sys.executable, "-m", "cogworker.prefork.cli", "apps.core_jobs", "--procs", "1"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(w for w in c[1:] if "/" not in w))
@pytest.mark.parametrize("style", ["separate", "equals"])
def test_no_command_keeps_the_password_in_its_command_line(command, style):
    """Each command against a Redis that accepts the connection and never answers (a
    listening socket nobody reads): it stays up, waiting, and its cmdline is read then."""
    import socket

    with socket.socket() as black_hole:
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(64)
        url = f"redis://:{SECRET}@127.0.0.1:{black_hole.getsockname()[1]}/0"
        option = ["--redis-url", url] if style == "separate" else [f"--redis-url={url}"]
        argv = [*command, *option]
        proc = subprocess.Popen(argv, cwd=TESTS_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            cmdline, deadline = b"", time.time() + 30
            while time.time() < deadline and proc.poll() is None:
                with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                    cmdline = f.read().rstrip(b"\0") or cmdline
                if b"***" in cmdline or b"cogworker: " in cmdline:  # the command set its title
                    break
                time.sleep(0.05)
            assert SECRET.encode() not in cmdline, cmdline
            assert proc.poll() is None, "the command should still be waiting for Redis"
        finally:
            proc.kill()
            proc.wait(10)
