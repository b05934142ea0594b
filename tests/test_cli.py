"""The ``cogworker`` command, run as a subprocess (``python -m cogworker ...``) against a
real redis-server with a real worker (``cogworker worker apps.cli_jobs``): each subcommand
in its human and ``--json`` form, each exit code (0 done, 1 not found, 2 usage, 3 Redis
unreachable), one line on stderr and never a traceback or a password."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from core_util import wait_for
from redis_server import RedisServer, free_port
from worker_process import Process

import cogworker
from cogworker import api
from cogworker.client.jobs import by_name

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
CLI_GUIDE = (Path(TESTS_DIR).parent / "docs" / "guides" / "cli.md").read_text()


def cli(*args: str, url: str | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": TESTS_DIR}
    env.pop("REDIS_URL", None)
    env.pop("COGWORKER_REDIS_URL", None)
    if url is not None:
        env["COGWORKER_REDIS_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=TESTS_DIR,
        env=env,
        input=stdin,
    )


def done(result: subprocess.CompletedProcess[str]) -> str:
    """Exit 0, nothing on stderr, every line within 100 columns (but a job's traceback,
    shown as Python printed it); the output."""
    assert result.returncode == 0, (result.returncode, result.stderr, result.stdout)
    assert result.stderr == ""
    for line in result.stdout.split("\ntraceback\n", 1)[0].splitlines():
        assert len(line) <= 100, line
    return result.stdout


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, (result.returncode, result.stderr)
    return json.loads(result.stdout)  # one document, nothing else on stdout


def failed(result: subprocess.CompletedProcess[str], code: int) -> str:
    """Exit ``code``, one line on stderr (no traceback); the line."""
    assert result.returncode == code, (result.returncode, result.stderr, result.stdout)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cogworker"), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def system():
    """A redis-server, a worker, and jobs that succeeded (3 adds), died (2 charges),
    wait in retry (1 sync, an hour's backoff) and are scheduled (1 later, in an hour)."""
    server = RedisServer().start()
    worker = Process("cogworker", "worker", "apps.cli_jobs", url=server.url)
    cogworker.config._config = None
    config = cogworker.configure(redis_url=server.url, status=True, history=True)
    try:
        jids = SimpleNamespace(
            add=[by_name("apps.cli_jobs.add").enqueue(i, i) for i in range(3)],
            # Enqueued by name, so with the options the app gives them (this process hasn't imported it).
            charge=[by_name("apps.cli_jobs.charge", retry=0).enqueue(order) for order in (17, 18)],
            sync=by_name("apps.cli_jobs.sync", retry=5).enqueue("acme"),
            later=by_name("apps.cli_jobs.later").enqueue_in(3600, "x"),
        )
        client = server.client()
        settled = wait_for(
            lambda: (
                client.zcard(config.keys.dead) == 2
                and client.zcard(config.keys.retry) == 1
                and client.llen(config.keys.queue("default")) == 0
                and api.stats().processed >= 3
                and api.stats().failed >= 3
            ),
            30,
        )
        assert settled, worker.output()
        yield SimpleNamespace(server=server, url=server.url, worker=worker, jids=jids, config=config)
    finally:
        worker.stop()
        server.cleanup()


# -- no Redis needed ------------------------------------------------------------------------------


def test_version():
    assert done(cli("--version")).strip() == f"cogworker {cogworker.__version__}"


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["nonsense-command"],
        ["jobs", "dead", "--limit", "-1"],
        ["jobs", "dead", "--limit", "0"],
        ["jobs", "everything"],
        ["stats", "--namespace", "a b"],
        ["queues", "--redis-url", "redis://localhost:6379/abc"],
        ["retry"],
        ["retry", "--all"],
        ["delete", "abc", "--all", "--from", "dead"],
        ["retry", "abc", "--class", "x"],
        ["periodic", "disable"],
        ["queue", "pause"],
    ],
)
def test_usage_errors_exit_2_with_one_line(args):
    line = failed(cli(*args), 2)
    assert "error" in line


def test_the_old_cogworker_module_form_still_runs_the_worker_with_a_deprecation_line():
    # `cogworker MODULE ...` is the runner's command line, parsed by the runner itself.
    result = cli("apps.cli_jobs", "--version")
    assert result.returncode == 0 and result.stdout.strip() == f"cogworker {cogworker.__version__}"
    assert result.stderr.strip() == (
        "cogworker: `cogworker apps.cli_jobs` is deprecated and will stop working in "
        "the next release; use `cogworker worker apps.cli_jobs`"
    )
    assert "deprecated" in cli("-q", "default", "apps.cli_jobs", "--version").stderr


