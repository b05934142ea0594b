"""The job bodies, shared byte for byte by every system and by the bare-protocol row.

Each system's app module (bench_cogworker, bench_celery, ...) only wraps these in
its own decorator. A body reports to the private Redis of the run by itself, so the
bench counts and times jobs the same way whatever system runs them:

- done marks: INCR bench:done; every `bench:step`-th completion (and the first) records
  the Redis server's TIME in the hash bench:marks, one round trip per job.
- cpu: no Redis at all. Each job appends one fixed-size record (start, end, the work's
  CPU seconds) to a file of its process in $BENCH_MARKS_DIR: a round trip to Redis in
  the body (~0.2-0.4 ms here) would be ~3% of a 10 ms job, charged to every system
  alike, and the efficiency is meant to show what the framework costs, not the probe.
- truenoop: no Redis at all, and no work: appends one byte to a file of its process in
  $BENCH_MARKS_DIR (one write(2)); the harness counts the bytes. What is left is the
  framework's own cost per job (its fetch, ack, bookkeeping), which noop's INCR round
  trip (most of a child's time there) hides.
- probe/slow: RPUSH "<token> <pid> <time.time()>" when the job starts.
"""

import os
import time

import redis

if os.environ.get("BENCH_BALLAST"):
    import bench_ballast  # noqa: F401  (the preloaded 50 MB module of the memory workload)

_DONE_LUA = """
local c = redis.call('INCR', KEYS[1])
local step = tonumber(redis.call('GET', KEYS[2]) or '0')
if c == 1 or (step > 0 and c % step == 0) then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[3], c, t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
end
return c
"""
CPU_RECORD = "{:17.6f} {:17.6f} {:12.9f}\n"  # start, end (time.time()), CPU seconds
CPU_RECORD_SIZE = len(CPU_RECORD.format(2e9, 2e9, 0.0))

_state = {"pid": None}


def _conn():
    # One connection per process, made lazily in the process that runs jobs
    # (a forked child must not share its parent's socket).
    if _state["pid"] != os.getpid():
        client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
        _state.update(pid=os.getpid(), client=client, done=client.register_script(_DONE_LUA))
    return _state


def _done():
    s = _conn()
    s["done"](keys=["bench:done", "bench:step", "bench:marks"])


def burn(iterations):
    """Pure-Python CPU work, no I/O, no allocation worth the name."""
    x = 0
    for i in range(iterations):
        x = (x * 31 + i) % 1000003
    return x


def noop(payload=""):
    _done()


def cpu(iterations):
    started = time.time()
    # CPU time of the work itself (this thread's), summed over the run: the "job time" of
    # the efficiency, measured while it runs, so a machine that gets slower or faster
    # during the run (frequency, other tenants) moves both sides of the ratio alike.
    t = time.thread_time()
    burn(iterations)
    spent = time.thread_time() - t
    if _state.get("marks_pid") != os.getpid():
        path = os.path.join(os.environ["BENCH_MARKS_DIR"], f"cpu.{os.getpid()}")
        _state.update(marks_pid=os.getpid(), marks=os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    # One write(2) of one record: O_APPEND keeps records whole even from forked writers.
    os.write(_state["marks"], CPU_RECORD.format(started, time.time(), spent).encode())


def truenoop(payload=""):
    if _state.get("tick_pid") != os.getpid():
        path = os.path.join(os.environ["BENCH_MARKS_DIR"], f"tick.{os.getpid()}")
        _state.update(tick_pid=os.getpid(), tick=os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    os.write(_state["tick"], b".")


def probe(token, t_enqueued):
    _conn()["client"].rpush("bench:probe", f"{token} {os.getpid()} {t_enqueued!r} {time.time()!r}")


def slow(token, seconds):
    _conn()["client"].rpush("bench:slow", f"{token} {os.getpid()} {time.time()!r}")
    time.sleep(seconds)
    _conn()["client"].rpush("bench:slow_done", token)


def io(seconds):
    """An I/O-bound job: waits (as on a slow HTTP call), then counts itself."""
    time.sleep(seconds)
    _done()


async def aio(seconds):
    """The same, as a coroutine (the count is the same one round trip, sync, as for every row)."""
    import asyncio

    await asyncio.sleep(seconds)
    _done()
