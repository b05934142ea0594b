"""Jobs for the tests of a workflow cancelled by its id (tests/test_workflow_cancel_by_id.py):
a step that logs its start and end to the file named by $PF_LOG (apps.pf_log), from the
child that runs it, and sleeps without polling its cancel (so it ends when its sleep does)."""

from __future__ import annotations

import time

import cogworker
from apps.pf_log import log

# Beats every 0.3 s: a running job hears of its cancel within about that.
cogworker.configure(heartbeat_interval=0.3)


@cogworker.job(results=True)
def step(tag, seconds=0.0):
    log("start", tag)
    if seconds:
        time.sleep(seconds)
    log("end", tag)
    return tag
