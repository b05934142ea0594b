"""A worker command (``cogworker.worker`` or ``cogworker.prefork.cli``) as a subprocess in
its own session, its output in a file; stopped with TERM (then KILL if it must be)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


class Process:
    """A worker command as a subprocess, its output in a file."""

    def __init__(self, *args: str, url: str | None = None, env: dict[str, str] | None = None) -> None:
        """``url``: given as $COGWORKER_REDIS_URL; ``env``: more variables (REDIS_URL, say)."""
        env = {**os.environ, "PYTHONPATH": TESTS_DIR, "PYTHONUNBUFFERED": "1", **(env or {})}
        if url is not None:
            env["COGWORKER_REDIS_URL"] = url
            env.pop("REDIS_URL", None)
        elif "REDIS_URL" in env:
            env.pop("COGWORKER_REDIS_URL", None)
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=TESTS_DIR,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(40)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.log.close()
