"""Where the time goes: single enqueue against a bare LPUSH, step by step, and py-spy
samples of a worker child at a large payload and of a producer (bench.costs --profile).

Measurement only: it calls cogworker's own building blocks (build_payload, dumps, the
client's pipeline) to time them apart; it changes nothing in cogworker.
"""

import collections
import json
import os
import subprocess
import sys
import time

from bench import env

PAYLOAD = 100  # bytes: the enqueue curve's argument, as in the main bench


def _rate(fn, n):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6  # µs per call


def c_enqueue(ctx, plan):
    """µs per call from one producer, in one process: the bare client's call, cogworker's
    enqueue, and the steps of the enqueue timed apart; then the two whole calls in
    alternating rounds (their calls/s ratio per round: the machine's drift hits both);
    Redis's CPU and its time inside commands per call for both."""
    import redis

    from bench.costs import say, use_redis
    from bench.redis_server import RedisServer

    n, arg = plan["enq_n"], "x" * PAYLOAD
    with RedisServer() as rs:
        config, app = use_redis(rs.url)
        r = redis.Redis.from_url(rs.url)
        app.noop.enqueue(arg)  # connections made, nothing measured yet
        steps = _enqueue_steps(config, app, r, arg)
        out = {
            "us_per_call": {name: _rate(fn, n) for name, fn in steps.items()},
            "ratio": _rounds(steps[BARE], steps[WHOLE], n),
            "redis_us_per_call": {},
            "redis_cmd_us_per_call": {},
        }
        for name, step in (("bare client", BARE), ("cogworker enqueue", WHOLE)):
            out["redis_us_per_call"][name], out["redis_cmd_us_per_call"][name] = _redis_per_call(r, steps[step], n)
    for name, us in out["us_per_call"].items():
        say(f"  {us:7.1f} µs  {1e6 / us:9,.0f}/s  {name}")
    ratio = out["ratio"]
    say(
        f"  cogworker enqueue ÷ bare client, calls/s in alternating rounds: median {ratio['median']:.3f} "
        f"[{ratio['min']:.3f}–{ratio['max']:.3f}] of {ratio['rounds']}"
    )
    for name, us in out["redis_us_per_call"].items():
        cmds = ", ".join(f"{k} {v:.2f}" for k, v in out["redis_cmd_us_per_call"][name].items())
        say(f"  Redis CPU {us:5.1f} µs per call: {name} (µs per call in commands: {cmds})")
    return out


BARE = "bare: json.dumps + LPUSH (the bare client)"
WHOLE = "cogworker: noop.enqueue() (all of it)"


def _rounds(bare, whole, n, rounds=21):
    """calls/s of ``whole`` ÷ ``bare`` per round, the two alternating (which goes first too)."""
    import statistics

    per = max(100, n)
    ratios = []
    for i in range(rounds):
        if i % 2:
            w, b = _rate(whole, per), _rate(bare, per)
        else:
            b, w = _rate(bare, per), _rate(whole, per)
        ratios.append(b / w)
    return {
        "median": statistics.median(ratios),
        "min": min(ratios),
        "max": max(ratios),
        "rounds": rounds,
        "calls_per_round": per,
    }


def _redis_per_call(r, fn, n):
    """Redis's CPU (INFO cpu) per call of ``fn``, and its time inside each command per call
    (commandstats; a script's commands are counted in its EVALSHA and on their own too)."""
    from bench.costs import redis_cpu

    r.config_resetstat()
    cpu0 = redis_cpu(r)
    for _ in range(n):
        fn()
    cpu = (redis_cpu(r) - cpu0) / n * 1e6
    stats = r.info("commandstats")
    return cpu, {
        k[len("cmdstat_") :]: round(v["usec"] / n, 2)
        for k, v in stats.items()
        if "info" not in k and "config" not in k and v["calls"] >= n / 100
    }


