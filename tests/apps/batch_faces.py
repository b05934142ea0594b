"""Jobs for the batch faces' tests (the Batches page, `cogworker batches`/`batch`,
/metrics): plain work, a job that dies (apps.batchjobs' own), one that reports its progress
and holds at 50 % until the file named by its argument exists, and a callback. Logged to
$PF_LOG (apps.pf_log)."""

from __future__ import annotations

import os
import time

import cogworker
from apps.batchjobs import doomed as doomed  # the batch tests' dying job: one definition
from apps.pf_log import log

cogworker.configure(heartbeat_interval=0.3)


@cogworker.job
def work(tag):
    log("start", tag)
    log("end", tag)
    return tag


@cogworker.job
def halfway(tag, go_file):
    """Reports 50 %, then holds until ``go_file`` exists (a test reads its progress meanwhile)."""
    log("start", tag)
    job = cogworker.current_job()
    job.progress(0.5, "half of the rows")
    deadline = time.monotonic() + 120
    while not os.path.exists(go_file) and time.monotonic() < deadline:
        time.sleep(0.05)
    job.progress(1.0, "done")
    log("end", tag)


@cogworker.job
def callback(name):
    log("cb", name)
