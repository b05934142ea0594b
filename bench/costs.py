"""`python3 -m bench.costs`: cogworker's cost curves (measurement only; no peers).

- queues:    a prefork worker (N = 2) listening to 1, 10 or 100 queues, every job on
             the last one, the others empty: jobs/s and Redis CPU per job;
- scheduled: `schedule` and `retry` each holding 0, 100,000 or 1,000,000 entries not yet
             due: the poller's cost per pass (client wall time, Redis CPU) and no-op
             throughput while the master's poller runs;
- dead:      the dead set empty or at its 10,000 cap, jobs failing (retry=0) at 500/s:
             Redis CPU per filing; and 5,000 failing jobs queued at once: jobs/s;
- payload:   100 B, 10 KB, 100 KB, 1 MB no-op jobs, cogworker against bare-2rt (the
             BLMOVE / run / LREM loop): jobs/s and Redis CPU per job;
- enqueue:   single enqueue calls from one producer against a bare LPUSH loop, with the
             steps in between (see bench/costs_profile.py).

The scheduled and dead curves are measured in bench/costs_sets.py, the enqueue curve in
bench/costs_profile.py. Each point gets a fresh private redis-server. Results:
bench/results/costs-latest.{md,json} and one PNG per curve (drawn by bench/costs_report.py in
bench/.venv-peers, which has matplotlib). `--profile` also samples a worker child with py-spy (bench/costs_profile.py).
Runs in the project's interpreter (it enqueues through cogworker itself); re-executes
itself there if launched by another.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

from bench import env

PLANS = {
    "full": dict(
        reps=3,
        queues_n=10_000,
        sched_n=10_000,
        polls=50,
        dead_rate=500,
        dead_s=8.0,
        dead_burst=5_000,
        payload_n={100: 10_000, 10_240: 5_000, 102_400: 2_000, 1_048_576: 400},
        enq_n=5_000,
        cap=15.0,
    ),
    "quick": dict(
        reps=1,
        queues_n=2_000,
        sched_n=5_000,
        polls=10,
        dead_rate=500,
        dead_s=3.0,
        dead_burst=1_000,
        payload_n={100: 2_000, 10_240: 1_000, 102_400: 500, 1_048_576: 100},
        enq_n=1_000,
        cap=5.0,
    ),
}
QUEUE_COUNTS = (1, 10, 100)


def bootstrap(argv):
    """The peers' venv (matplotlib, py-spy) must exist; this process must be able to
    import cogworker (the project's interpreter), else re-run with that one."""
    env.ensure_peers_venv()
    try:
        import redis  # noqa: F401

        import cogworker  # noqa: F401

        return
    except ImportError:
        pass
    cands = [os.environ.get("BENCH_COGWORKER_PYTHON"), str(env.PROJECT_PYTHON)]
    python, error = env.find_cogworker_python(cands)
    if python is None:
        python = env.ensure_project_venv()
    os.chdir(env.REPO)
    os.execv(python, [python, "-m", "bench.costs", *argv])


class Ctx:
    """What bench.fleet.Fleet needs: interpreters and where logs go."""

    def __init__(self, log_dir):
        self.log_dir = log_dir

    def python_for(self, system):
        return sys.executable if system.interpreter == "project" else str(env.PEERS_PYTHON)


def cog_system(queues=None):
    from bench.systems.cogworker_ import Cogworker

    class CogQueues(Cogworker):
        """cogworker listening to queues q1..qK in strict order (the job on the last)."""

        def worker_argvs(self, procs, bindir, python):
            argv = super().worker_argvs(procs, bindir, python)[0]
            qs = [a for i in range(1, queues + 1) for a in ("-q", f"q{i}")]
            return [argv[:-1] + qs + argv[-1:]]

    return CogQueues() if queues else Cogworker()


def use_redis(url):
    """Point cogworker (and the job module) at this private Redis."""
    os.environ["BENCH_REDIS_URL"] = os.environ["COGWORKER_REDIS_URL"] = url
    if str(env.APPS) not in sys.path:
        sys.path.insert(0, str(env.APPS))
    import cogworker

    config = cogworker.configure(redis_url=url)
    import bench_cogworker

    return config, bench_cogworker


def redis_cpu(r):
    info = r.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def fleet_run(ctx, system, url, n, cap, procs=2, log_name="costs"):
    """Start the fleet on a prefilled queue of n counting jobs; jobs/s (steady: 10-90%)
    and Redis CPU per job over the run."""
    import redis

    from bench import workloads
    from bench.fleet import Fleet

    r = redis.Redis.from_url(url)
    step = max(1, n // 1000)
    r.set("bench:step", step)
    r.config_resetstat()
    cpu0 = redis_cpu(r)
    fleet = Fleet(ctx, system, procs, url, log_name=log_name)
    try:
        fleet.start()
        capped = workloads._wait_done(r, fleet, n, cap)
    finally:
        fleet.stop()
    cpu = redis_cpu(r) - cpu0
    stats = r.info("commandstats")
    marks = workloads.marks_of(r)
    (c1, t1), (cn, tn) = marks[0], marks[-1]
    lo = [m for m in marks if m[0] >= 0.1 * cn][0]
    hi = [m for m in marks if m[0] <= 0.9 * cn][-1]
    return {
        "n": cn,
        "capped": capped,
        "overall": (cn - c1) / (tn - t1) if tn > t1 else None,
        "steady": (hi[0] - lo[0]) / (hi[1] - lo[1]) if hi[1] > lo[1] else None,
        "redis_us_per_job": cpu / cn * 1e6,
        # Redis's time inside each command (commands run by scripts counted under their
        # own names too); the rest of its CPU is reading and writing sockets.
        "cmd_us_per_job": {k[len("cmdstat_") :]: v["usec"] / cn for k, v in stats.items() if v["usec"] / cn >= 0.5},
    }


def fill_cog(app, n, payload=100, queue="default", fn="noop"):
    job = getattr(app, fn).options(queue=queue)
    for i in range(0, n, 1000):
        job.enqueue_many([("x" * payload,)] * min(1000, n - i))


def fill_bare(r, n, payload):
    from bench.systems.bare import QUEUE

    raw = json.dumps({"class": "noop", "args": ["x" * payload]})
    chunk = max(1, min(1000, 50_000_000 // len(raw)))
    for i in range(0, n, chunk):
        r.lpush(QUEUE, *[raw] * min(chunk, n - i))


def c_queues(ctx, plan):
    from bench.redis_server import RedisServer

    out = {}
    for k in QUEUE_COUNTS:
        with RedisServer() as rs:
            config, app = use_redis(rs.url)
            fetch_us = _fetch_script_us(config, app, k, 2_000)
            first_us = _fetch_script_us(config, app, k, 2_000, on=1)
            fill_cog(app, plan["queues_n"], queue=f"q{k}")
            out[k] = fleet_run(ctx, cog_system(k), rs.url, plan["queues_n"], plan["cap"], log_name=f"queues-{k}")
            out[k]["fetch_script_us"] = fetch_us
            out[k]["fetch_script_us_first"] = first_us
        say(
            f"  queues={k:<4} {out[k]['steady']:8,.0f} jobs/s  Redis {out[k]['redis_us_per_job']:6.1f} µs/job"
            f"  fetch script {fetch_us:5.1f} µs/call (job on the first queue: {first_us:5.1f})"
        )
    return out


def _fetch_script_us(config, app, k, n, on=None):
    """Redis's time per fetch-and-ack script call (commandstats) for a worker of k queues,
    the job on the last (or on queue ``on``): cogworker's own Fetcher, non-blocking, in this process."""
    from cogworker.engine.fetch.fetcher import Fetcher

    fill_cog(app, n + 1, queue=f"q{on or k}")
    fetcher = Fetcher(config, "bench-costs", [(f"q{i}", None) for i in range(1, k + 1)], block_timeout=0)
    work = fetcher.fetch()
    r = config.redis()
    r.config_resetstat()
    for _ in range(n):
        work = fetcher.fetch(ack=work.raw)
    stats = r.info("commandstats")
    # The fast fetch is a MULTI: EXEC's time includes the commands and the script inside it.
    usec = (stats.get("cmdstat_exec") or stats["cmdstat_evalsha"])["usec"]
    r.delete(config.keys.in_progress("bench-costs"))
    return usec / n


def c_payload(ctx, plan):
    import redis

    from bench.redis_server import RedisServer
    from bench.systems import by_name

    out = {"cogworker": {}, "bare-2rt": {}}
    for size, n in plan["payload_n"].items():
        for name in out:
            with RedisServer() as rs:
                _, app = use_redis(rs.url)
                if name == "cogworker":
                    fill_cog(app, n, payload=size)
                    system = cog_system()
                else:
                    fill_bare(redis.Redis.from_url(rs.url), n, size)
                    system = by_name("bare-2rt")
                out[name][size] = fleet_run(ctx, system, rs.url, n, plan["cap"], log_name=f"payload-{size}")
            v = out[name][size]
            say(f"  {size:>9,} B {name:<10} {v['steady']:8,.0f} jobs/s  Redis {v['redis_us_per_job']:7.1f} µs/job")
    return out


def say(*parts):
    print(*parts, flush=True)


def merge(reps):
    """Medians [min, max] of every number over the repetitions, key by key."""
    first = reps[0]
    if isinstance(first, dict):
        return {k: merge([r[k] for r in reps if k in r]) for k in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return {"median": statistics.median(reps), "min": min(reps), "max": max(reps)}
    return first


CURVES = ["queues", "scheduled", "dead", "payload", "enqueue"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python3 -m bench.costs", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer jobs, one repetition")
    ap.add_argument("--curves", default=",".join(CURVES), help=f"comma-separated, from {','.join(CURVES)}")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--profile", action="store_true", help="also sample with py-spy (payload, enqueue)")
    args = ap.parse_args(argv)
    bootstrap(argv)
    from bench import costs_profile, costs_sets, fleet, redis_server

    mode = "quick" if args.quick else "full"
    plan = PLANS[mode]
    reps = args.reps or plan["reps"]
    out_dir = env.BENCH / "results"
    ctx = Ctx(out_dir / "logs")
    ctx.log_dir.mkdir(parents=True, exist_ok=True)
    runners = {
        "queues": c_queues,
        "scheduled": costs_sets.c_scheduled,
        "dead": costs_sets.c_dead,
        "payload": c_payload,
        "enqueue": costs_profile.c_enqueue,
    }
    doc = {
        "meta": {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "mode": mode,
            "reps": reps,
            "git_commit": env.git_commit(),
            "cpu_count": os.cpu_count(),
            "loadavg_start": os.getloadavg()[0],
            "plan": {k: v for k, v in plan.items() if k != "payload_n"},
            "payload_n": {str(k): v for k, v in plan["payload_n"].items()},
        },
        "curves": {},
    }
    try:
        for curve in [c for c in args.curves.split(",") if c]:
            say(f"== {curve}")
            t = time.monotonic()
            got = []
            for rep in range(reps):
                say(f" rep {rep + 1}/{reps}")
                got.append(runners[curve](ctx, plan))
            doc["curves"][curve] = {"reps": got, "summary": merge(got)}
            say(f"   ({curve}: {time.monotonic() - t:.0f} s)")
        if args.profile:
            doc["profile"] = costs_profile.profile_all(ctx, plan)
    finally:
        fleet.stop_all()
        redis_server.stop_all()
    doc["meta"]["loadavg_end"] = os.getloadavg()[0]
    suffix = "-quick" if mode == "quick" else ""
    path = out_dir / f"costs-latest{suffix}.json"
    path.write_text(json.dumps(doc, indent=1, default=str))
    stamp = doc["meta"]["date"].replace(":", "").replace("-", "")[:15]
    (out_dir / f"costs-{stamp}{suffix}.json").write_text(path.read_text())
    subprocess.run([str(env.PEERS_PYTHON), "-m", "bench.costs_report", str(path), suffix], cwd=env.REPO, check=True)
    say((out_dir / f"costs-latest{suffix}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
