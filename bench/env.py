"""Where things run: the peers' isolated venv, cogworker's interpreter, versions.

Standard library only: this runs before the orchestrator knows it can import redis.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
APPS = BENCH / "apps"
PEERS_VENV = BENCH / ".venv-peers"
PEERS_BIN = PEERS_VENV / "bin"
PEERS_PYTHON = PEERS_BIN / "python"
REQUIREMENTS = BENCH / "requirements-peers.txt"
STAMP = PEERS_VENV / ".requirements.sha256"


def ensure_peers_venv():
    """Create bench/.venv-peers and install the pinned peers, once per requirements change."""
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if PEERS_PYTHON.exists() and STAMP.exists() and STAMP.read_text().strip() == want:
        return
    print(f"bench: installing the peers into {PEERS_VENV.relative_to(REPO)} ...", flush=True)
    if not PEERS_PYTHON.exists():
        # The launcher may itself be a venv's python: venv then builds on its base interpreter.
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run(
        [str(PEERS_PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
        check=True,
    )
    STAMP.write_text(want + "\n")


PROJECT_PYTHON = REPO / ".venv" / "bin" / "python"


def ensure_project_venv():
    """The project's own venv, made as the README makes it (`python3 -m venv .venv` and
    `pip install -e .`), for a fresh clone where nothing can import cogworker yet."""
    print("bench: installing cogworker into .venv (the README's setup) ...", flush=True)
    if not PROJECT_PYTHON.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(REPO / ".venv")], check=True)
    subprocess.run(
        [str(PROJECT_PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-e", str(REPO)],
        check=True,
    )
    return str(PROJECT_PYTHON)


def worker_env(redis_url, extra=None):
    """The environment of every process the bench starts (workers and drivers)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env.update(
        PYTHONPATH=f"{APPS}{os.pathsep}{REPO}",
        BENCH_REDIS_URL=redis_url,
        COGWORKER_REDIS_URL=redis_url,
        PYTHONUNBUFFERED="1",
    )
    env.pop("BENCH_BALLAST", None)
    env.update(extra or {})
    return env


def find_cogworker_python(candidates):
    """The first interpreter that can import cogworker's prefork CLI from this checkout."""
    errors = []
    for py in candidates:
        if not py or not Path(py).exists():
            continue
        p = subprocess.run(
            [py, "-c", "import cogworker.prefork.cli"],
            cwd=REPO,
            env=worker_env("redis://127.0.0.1:1/0"),
            capture_output=True,
            text=True,
        )
        if p.returncode == 0:
            return py, None
        errors.append(f"{py}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return None, "; ".join(errors) or "no interpreter found"


_VERSIONS = """
import importlib.metadata as m, json, sys
out = {"python": sys.version.split()[0]}
for name in sys.argv[1:]:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


def versions(python, names):
    p = subprocess.run(
        [python, "-c", _VERSIONS, *names],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=worker_env("redis://127.0.0.1:1/0"),
    )
    return json.loads(p.stdout) if p.returncode == 0 else {}


def cogworker_version(python):
    code = "import cogworker; print(getattr(cogworker, '__version__', '') or 'checkout')"
    p = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, cwd=REPO, env=worker_env("redis://127.0.0.1:1/0")
    )
    return p.stdout.strip() if p.returncode == 0 else None


def git_commit():
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    return p.stdout.strip() if p.returncode == 0 else None
