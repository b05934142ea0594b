"""Jobs for the priority tests (tests/test_priorities.py): each run is a line of $PF_LOG
(apps.pf_log), so the order the children ran them in is the file's order."""

from __future__ import annotations

import os
import signal

import cogworker
import cogworker.api
from apps.pf_log import log
from cogworker.config import get_config

# A killed child's jobs are taken over at once by its master; a dead host's soon.
cogworker.configure(heartbeat_interval=0.3, recovery_interval=0.5)


@cogworker.job
def ran(tag):
    log("ran", tag)


@cogworker.job(priority=50)
def urgent(tag):
    """Declared with a priority: every enqueue of it is fetched before plain jobs."""
    log("ran", tag)


@cogworker.job(priority=10)
def die_once(tag):
    """Its child dies (SIGKILL) on its first run; it runs to its end on the next."""
    if get_config().redis().set(f"test:died:{tag}", 1, nx=True):
        # Its queue paused first, by the job itself: the master's next child must not take
        # the job back before the test looks at where it was put.
        cogworker.api.Queue("default").pause()
        log("died", tag)
        os.kill(os.getpid(), signal.SIGKILL)
    log("ran", tag)
