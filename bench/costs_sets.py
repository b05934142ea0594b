"""The sorted-set curves of `python3 -m bench.costs` (its docstring says what each
measures): ``scheduled``, `schedule` and `retry` holding entries not yet due (the
poller's pass, no-op throughput beside them), and ``dead``, failing jobs with the dead set
empty or at its cap (Redis CPU per filing, a burst's jobs/s). The fleet, the fills and the
Redis figures are bench.costs' own."""

import json
import statistics
import time

from bench.costs import cog_system, fill_cog, fleet_run, redis_cpu, say, use_redis

SET_SIZES = (0, 100_000, 1_000_000)
DEAD_CAP = 10_000  # cogworker's default dead_max_jobs
NOT_DUE = 86_400  # seconds ahead: entries of schedule/retry that are not yet due


def fill_zset(r, key, template, jid, n, score):
    """n copies of a real entry (distinct jids), all scored `score`."""
    for i in range(0, n, 2000):
        r.zadd(key, {template.replace(jid, f"{j:024x}"): score for j in range(i, min(i + 2000, n))})


def c_scheduled(ctx, plan):
    import redis

    from bench.redis_server import RedisServer

    out = {}
    for size in SET_SIZES:
        with RedisServer() as rs:
            config, app = use_redis(rs.url)
            r = redis.Redis.from_url(rs.url)
            jid = app.noop.enqueue_in(NOT_DUE, "x" * 100)
            template = r.zrange(config.keys.schedule, 0, 0)[0].decode()
            r.delete(config.keys.schedule)
            for key in (config.keys.schedule, config.keys.retry):
                fill_zset(r, key, template, jid, size, time.time() + NOT_DUE)
            out[size] = {
                **_poll_cost(config, r, plan["polls"]),
                **_sched_runs(ctx, plan, rs.url, config, app, r, size),
                "entries": r.zcard(config.keys.schedule) + r.zcard(config.keys.retry),
            }
        v = out[size]
        parked = f" (sets renamed away: {v['steady_parked']:,.0f})" if "steady_parked" in v else ""
        say(
            f"  sets={size:>9,} each  poll {v['poll_ms']:.3f} ms/pass (Redis {v['poll_redis_us']:.0f} µs)"
            f"  no-op {v['steady']:,.0f} jobs/s{parked}"
        )
    return out


def _poll_cost(config, r, polls):
    """One pass of the master's poller over both sets: client wall time, and Redis's own
    time in the poll scripts (commandstats: not the process's CPU, which includes its
    timers and the INFO call itself)."""
    from cogworker.fleet.poller import Poller

    poller = Poller(config)
    poller.poll()  # scripts loaded
    r.config_resetstat()
    t0 = time.perf_counter()
    for _ in range(polls):
        poller.poll()
    wall = (time.perf_counter() - t0) / polls
    stats = r.info("commandstats")
    usec = sum(stats.get(c, {}).get("usec", 0) for c in ("cmdstat_evalsha", "cmdstat_eval")) / polls
    return {"poll_ms": wall * 1000, "poll_redis_us": usec}


def _sched_runs(ctx, plan, url, config, app, r, size):
    """No-op jobs/s with the sets in place; with entries, also with the sets renamed away
    (RENAME: O(1)) on the same Redis, in A-B-B-A order: what the sets' size costs the
    fleet, told apart from the machine's drift between separate Redis servers."""
    keys = (config.keys.schedule, config.keys.retry)
    order = ["in place", "parked", "parked", "in place"] if size else ["in place"]
    got = {"in place": [], "parked": []}
    for i, where in enumerate(order):
        for key in keys:  # park or unpark as this run needs
            if r.exists(key if where == "parked" else f"{key}:parked"):
                r.rename(*((key, f"{key}:parked") if where == "parked" else (f"{key}:parked", key)))
        r.delete("bench:done", "bench:marks")
        fill_cog(app, plan["sched_n"])
        got[where].append(fleet_run(ctx, cog_system(), url, plan["sched_n"], plan["cap"], log_name=f"sched-{size}-{i}"))
    for key in keys:
        if r.exists(f"{key}:parked"):
            r.rename(f"{key}:parked", key)
    run = {k: statistics.median(x[k] for x in got["in place"]) for k in ("steady", "redis_us_per_job")}
    if got["parked"]:
        run["steady_parked"] = statistics.median(x["steady"] for x in got["parked"])
    return run