def test_worker_subcommand_is_the_runner():
    result = cli("worker", "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: cogworker worker")
    assert "--no-cron" in result.stdout
    failed(cli("worker", "apps.cli_jobs", "--namespace", "a b"), 2)


@pytest.mark.parametrize(
    "args",
    [
        ["stats"],
        ["queues"],
        ["queue", "pause", "default"],
        ["jobs", "dead"],
        ["job", "abc"],
        ["retry", "abc"],
        ["delete", "--all", "--from", "dead", "--yes"],
        ["processes"],
        ["periodic", "list"],
        ["periodic", "run-now", "x"],
    ],
)
def test_redis_unreachable_exits_3_without_the_password(args):
    url = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"
    for extra in ([], ["--json"]):
        result = cli(*args, *extra, url=url)
        line = failed(result, 3)
        assert "unreachable" in line and "s3cret-pw" not in result.stderr + result.stdout
        assert "redis://:***@127.0.0.1" in line


# -- against the running system -------------------------------------------------------------------


def test_stats(system):
    out = done(cli("stats", url=system.url))
    assert re.search(r"^dead\s+2$", out, re.M) and re.search(r"^retry\s+1$", out, re.M)
    assert re.search(r"^scheduled\s+1$", out, re.M) and "QUEUE" in out and "IDENTITY" in out
    data = as_json(cli("stats", "--json", url=system.url))
    assert data["stats"]["dead_size"] == 2 and data["stats"]["retry_size"] == 1
    assert data["stats"]["processed"] >= 3 and data["stats"]["failed"] >= 3
    assert any(p["kind"] == "worker" for p in data["processes"])
    assert "default" in [q["name"] for q in data["queues"]]


def test_queues_and_pause_resume(system):
    out = done(cli("queues", url=system.url))
    assert out.splitlines()[0].split() == ["QUEUE", "SIZE", "LATENCY", "PAUSED"]
    try:
        assert done(cli("queue", "pause", "default", url=system.url)).strip() == "queue default: paused (fleet-wide)"
        rows = {r["name"]: r for r in as_json(cli("queues", "--json", url=system.url))["queues"]}
        assert rows["default"]["paused"] is True
        assert re.search(r"^default\s+\d+\s+\S+\s+yes$", done(cli("queues", url=system.url)), re.M)
    finally:
        assert as_json(cli("queue", "resume", "default", "--json", url=system.url)) == {
            "queue": "default",
            "paused": False,
        }
    line = failed(cli("queue", "pause", "no-such-queue", url=system.url), 1)
    assert "no queue named 'no-such-queue'" in line


def test_jobs_lists_each_set(system):
    out = done(cli("jobs", "dead", url=system.url))
    assert out.splitlines()[0].split()[:3] == ["JID", "CLASS", "QUEUE"]
    for jid in system.jids.charge:
        assert jid in out
    assert "apps.cli_jobs.charge" in out and "ValueError: card" in out and " ago " in out
    dead = as_json(cli("jobs", "dead", "--json", url=system.url))
    assert dead["size"] == 2 and {j["jid"] for j in dead["jobs"]} == set(system.jids.charge)
    assert {j["error_message"] for j in dead["jobs"]} == {"card declined for order 17", "card declined for order 18"}
    assert system.jids.sync in done(cli("jobs", "retry", url=system.url))
    assert system.jids.later in done(cli("jobs", "scheduled", url=system.url))
    one = as_json(cli("jobs", "dead", "--limit", "1", "--json", url=system.url))
    assert len(one["jobs"]) == 1 and one["size"] == 2
    assert "(1 of 2; --limit N for more)" in done(cli("jobs", "dead", "--limit", "1", url=system.url))
    assert as_json(cli("jobs", "dead", "--class", "apps.cli_jobs.add", "--json", url=system.url))["jobs"] == []
    assert len(as_json(cli("jobs", "dead", "--error", "ValueError", "--json", url=system.url))["jobs"]) == 2
    assert "no entries match" in done(cli("jobs", "dead", "--error", "KeyError", url=system.url))


def test_job_shows_where_payload_status_history_traceback(system):
    jid = system.jids.charge[0]
    out = done(cli("job", jid, url=system.url))
    assert re.search(r"^where\s+dead$", out, re.M) and re.search(r"^status\s+dead", out, re.M)
    assert "apps.cli_jobs.charge" in out and "history" in out and "traceback" in out
    assert "ValueError: card declined for order 17" in out and "raise ValueError" in out
    data = as_json(cli("job", jid, "--json", url=system.url))
    assert data["where"] == "dead" and data["entry"]["jid"] == jid
    assert data["history"] and data["history"][-1]["outcome"] == "failed"
    succeeded = as_json(cli("job", system.jids.add[0], "--json", url=system.url))
    assert succeeded["where"] is None and succeeded["history"][-1]["outcome"] == "succeeded"
    line = failed(cli("job", "0123456789abcdef01234567", url=system.url), 1)
    assert "job '0123456789abcdef01234567': not retained" in line


