"""The job bodies, shared byte for byte by every system and by the bare-protocol row.

Each system's app module (bench_cogworker, bench_celery, ...) only wraps these in
its own decorator. A body reports to the private Redis of the run by itself, so the
bench counts and times jobs the same way whatever system runs them:

- done marks: INCR bench:done; every `bench:step`-th completion (and the first) records
  the Redis server's TIME in the hash bench:marks, one round trip per job.
- cpu: also the earliest start time, and the sum of the work's CPU seconds (bench:burn_cpu).
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
# The CPU job also adds its work's CPU seconds and keeps the earliest start time (the
# job's time.time(): the same machine clock as the server's TIME), still one round trip.
_CPU_DONE_LUA = """
redis.call('INCRBYFLOAT', KEYS[4], ARGV[1])
local first = redis.call('HGET', KEYS[3], 'first_start')
if not first or tonumber(ARGV[2]) < tonumber(first) then
  redis.call('HSET', KEYS[3], 'first_start', ARGV[2])
end
""" + _DONE_LUA

_state = {"pid": None}


def _conn():
    # One connection per process, made lazily in the process that runs jobs
    # (a forked child must not share its parent's socket).
    if _state["pid"] != os.getpid():
        client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
        _state.update(pid=os.getpid(), client=client,
                      done=client.register_script(_DONE_LUA),
                      cpu_done=client.register_script(_CPU_DONE_LUA))
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
    s = _conn()
    started = time.time()
    # CPU time of the work itself (this thread's), summed over the run: the "job time" of
    # the efficiency, measured while it runs, so a machine that gets slower or faster
    # during the run (frequency, other tenants) moves both sides of the ratio alike.
    t = time.thread_time()
    burn(iterations)
    s["cpu_done"](keys=["bench:done", "bench:step", "bench:marks", "bench:burn_cpu"],
                  args=[repr(time.thread_time() - t), repr(started)])


def probe(token, t_enqueued):
    _conn()["client"].rpush("bench:probe", f"{token} {os.getpid()} {t_enqueued!r} {time.time()!r}")


def slow(token, seconds):
    _conn()["client"].rpush("bench:slow", f"{token} {os.getpid()} {time.time()!r}")
    time.sleep(seconds)
    _conn()["client"].rpush("bench:slow_done", token)
