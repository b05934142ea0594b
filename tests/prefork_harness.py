"""Runs real ``cogworker-prefork`` masters as subprocesses, each in its own session
(process group), and reads their children through psutil."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

TESTS = Path(__file__).parent


def wait_for(predicate, timeout=15.0, interval=0.02, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Master:
    def __init__(self, redis_url: str, module: str = "apps.pf", procs: int | None = 2, args=(), env=None, wrap=()):
        """``procs`` None: no --procs (its default decides); ``wrap``: a command in front (taskset …)."""
        self.log_path = TESTS / f".master-{os.getpid()}-{time.time_ns()}.log"
        self.log = open(self.log_path, "wb")
        full_env = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
        full_env.pop("COGWORKER_REDIS_URL", None)
        self.cmd = [
            *wrap,
            sys.executable,
            "-m",
            "cogworker.prefork.cli",
            *(["--procs", str(procs)] if procs is not None else []),
            "--redis-url",
            redis_url,
            *args,
            module,
        ]
        self.proc = subprocess.Popen(
            self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=full_env, cwd=str(TESTS), start_new_session=True
        )
        self.procs = procs

    @property
    def pid(self) -> int:
        return self.proc.pid

    def children(self) -> list[psutil.Process]:
        try:
            found = psutil.Process(self.pid).children()
        except psutil.NoSuchProcess:
            return []
        live = []
        for child in found:  # one may exit while we look: skip it, don't lose the rest
            try:
                # Only the master's children proper: the boot runs a short-lived process
                # too (croniter's import runs `file` through platform.architecture()),
                # seen as the booting master's fork, with no command line while it execs,
                # then as `file`. Nor the renderer of a /metrics answer (metrics_render).
                title = child.cmdline()[:1]
                if (
                    child.status() != psutil.STATUS_ZOMBIE
                    and title
                    and title != ["file"]
                    and "[booting]" not in title[0]
                    and "metrics renderer" not in title[0]
                ):
                    live.append(child)
            except (psutil.NoSuchProcess, psutil.AccessDenied, IndexError):
                pass
        return live

    def child_pids(self) -> set[int]:
        return {c.pid for c in self.children()}

    def wait_children(self, n: int | None = None, timeout: float = 15.0) -> set[int]:
        n = self.procs if n is None else n
        wait_for(lambda: len(self.children()) == n, timeout, what=f"{n} children")
        return self.child_pids()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def signal_group(self, sig: int) -> None:
        os.killpg(self.pid, sig)

    def wait_exit(self, timeout: float = 40.0) -> int:
        return self.proc.wait(timeout)

    def output(self) -> str:
        if not self.log.closed:  # (a stopped master's log is closed, and complete)
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.alive():
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        else:
            try:  # children the master left behind, if any
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.log.close()
        self.log_path.unlink(missing_ok=True)


def run_cli(args, timeout=30.0, env=None):
    full_env = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "cogworker.prefork.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=str(TESTS),
    )


def lrange(config, key):
    return [x.decode() for x in config.redis().lrange(key, 0, -1)]


def in_progress_total(config):
    r = config.redis()
    return sum(r.llen(k) for k in r.scan_iter(match=config.keys.in_progress_prefix + "*"))


def queue_len(config, name="default"):
    return config.redis().llen(config.keys.queue(name))
