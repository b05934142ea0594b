"""The wheel smoke test (.ci/wheel-smoke runs it with a fresh venv's python, the built
wheel installed, not editable, from a folder outside the source tree).

    python wheel_smoke.py SOURCE_TREE

Checks that the installed package is the wheel's (not the source tree), that it carries
every Lua script, template and static file of the source tree and py.typed, that both
console scripts run and print the version of cogworker/version.py, and that a real
prefork worker from the wheel runs a job on a private redis-server (which loads the Lua
scripts from the installed files). Exits 1 with one line per failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGE_DATA = ("transitions/*.lua", "web/templates/*.html", "web/static/*", "py.typed")


def expected_version(tree: Path) -> str:
    scope: dict[str, str] = {}
    exec((tree / "cogworker" / "version.py").read_text(), scope)
    return scope["__version__"]


def check_files(tree: Path, installed: Path) -> list[str]:
    problems = []
    for pattern in PACKAGE_DATA:
        wanted = sorted(p.relative_to(tree / "cogworker") for p in (tree / "cogworker").glob(pattern))
        if not wanted:
            problems.append(f"the source tree has no {pattern}")
        problems += [f"the wheel lacks cogworker/{rel}" for rel in wanted if not (installed / rel).is_file()]
    return problems


def check_scripts(bindir: Path, version: str) -> list[str]:
    problems = []
    for script in ("cogworker", "cogworker-prefork"):
        run = subprocess.run([str(bindir / script), "--version"], capture_output=True, text=True, timeout=60)
        if (run.returncode, run.stdout.strip()) != (0, f"{script} {version}"):
            problems.append(f"{script} --version: {run.returncode} {run.stdout.strip()!r} {run.stderr.strip()!r}")
    return problems


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


APP = """
import os, cogworker

@cogworker.job
def touch(path: str) -> None:
    with open(path, "w") as f:
        f.write("ran")
"""


def check_worker(bindir: Path, work: Path) -> list[str]:
    """A job enqueued with the installed package, run by cogworker-prefork from the wheel."""
    port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(work)],
        stdout=subprocess.DEVNULL,
    )
    (work / "smoke_app.py").write_text(APP)
    env = {**os.environ, "PYTHONPATH": str(work), "COGWORKER_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    done = work / "done"
    enqueue = f"import smoke_app; smoke_app.touch.enqueue({str(done)!r})"
    worker = None
    try:
        for _ in range(100):  # redis-server up
            if subprocess.run([sys.executable, "-c", enqueue], env=env, capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        worker = subprocess.Popen(
            [str(bindir / "cogworker-prefork"), "--procs", "1", "smoke_app"],
            env=env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not done.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if not done.exists():
            return ["cogworker-prefork from the wheel did not run the job"]
        return []
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=40)
        redis.terminate()
        redis.wait(timeout=10)


def main() -> int:
    tree = Path(sys.argv[1]).resolve()
    import cogworker

    installed = Path(cogworker.__file__).resolve().parent
    if tree in installed.parents:
        print(f"wheel smoke: cogworker was imported from the source tree ({installed})")
        return 1
    bindir = Path(sys.executable).parent
    version = expected_version(tree)
    problems = [] if cogworker.__version__ == version else [f"__version__ {cogworker.__version__} != {version}"]
    problems += check_files(tree, installed) + check_scripts(bindir, version)
    work = Path(tempfile.mkdtemp(prefix="cogworker-wheel-"))
    try:
        problems += check_worker(bindir, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for problem in problems:
        print(f"wheel smoke: {problem}")
    if not problems:
        print(f"wheel smoke: cogworker {version} from {installed}: files, both scripts and a job run: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
