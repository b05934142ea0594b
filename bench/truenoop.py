"""The true no-op workload: jobs whose body makes no Redis call and does no work.

Each job appends one byte to a file of its own process (bench_body.truenoop); the
harness counts jobs by the files' sizes (no reading, no Redis), so what Redis sees is
only the system's own traffic: its fetches, acks and bookkeeping. Reported: jobs/s
first to last completion, steady jobs/s (10% to 90% of the jobs), and Redis's CPU and
commands per job over that steady window (bench/rcpu.py).
"""

import os
import tempfile
import time

import redis

from bench import rcpu
from bench.fleet import Fleet, FleetError
from bench.redis_server import RedisServer
from bench.workloads import STALL_TIMEOUT, START_TIMEOUT, STOP

FILL_SECONDS = 120.0  # enqueueing time allowed to make the jobs, once per client
POLL = 0.002  # seconds between counts: a few stat(2) calls, ~1% of a 30,000 jobs/s run's span


def ticks(directory):
    """Jobs done so far: one byte each, in one file per worker process."""
    total = 0
    with os.scandir(directory) as entries:
        for e in entries:
            total += e.stat().st_size
    return total


def truenoop(ctx, system, procs, payload, n, cap):
    """n true no-op jobs (one `payload`-byte argument) enqueued before the workers start;
    cut `cap` seconds after the first completion."""
    with RedisServer() as rs, tempfile.TemporaryDirectory(prefix="bench-ticks-") as directory:
        r = redis.Redis.from_url(rs.url)
        # A slow client (Celery's, on a loaded machine) fills for FILL_SECONDS at most: the
        # run is cut `cap` seconds after its first job anyway.
        n = ctx.prefill.restore(ctx, system, r, "truenoop", ["x" * payload], n, max_seconds=FILL_SECONDS)
        fleet = Fleet(
            ctx, system, procs, rs.url, extra_env={"BENCH_MARKS_DIR": directory}, log_name=f"truenoop-{procs}p"
        )
        try:
            start = (time.monotonic(), 0, rcpu.snapshot(r))
            fleet.start()
            run = _watch(r, directory, fleet, n, cap, start)
        finally:
            fleet.stop()
    return run


def _watch(r, directory, fleet, n, cap, start):
    first = lo = hi = None  # (monotonic time, count[, Redis snapshot])
    last, last_change = 0, time.monotonic()
    while True:
        time.sleep(POLL)
        if STOP.is_set():
            raise FleetError("interrupted")
        done, now = ticks(directory), time.monotonic()
        if done and first is None:
            first = (now, done)
        if lo is None and done >= 0.1 * n:
            lo = _mark(r, directory)
        capped = first is not None and now - first[0] > cap
        if lo is not None and hi is None and (done >= 0.9 * n or capped):
            hi = _mark(r, directory)
        if done >= n or capped:
            break
        if done != last:
            last, last_change = done, now
        elif done and now - last_change > STALL_TIMEOUT:
            raise FleetError(f"stalled: {done} of {n} jobs done, none for {STALL_TIMEOUT:.0f} s")
        if first is None and now - fleet.started_mono > START_TIMEOUT:
            raise FleetError(f"no job done in {START_TIMEOUT:.0f} s\n{fleet.log_tail()}")
        if not fleet.alive():
            raise FleetError(f"the workers exited after {done} jobs\n{fleet.log_tail()}")
    if hi is None or hi[1] <= lo[1]:  # too few jobs for a window (a tiny smoke run): the whole run
        lo, hi = start, _mark(r, directory)
    steady = (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] > lo[0] else None
    out = {
        "n": done,
        "enqueued": n,
        "capped": done < n,
        "overall": (done - first[1]) / (now - first[0]) if now > first[0] else None,
        "steady": steady,
        "startup_s": first[0] - fleet.started_mono,
    }
    out.update(rcpu.per_job(lo[2], hi[2], hi[1] - lo[1]))
    return out


def _mark(r, directory):
    snap = rcpu.snapshot(r)
    return time.monotonic(), ticks(directory), snap