def test_retry_and_delete_by_jid(system):
    jid = system.jids.charge[1]
    assert done(cli("retry", jid, url=system.url)).strip() == f"{jid}: enqueued now"
    # It runs again (and dies again): a second attempt in its history.
    assert wait_for(lambda: len(as_json(cli("job", jid, "--json", url=system.url))["history"]) == 2, 20)
    assert wait_for(lambda: as_json(cli("job", jid, "--json", url=system.url))["where"] == "dead", 20)
    later = by_name("apps.cli_jobs.later").enqueue_in(3600, "to delete")
    assert as_json(cli("delete", later, "--json", url=system.url)) == {"delete": [later], "not_found": []}
    assert later not in cli("jobs", "scheduled", url=system.url).stdout
    result = cli("retry", "0123456789abcdef01234567", "--json", url=system.url)
    assert json.loads(result.stdout) == {"retry": [], "not_found": ["0123456789abcdef01234567"]}
    assert "not found in retry, dead or scheduled: 0123456789abcdef01234567" in failed(result, 1)


def test_bulk_without_a_terminal_needs_yes(system):
    targets = [by_name("apps.cli_jobs.bulk_target").enqueue_in(3600, i) for i in range(3)]
    line = failed(
        cli("delete", "--all", "--from", "scheduled", "--class", "apps.cli_jobs.bulk_target", url=system.url), 2
    )
    assert "refused without --yes" in line
    assert all(t in cli("jobs", "scheduled", "--limit", "100", url=system.url).stdout for t in targets)
    data = as_json(
        cli(
            "delete",
            "--all",
            "--from",
            "scheduled",
            "--class",
            "apps.cli_jobs.bulk_target",
            "--yes",
            "--json",
            url=system.url,
        )
    )
    assert data == {"delete": 3, "from": "scheduled", "class": "apps.cli_jobs.bulk_target"}
    remaining = cli("jobs", "scheduled", "--limit", "100", url=system.url).stdout
    assert not any(t in remaining for t in targets) and system.jids.later in remaining