def _enqueue_steps(config, app, r, arg):
    """The calls timed apart: the bare client's, then cogworker's enqueue piece by piece
    (its own building blocks, called as its client calls them)."""
    from cogworker.client import status as status_enqueue
    from cogworker.core.payload import build_payload, dumps
    from cogworker.store import lua
    from cogworker.store import pipes as rawpipe

    bare_raw = json.dumps({"class": "noop", "args": [arg]})
    job = app.noop
    payload = build_payload(job.name, (arg,), {}, job.opts)
    encoded = dumps(payload)
    keys = config.keys
    queue = keys.queue("default")
    bucket, _, jid, record = status_enqueue.queued_field(config, payload)
    push_keys, push_args = [queue, keys.queues, keys.wake, bucket], [encoded, "default", jid, record, ""]

    def payload_only():
        job.check_arguments((arg,), {})
        dumps(build_payload(job.name, (arg,), {}, job.opts))

    return {
        BARE: lambda: r.lpush("bare:queue", json.dumps({"class": "noop", "args": [arg]})),
        "bare: LPUSH of a ready string": lambda: r.lpush("bare:queue", bare_raw),
        "cogworker: check_arguments + build_payload + dumps (no Redis)": payload_only,
        "cogworker: its enq:<hour> status field (no Redis)": lambda: status_enqueue.queued_field(config, payload),
        "cogworker payload: LPUSH of the ready string (redis-py)": lambda: r.lpush(queue, encoded),
        "cogworker payload: HSET + LPUSH in one write (rawpipe) = its write to a backlogged queue": lambda: (
            rawpipe.send(r, ("HSET", bucket, jid, record), ("LPUSH", queue, encoded))
        ),
        "cogworker payload: push.lua (rawpipe) = its write to a queue that may be empty": lambda: rawpipe.send(
            r, lua.command(r, "push", push_keys, push_args)
        ),
        WHOLE: lambda: app.noop.enqueue(arg),
    }


# ---------------------------------------------------------------- py-spy

PY_SPY = env.PEERS_BIN / "py-spy"


