"""Jobs for the fault tests. Each run is logged to the file named by $PF_LOG
(apps.pf_log), not to Redis: these tests pause Redis."""

from __future__ import annotations

import os
import signal
import time

import cogworker
from apps.pf_log import events as events  # the tests read the log through this module
from apps.pf_log import log


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