def c_dead(ctx, plan):
    """Failing jobs with the dead set empty vs at its cap (every filing then trims one)."""
    out = {}
    for prefill in (0, DEAD_CAP):
        out[prefill] = {**_dead_paced(ctx, plan, prefill), **_dead_burst(ctx, plan, prefill)}
        say(
            f"  dead set {prefill:>6,}: at {plan['dead_rate']}/s Redis {out[prefill]['paced_redis_us']:.1f} µs/job, "
            f"scripts {out[prefill]['paced_script_us']:.1f} µs/job, trimming {out[prefill]['paced_trim_us']:.2f} µs/job"
            f" (dead after: {out[prefill]['dead_after']:,}); burst {out[prefill]['steady']:,.0f} jobs/s"
        )
    return out


def _prefill_dead(r, config, app, prefill):
    """A real dead entry (one failing job run by the fleet) copied `prefill` times, older."""
    if not prefill:
        return
    template = r.zrange(config.keys.dead, 0, 0)[0].decode()
    jid = json.loads(template)["jid"]
    fill_zset(r, config.keys.dead, template, jid, prefill - 1, time.time() - 3600)


def _dead_setup(ctx, rs, prefill, log_name):
    import redis

    from bench import workloads
    from bench.fleet import Fleet

    config, app = use_redis(rs.url)
    r = redis.Redis.from_url(rs.url)
    fleet = Fleet(ctx, cog_system(), 2, rs.url, log_name=log_name).start()
    app.fail.enqueue("x" * 100)
    workloads._wait_done(r, fleet, 1, 30)
    while not r.zcard(config.keys.dead):
        time.sleep(0.01)
    _prefill_dead(r, config, app, prefill)
    if not prefill:
        r.delete(config.keys.dead)
    r.delete("bench:done", "bench:marks")
    return config, app, r, fleet


def _dead_paced(ctx, plan, prefill):
    from bench import workloads
    from bench.redis_server import RedisServer

    n = int(plan["dead_rate"] * plan["dead_s"])
    with RedisServer() as rs:
        config, app, r, fleet = _dead_setup(ctx, rs, prefill, f"dead-paced-{prefill}")
        try:
            r.config_resetstat()
            cpu0, gap, t0 = redis_cpu(r), 1.0 / plan["dead_rate"], time.monotonic()
            for i in range(n):
                time.sleep(max(0.0, t0 + i * gap - time.monotonic()))
                app.fail.enqueue("x" * 100)
            workloads._wait_done(r, fleet, n, 60)
            while r.zcard(config.keys.dead) < min(n, DEAD_CAP) and time.monotonic() - t0 < 60:
                time.sleep(0.01)
            cpu = redis_cpu(r) - cpu0
            stats = r.info("commandstats")
        finally:
            fleet.stop()
        scripts = sum(stats.get(c, {}).get("usec", 0) for c in ("cmdstat_evalsha", "cmdstat_eval"))
        # Whole-process CPU includes Redis's timers and the idle workers' blocking waits; the
        # scripts' own time (fetch, ack, file) is where trimming would show.
        # The trimming itself: file.lua's two ZREMRANGEBY* calls (counted on their own too).
        trim = sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("zremrangebyscore", "zremrangebyrank"))
        return {
            "paced_n": n,
            "paced_redis_us": cpu / n * 1e6,
            "paced_script_us": scripts / n,
            "paced_trim_us": trim / n,
            "dead_after": r.zcard(config.keys.dead),
        }


def _dead_burst(ctx, plan, prefill):
    from bench.redis_server import RedisServer

    with RedisServer() as rs:
        config, app, r, fleet = _dead_setup(ctx, rs, prefill, f"dead-burst-{prefill}")
        fleet.stop()
        fill_cog(app, plan["dead_burst"], fn="fail")
        return fleet_run(ctx, cog_system(), rs.url, plan["dead_burst"], plan["cap"], log_name=f"dead-{prefill}")