def collapse(path, top=16):
    """py-spy's raw output (one 'frame;frame;... count' line per stack) -> the share of
    samples per function: self (the innermost frame) and inclusive (anywhere in the stack)."""
    own, incl, total = collections.Counter(), collections.Counter(), 0
    for line in open(path):
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack:
            continue
        count = int(count)
        if "threading.py" in stack:
            continue  # helper threads (cogworker's master watch): idle, they would halve the wall view
        frames = [_short(f) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    pct = lambda c: {k: round(100 * v / total, 1) for k, v in c.most_common(top)}  # noqa: E731
    return {"samples": total, "self_pct": pct(own), "inclusive_pct": pct(incl)}


def _short(frame):
    """'loads (json/__init__.py:346)' -> 'json/__init__.py:loads'."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "lib/python3.11/", "/wt/bench/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{path}:{name}"


def record(target, seconds, out):
    """Two py-spy samplers at once: every sample (`--idle`: wall time, waits on Redis
    included) and only samples holding the GIL (`--gil`: the Python work itself)."""
    procs = {}
    for view, flag in (("wall", "--idle"), ("gil", "--gil")):
        argv = [str(PY_SPY), "record", "--format", "raw", "-o", f"{out}.{view}.txt", "-r", "250", "--nonblocking", flag]
        argv += ["--pid", str(target), "-d", str(seconds)] if isinstance(target, int) else ["--", *target]
        procs[view] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if not isinstance(target, int):
            break  # a command is run once: its GIL view comes from a second run (profile_enqueue)
    result = {}
    for view, p in procs.items():
        _, err = p.communicate()
        if p.returncode:
            raise RuntimeError(f"py-spy failed: {err.strip()[-300:]}")
        result[view] = collapse(f"{out}.{view}.txt")
    return result


def profile_worker(ctx, system_name, size, n, seconds):
    """Sample one child of a 2-process fleet for `seconds` while it drains n jobs of `size` B."""
    import redis

    from bench import costs
    from bench.fleet import Fleet
    from bench.redis_server import RedisServer
    from bench.systems import by_name

    with RedisServer() as rs:
        _, app = costs.use_redis(rs.url)
        r = redis.Redis.from_url(rs.url)
        if system_name == "cogworker":
            costs.fill_cog(app, n, payload=size)
            system = costs.cog_system()
        else:
            costs.fill_bare(r, n, size)
            system = by_name(system_name)
        fleet = Fleet(ctx, system, 2, rs.url, log_name=f"profile-{system_name}").start()
        try:
            while int(r.get("bench:done") or 0) < n // 10:
                time.sleep(0.01)
            runners = [d for root, kids in fleet.tree() for d in (kids or [root])]
            out = ctx.log_dir / f"pyspy-{system_name}-{size}"
            got = record(runners[0].pid, seconds, out)
        finally:
            fleet.stop()
    return got


ENQUEUE_LOOP = """
import os, sys
sys.path.insert(0, {apps!r})
import bench_cogworker as app
for _ in range({n}):
    app.noop.enqueue("x" * 100)
"""


def profile_enqueue(ctx, n):
    """A producer process of n single enqueues, sampled from start to end."""
    from bench.redis_server import RedisServer

    with RedisServer() as rs:
        code = ENQUEUE_LOOP.format(apps=str(env.APPS), n=n)
        os.environ["BENCH_REDIS_URL"] = rs.url
        producer = subprocess.Popen([sys.executable, "-c", code])
        try:
            time.sleep(0.5)  # past the imports
            return record(producer.pid, max(1, int(n / 6000) - 1), ctx.log_dir / "pyspy-enqueue")
        finally:
            producer.kill()
            producer.wait()


LUA_CASES = {
    "EVALSHA 'return 1' with the payload as ARGV[1] (into Lua, unused)": ("return 1", False, True),
    "EVALSHA: LINDEX of the payload into Lua, return 1": (
        "local v = redis.call('LINDEX', KEYS[1], 0) return 1",
        True,
        False,
    ),
    "plain LINDEX of the payload (no Lua)": (None, True, False),
    "plain EXISTS with the payload as argument (no Lua)": (None, False, True),
}


def lua_payload_cost(sizes=(100, 10_240, 102_400, 1_048_576), n=300):
    """Redis's own time (commandstats) for a payload entering a Lua script, as an
    argument or as a command's reply, against plain commands carrying the same bytes."""
    import redis

    from bench.redis_server import RedisServer

    out = {}
    with RedisServer() as rs:
        r = redis.Redis.from_url(rs.url)
        for size in sizes:
            args = [f"{i:024x}" + "x" * size for i in range(n)]
            r.delete("big")
            r.rpush("big", args[0])
            for name, (src, reads, passes) in LUA_CASES.items():
                script = r.register_script(src) if src else None
                r.config_resetstat()
                for a in args:
                    if script:
                        script(keys=["big"] if reads else [], args=[a] if passes else [])
                    elif reads:
                        r.lindex("big", 0)
                    else:
                        r.exists(a)
                stats = r.info("commandstats")
                cmd = "cmdstat_evalsha" if script else ("cmdstat_lindex" if reads else "cmdstat_exists")
                out.setdefault(name, {})[str(size)] = stats[cmd]["usec_per_call"]
    return out


def profile_all(ctx, plan):
    from bench.costs import say

    out = {}
    lua = lua_payload_cost()
    for name, per in lua.items():
        say("  " + ", ".join(f"{int(k):>8,} B {v:7.1f} µs" for k, v in per.items()) + f"  {name}")
    for name in ("cogworker", "bare-2rt"):
        out[f"worker-{name}-100KB"] = profile_worker(ctx, name, 102_400, 6_000, 2)
    out["enqueue-cogworker"] = profile_enqueue(ctx, 30_000)
    for key, views in out.items():
        for view, prof in views.items():
            say(
                f"  {key} ({view}): {prof['samples']} samples; self: "
                + ", ".join(f"{k} {v}%" for k, v in list(prof["self_pct"].items())[:8])
            )
    return {"pyspy": out, "lua_payload_us": lua}
