"""The recovery workload: SIGKILL the process running a job, then wait, as a supervisor
would, until that job starts again (one repetition, one system, fresh Redis)."""

import os
import signal
import time

import redis

from bench.fleet import Fleet, FleetError
from bench.redis_server import RedisServer
from bench.workloads import START_TIMEOUT, STOP, start_driver, warm_up


def recovery(ctx, system, procs, job_seconds, bound, trickle_rate):
    """SIGKILL the process running a `job_seconds` job half-way; how long until that
    job starts again, or not within `bound` seconds.

    As in production: a supervisor restarts, once, any launched process that exits
    (Dramatiq's main process stops all its workers when one dies; an RQ worker whose
    process was killed is gone), and work keeps arriving (`trickle_rate` no-op jobs/s
    through the system's own client, from just before the kill): Dramatiq requeues a
    dead worker's messages only in a maintenance step its broker runs on a random 0.1%
    of its commands, so an idle system would wait minutes for it."""
    token = "slowjob"  # one job per fresh Redis: a fixed token is unique enough
    ctx.prefill.ensure(ctx, system, "noop", [""], 2 * procs)
    ctx.prefill.ensure(ctx, system, "slow", [token, job_seconds], 1)
    with RedisServer() as rs:
        r = redis.Redis.from_url(rs.url)
        fleet = Fleet(ctx, system, procs, rs.url, log_name="recovery")
        trickle = None
        try:
            fleet.start()
            trickle = start_driver(
                ctx, system, rs.url, {"action": "trickle", "rate": trickle_rate, "seconds": bound + 60}
            )
            warm_up(ctx, system, r, fleet, 2 * procs)
            ctx.prefill.restore(ctx, system, r, "slow", [token, job_seconds], 1)
            starts = _wait_starts(r, token, 1, time.monotonic() + START_TIMEOUT)
            if not starts:
                raise FleetError(f"the slow job never started\n{fleet.log_tail()}")
            pid, t_start = starts[0]
            if pid not in fleet.pids():  # never signal a process that is not ours
                raise FleetError(f"pid {pid} that ran the job is not one of the fleet's")
            time.sleep(max(0.0, t_start + job_seconds / 2 - time.time() - 0.1))
            r.lpush("bench:go", 1)  # the trickle starts
            time.sleep(max(0.0, t_start + job_seconds / 2 - time.time()))
            # The clock is read before the kill: read after, this thread may wait for the
            # GIL (other systems' trials run in threads beside it) while the job already
            # runs again, and the delay would come out negative.
            t_kill = time.time()
            os.kill(pid, signal.SIGKILL)
            starts, seen = _wait_rerun(r, token, fleet, time.monotonic() + bound)
        finally:
            if trickle is not None and trickle.poll() is None:
                trickle.kill()
                trickle.wait()
            fleet.stop()
    out = {
        "lost": len(starts) < 2,
        "rerun_s": starts[1][1] - t_kill if len(starts) >= 2 else None,
        "fleet_exited": seen["all_exited"],
        "restarted": seen["restarted"],
        "restart_s": seen["restart_at"] - t_kill if seen["restart_at"] else None,
    }
    return out


def _wait_rerun(r, token, fleet, deadline):
    """Until the job's second start or the deadline. A launched process that exits is
    launched again, once, as its supervisor would."""
    seen = {"all_exited": False, "restarted": 0, "restart_at": None}
    done = set()
    while True:
        starts = _starts(r, token)
        if len(starts) >= 2 or time.monotonic() > deadline:
            return starts, seen
        if STOP.is_set():
            raise FleetError("interrupted")
        exited = [i for i in fleet.exited() if i not in done]
        if exited:
            if len(fleet.exited()) == len(fleet.popens) and not seen["restarted"]:
                seen["all_exited"] = True
            for i in exited:
                fleet.restart(i)
                done.add(i)
            seen["restarted"] += len(exited)
            seen["restart_at"] = seen["restart_at"] or time.time()
        time.sleep(0.02)


def _starts(r, token):
    return [
        (int(pid), float(t))
        for tok, pid, t in (line.decode().split() for line in r.lrange("bench:slow", 0, -1))
        if tok == token
    ]


def _wait_starts(r, token, count, deadline):
    while True:
        starts = _starts(r, token)
        if len(starts) >= count or time.monotonic() > deadline:
            return starts
        if STOP.is_set():
            raise FleetError("interrupted")
        time.sleep(0.01)
