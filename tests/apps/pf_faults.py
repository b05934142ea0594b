"""Jobs for the fault tests. Each run is logged to the file named by $PF_LOG (one
``os.write`` of one line, O_APPEND), not to Redis: these tests pause Redis."""

from __future__ import annotations

import os
import signal
import time

import cogworker


def log(event: str, tag: str) -> None:
    path = os.environ.get("PF_LOG")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {tag} {os.getpid()} {time.time()}\n".encode())
    finally:
        os.close(fd)


def events(path: str) -> list[tuple[str, str, int, float]]:
    """The log as [(event, tag, pid, time)]."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        event, tag, pid, at = line.split()
        out.append((event, tag, int(pid), float(at)))
    return out


@cogworker.job
def logged(tag, seconds=0.0):
    log("start", tag)
    if seconds:
        time.sleep(seconds)
    log("end", tag)


@cogworker.job
def exit_with(tag, code):
    """Ends its own process with ``os._exit(code)``: even 0 is a crash of this job."""
    log("start", tag)
    os._exit(code)


@cogworker.job
def ignore_term(tag, seconds):
    """Makes its child deaf to the master's graceful TERM, then runs long."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    log("start", tag)
    time.sleep(seconds)
    log("end", tag)


@cogworker.job
def forker(path):
    """Forks; the fork writes its own process title to ``path`` and exits."""
    pid = os.fork()
    if pid == 0:
        try:
            with open("/proc/self/cmdline", "rb") as f:
                title = f.read().replace(b"\0", b" ").strip()
            with open(path, "wb") as f:
                f.write(title)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    log("end", "forker")
