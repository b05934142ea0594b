"""The I/O workload: jobs that wait (as on a slow HTTP call), many at once.

    python -m bench.iobound [--jobs 2000] [--wait 0.1] [--procs 2] [--reps 3] [--cap 15]
                            [--systems cogworker-c1,cogworker-c50,...]

2,000 jobs each waiting 100 ms (an `asyncio.sleep` for the asyncio rows, a `time.sleep`
for the others), all on the queue before the workers start, N = 2 processes for every
row. Each job then counts itself in Redis with one round trip, as in every workload
(bench_body). A row slower than the rest is cut `--cap` seconds after its first
completion (the table says how many ran). The systems run in alternating order
(A..Z, then Z..A) so a change of load on the shared machine hits them alike.

Reported: jobs/s from the first completion to the last (median of the reps, [min-max]);
the fleet's CPU seconds per 1,000 jobs (user + system of every process of the fleet, read
just before it is stopped); the ratio to Celery prefork of the same run. Results go to
bench/results/latest-io.md and .json.
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import time

import psutil
import redis

from bench import env, workloads
from bench.fleet import Fleet, FleetError, stop_all
from bench.redis_server import RedisServer
from bench.run import Context
from bench.systems import by_name

DEFAULT_SYSTEMS = ["cogworker-c1", "cogworker-c50", "celery-reliable", "celery-threads50", "dramatiq-t8", "saq-50"]


def job_of(system):
    return "aio" if system.lib in ("cogworker", "saq") else "io"


def fleet_cpu(fleet):
    total = 0.0
    for pid in fleet.pids():
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def measure(ctx, system, procs, n, wait, cap):
    step = max(1, n // 200)
    n = -(-n // step) * step
    fn = job_of(system)
    with RedisServer() as rs:
        r = redis.Redis.from_url(rs.url)
        ctx.prefill.restore(ctx, system, r, fn, [wait], n)
        r.set("bench:step", step)
        fleet = Fleet(ctx, system, procs, rs.url, log_name=f"io-{procs}p")
        try:
            fleet.start()
            capped = workloads._wait_done(r, fleet, n, cap)
            cpu = fleet_cpu(fleet)
        finally:
            fleet.stop()
        marks = workloads.marks_of(r)
    (c1, t1), (cn, tn) = marks[0], marks[-1]
    return {
        "n": cn,
        "enqueued": n,
        "capped": capped,
        "rate": (cn - c1) / (tn - t1) if tn > t1 else None,
        "cpu_s_per_1000": cpu / cn * 1000 if cn else None,
    }


def table(systems, results, baseline, args):
    base = statistics.median(r["rate"] for r in results[baseline]) if results.get(baseline) else None
    lines = [
        f"I/O workload: {args.jobs:,} jobs each waiting {args.wait * 1000:.0f} ms, {args.procs} processes per "
        f"row, {args.reps} rep(s), alternating order; median [min-max].",
        "",
        "| system | configuration | jobs/s | × Celery prefork | fleet CPU s per 1,000 jobs | jobs run |",
        "|---|---|---|---|---|---|",
    ]
    for system in systems:
        reps = results.get(system.name) or []
        if not reps:
            lines.append(f"| {system.name} | {system.config} | error | — | — | — |")
            continue
        rates = [r["rate"] for r in reps]
        med = statistics.median(rates)
        cpu = statistics.median(r["cpu_s_per_1000"] for r in reps)
        ran = min(r["n"] for r in reps)
        capped = " (time cap)" if any(r["capped"] for r in reps) else ""
        ratio = f"{med / base:.1f}×" if base else "—"
        lines.append(
            f"| {system.name} | {system.config} | {med:,.0f} [{min(rates):,.0f}–{max(rates):,.0f}] | "
            f"{ratio} | {cpu:.2f} | {ran:,} of {reps[0]['enqueued']:,}{capped} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.iobound")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--wait", type=float, default=0.1)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cap", type=float, default=15.0)
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    args = parser.parse_args(argv)
    env.ensure_peers_venv()
    candidates = [os.environ.get("BENCH_COGWORKER_PYTHON"), sys.executable, str(env.PROJECT_PYTHON)]
    cog_python, cog_error = env.find_cogworker_python(candidates)
    if cog_python is None:
        sys.exit(f"bench: no interpreter can import cogworker: {cog_error}")
    out_dir = env.BENCH / "results"
    log_dir = out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(cog_python, log_dir)
    systems = [by_name(name) for name in args.systems.split(",")]
    results: dict[str, list[dict]] = {}
    started = time.time()
    try:
        for rep in range(args.reps):
            for system in systems if rep % 2 == 0 else list(reversed(systems)):
                try:
                    value = measure(ctx, system, args.procs, args.jobs, args.wait, args.cap)
                except FleetError as exc:
                    print(f"  rep {rep + 1} {system.name:<18} ERROR {str(exc).splitlines()[0][:200]}", flush=True)
                    continue
                results.setdefault(system.name, []).append(value)
                print(
                    f"  rep {rep + 1} {system.name:<18} {value['rate']:8,.0f} jobs/s  "
                    f"{value['cpu_s_per_1000']:.2f} CPU s/1000  ({value['n']} jobs)",
                    flush=True,
                )
    finally:
        stop_all()
    text = table(systems, results, "celery-reliable", args)
    print("\n" + text)
    meta = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "args": vars(args),
        "seconds": time.time() - started,
        "loadavg_end": os.getloadavg()[0],
        "git_commit": env.git_commit(),
        "peers": env.versions(str(env.PEERS_PYTHON), ["celery", "dramatiq", "saq", "redis"]),
    }
    (out_dir / "latest-io.md").write_text(text)
    (out_dir / "latest-io.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
