"""The memory run's job module (bench/memory_run.py): a mix of job kinds under the default
configuration, bodies that make no Redis call of their own (so Redis holds only what
cogworker keeps per job)."""

import os
import time

import cogworker

cogworker.configure(redis_url=os.environ["BENCH_REDIS_URL"])


@cogworker.job
def quick(n=0):
    return n


@cogworker.job
def work(ms=2.0):
    """Spins ``ms`` milliseconds of CPU."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


@cogworker.job
def slow(seconds=1.2):
    """Longer than the status flush: its "running" is written, its end goes to status:<jid>."""
    time.sleep(seconds)


@cogworker.job(retry=0)
def fail(n=0):
    """Dead at once (retry=0): a failure's status, history and dead entry."""
    raise RuntimeError(f"bench: this job fails on purpose ({n})")


@cogworker.job(retry=1)
def fail_twice(n=0):
    """Fails, waits in retry (about 15-25 s), fails again: dead after one retry."""
    raise RuntimeError(f"bench: this job fails twice on purpose ({n})")