def on_terminal(args: list[str], url: str, answer: str) -> tuple[int, str, str]:
    """Runs the command with stdin and stderr on a pseudo-terminal (stdout a pipe); answers
    the confirmation with ``answer``. Returns the exit code, stdout and the terminal's text."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": TESTS_DIR, "COGWORKER_REDIS_URL": url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker", *args],
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        cwd=TESTS_DIR,
        env=env,
        text=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 1024)
            except OSError:
                break  # the child closed the terminal
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(master, answer.encode() + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    out = proc.stdout.read() if proc.stdout else ""
    code = proc.wait(10)
    os.close(master)
    return code, out, seen.decode(errors="replace")


def test_bulk_on_a_terminal_asks_and_shows_progress(system):
    targets = [by_name("apps.cli_jobs.bulk_target").enqueue_in(3600, i) for i in range(4)]
    args = ["delete", "--all", "--from", "scheduled", "--class", "apps.cli_jobs.bulk_target"]
    code, out, terminal = on_terminal(args, system.url, "n")
    assert code == 2 and "cancelled (nothing changed)" in terminal
    assert all(t in cli("jobs", "scheduled", "--limit", "100", url=system.url).stdout for t in targets)
    code, out, terminal = on_terminal(args, system.url, "y")
    assert code == 0, terminal
    assert "Delete all scheduled entries of class apps.cli_jobs.bulk_target" in terminal
    assert "\rdelete scheduled: 4" in terminal  # progress, on the terminal only
    assert out.strip() == "delete: 4 scheduled entries of class apps.cli_jobs.bulk_target deleted"


def test_processes(system):
    out = done(cli("processes", url=system.url))
    assert out.splitlines()[0].split()[:4] == ["IDENTITY", "KIND", "STATE", "QUEUES"] and " worker " in out
    data = as_json(cli("processes", "--json", url=system.url))
    (worker,) = [p for p in data["processes"] if p["kind"] == "worker"]
    assert worker["pid"] == system.worker.proc.pid


def test_periodic(system):
    client = system.server.client()
    last_slot = system.config.keys.periodic_last_slot("nightly-report")
    assert wait_for(lambda: client.hexists(system.config.keys.periodic_schedule, "nightly-report"), 10)
    out = done(cli("periodic", "list", url=system.url))
    assert re.search(r"^nightly-report\s+0 3 \* \* \*\s+apps\.cli_jobs\.report\s+reports\s.*\syes$", out, re.M)
    try:
        assert "disabled" in done(cli("periodic", "disable", "nightly-report", url=system.url))
        (entry,) = as_json(cli("periodic", "list", "--json", url=system.url))["entries"]
        assert entry["pjid"] == "nightly-report" and entry["enabled"] is False
    finally:
        assert as_json(cli("periodic", "enable", "nightly-report", "--json", url=system.url))["enabled"] is True
    before = client.get(last_slot)
    data = as_json(cli("periodic", "run-now", "nightly-report", "--json", url=system.url))
    assert data["queue"] == "reports" and data["jid"]
    # It runs (the worker serves the queues the app declares) and fills no slot.
    ran = lambda: json.loads(cli("job", data["jid"], "--json", url=system.url).stdout or "{}").get("history")  # noqa: E731
    assert wait_for(ran, 20)
    assert client.get(last_slot) == before
    assert "(schedule unchanged)" in done(cli("periodic", "run-now", "nightly-report", url=system.url))
    assert "no periodic entry named 'nightly'" in failed(cli("periodic", "disable", "nightly", url=system.url), 1)


def test_a_corrupted_entry_is_shown_raw(system):
    client = system.server.client()
    client.zadd("corrupt:dead", {b"{not json at all": time.time()})
    out = done(cli("jobs", "dead", "--namespace", "corrupt", url=system.url))
    assert "(raw)" in out and "{not json at all" in out
    (entry,) = as_json(cli("jobs", "dead", "--namespace", "corrupt", "--json", url=system.url))["jobs"]
    assert "{not json at all" in json.dumps(entry)


def test_a_corrupted_entry_with_a_jid_is_shown_raw_refused_a_retry_and_deleted(system):
    jid = "deadbeefdeadbeefdeadbeef"
    raw = b'{"jid":"' + jid.encode() + b'","class":"apps.cli_jobs.add","args":[1,'  # cut short
    system.server.client().zadd("corrupt2:dead", {raw: time.time()})
    ns = ["--namespace", "corrupt2"]
    out = done(cli("job", jid, *ns, url=system.url))
    assert "entry (not a readable job, shown raw)" in out and raw.decode() in out
    assert as_json(cli("job", jid, *ns, "--json", url=system.url))["entry"]["raw"] == raw.decode()
    failed(cli("retry", jid, *ns, url=system.url), 1)
    assert system.server.client().zcard("corrupt2:dead") == 1  # the refused retry changed nothing
    assert done(cli("delete", jid, *ns, url=system.url)).strip() == f"{jid}: deleted"
    assert system.server.client().zcard("corrupt2:dead") == 0


def test_a_key_of_the_wrong_type_is_one_line(system):
    system.server.client().set("wrongtype:dead", "a string")
    line = failed(cli("jobs", "dead", "--namespace", "wrongtype", url=system.url), 1)
    assert "wrong" in line.lower()


# -- the CLI guide's transcript -----------------------------------------------------------------------


def guide_commands() -> list[str]:
    return [line[2:].strip() for line in CLI_GUIDE.splitlines() if line.startswith("$ cogworker ")]


def test_the_guides_commands_run(system):
    commands = guide_commands()
    assert len(commands) >= 8
    dead_jid = system.jids.charge[0]
    for command in commands:
        words = [dead_jid if re.fullmatch(r"[0-9a-f]{24}", w) else w for w in command.split()[1:]]
        result = cli(*words, url=system.url)
        assert result.returncode == 0, (command, result.stderr)
        assert "Traceback" not in result.stderr


def test_bulk_on_a_whole_set_shows_progress_per_chunk(system):
    """Without --class the API works through the set in chunks; each chunk is shown."""
    client = system.server.client()
    dead, now = system.config.keys.dead, time.time()  # recent: trimming by age keeps them
    entry = '{{"jid":"bulk{}","class":"apps.cli_jobs.bulk_target","args":[]}}'
    client.zadd(dead, {entry.format(i): now - i for i in range(1200)})
    total = client.zcard(dead)  # the fixture's two dead jobs too
    code, out, terminal = on_terminal(["delete", "--all", "--from", "dead"], system.url, "y")
    assert code == 0, terminal
    assert f"\rdelete dead: 500/{total}\rdelete dead: 1000/{total}\rdelete dead: {total}/{total}\r\n" in terminal
    assert out.strip() == f"delete: {total} dead entries deleted" and client.zcard(dead) == 0
