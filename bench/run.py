"""The orchestrator: which systems, which workloads, in which order, with which sizes.

Order: workload by workload; inside one, repetition by repetition, each repetition
going through every system. Drift on the machine (heat, a background job) then hits
every system alike instead of whichever happened to run last.
"""

import datetime
import os
import platform
import signal
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import env, fleet, recovery, redis_server, report, truenoop, workloads
from bench.systems import all_systems

# Sizes per mode. Full: about 10-12 minutes on 2 cores; quick: about 2-3.
PLANS = {
    "full": dict(
        reps=3,
        thr_n=10_000,
        thr_cap=12.0,  # 10,000 no-op jobs; a peer slower than ~800/s is cut 12 s after its 1st
        tn_n=50_000,
        tn_cap=12.0,  # 50,000 true no-op jobs (the size); cut 12 s after the 1st
        curve_n=2_000,
        curve_cap=1.0,  # curves: N = 1, 4 and payloads 10 KB, 100 KB
        cpu_n=200,
        cpu_ms=10,  # CPU scaling: 200 jobs of ~10 ms
        lat_n=500,
        lat_gap=(0.0, 0.006),  # pickup: 500 probes, 0-6 ms apart once the last started
        enq_single=2_000,
        enq_bulk=5_000,
        enq_chunk=1_000,
        mem_warmup=40,  # jobs run before measuring memory
        rec_trials=5,
        rec_slow_trials=2,
        rec_bound=150.0,
        rec_job=1.0,
        rec_trickle=20,
    ),
    "quick": dict(
        reps=1,
        thr_n=2_000,
        thr_cap=2.0,
        tn_n=5_000,
        tn_cap=2.0,
        curve_n=500,
        curve_cap=0.7,
        cpu_n=50,
        cpu_ms=10,
        lat_n=100,
        lat_gap=(0.0, 0.006),
        enq_single=500,
        enq_bulk=1_000,
        enq_chunk=500,
        mem_warmup=20,
        rec_trials=3,
        rec_slow_trials=1,
        rec_bound=150.0,
        rec_job=1.0,
        rec_trickle=20,
    ),
}
PAYLOAD = 100  # bytes: the no-op job's one argument; also the 100 B point of the payload curve
CURVE_POINTS = [(1, PAYLOAD), (4, PAYLOAD), (2, 10 * 1024), (2, 100 * 1024)]  # (procs, payload)
SEED = 4  # the latency workload's arrival schedule, the same for every system

# Which systems each workload runs. The bare-protocol rows are a throughput ceiling;
# they have no supervisor (nothing restarts a killed one) and no preloading.
BARE_EXTRA = {"bare-lua", "bare-ahead", "bare-batch8", "bare-batch32"}
SKIP = {
    "curves": BARE_EXTRA,
    "cpu": BARE_EXTRA,
    "latency": BARE_EXTRA,
    "memory": {"bare-2rt", *BARE_EXTRA},
    "recovery": {"bare-2rt", *BARE_EXTRA},
}

_print_lock = threading.Lock()


def say(*parts):
    with _print_lock:
        print(*parts, flush=True)


class Context:
    def __init__(self, cog_python, log_dir):
        self.cog_python = cog_python
        self.log_dir = log_dir
        self.prefill = workloads.Prefill()

    def python_for(self, system):
        return self.cog_python if system.interpreter == "project" else str(env.PEERS_PYTHON)


def calibrate_cpu(ms):
    """Iterations of the CPU body that take ~ms milliseconds here, and their measured time
    (the 'job time' of the ideal). Same interpreter build as every system's."""
    sys.path.insert(0, str(env.APPS))
    from bench_body import burn

    deadline = time.perf_counter() + 0.3
    while time.perf_counter() < deadline:  # let the CPU clock and the interpreter warm up
        burn(10_000)
    per_iter = statistics.median(_timed(burn, 100_000) for _ in range(9)) / 100_000
    iterations = int(ms / 1000 / per_iter)
    return iterations, statistics.median(_timed(burn, iterations) for _ in range(21))


def _timed(fn, arg):
    t = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t


def select_systems(wanted, cog_python, cog_error):
    systems = all_systems()
    if wanted:
        unknown = set(wanted) - {s.name for s in systems} - {s.lib for s in systems}
        if unknown:
            raise SystemExit(
                f"bench: unknown system(s) {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in systems)}"
            )
        systems = [s for s in systems if s.name in wanted or s.lib in wanted]
    notes = []
    if cog_python is None:
        notes.append(f"cogworker skipped: its prefork CLI does not import ({cog_error})")
        systems = [s for s in systems if s.lib != "cogworker"]
    return systems, notes


class Results:
    """results[workload][point][system] = {"reps": [...], "error": "..."}"""

    def __init__(self):
        self.data = {}

    def slot(self, workload, point, system):
        return self.data.setdefault(workload, {}).setdefault(point, {}).setdefault(system.name, {"reps": []})

    def failed(self, workload, point, system):
        return "error" in self.slot(workload, point, system)


def measure(results, workload, point, system, label, fn):
    slot = results.slot(workload, point, system)
    if "error" in slot or workloads.STOP.is_set():
        return None
    t = time.monotonic()
    try:
        value = fn()
    except Exception as e:  # one system failing must not stop the others; the error is reported
        slot["error"] = str(e).strip().splitlines()[0][:300]
        say(f"  {label:<34} {system.name:<16} ERROR {slot['error']}")
        return None
    slot["reps"].append(value)
    say(f"  {label:<34} {system.name:<16} {report.brief(workload, value)}  ({time.monotonic() - t:.1f} s)")
    return value


def run_sequential(results, workload, systems, plan, reps, points):
    """points: [(point key, label, fn(system) -> dict)]"""
    for rep in range(reps):
        for point, label, fn in points:
            for system in systems:
                measure(
                    results,
                    workload,
                    point,
                    system,
                    f"{label} rep {rep + 1}/{reps}",
                    lambda fn=fn, system=system: fn(system),
                )


def cogworker_python():
    """The interpreter that runs cogworker's side (and why none can, if none): the one
    BENCH_COGWORKER_PYTHON names, the launcher's, or the project's .venv, made if missing."""
    launcher = os.environ.get("BENCH_LAUNCHER", sys.executable)
    candidates = [os.environ.get("BENCH_COGWORKER_PYTHON"), launcher, str(env.PROJECT_PYTHON)]
    cog_python, cog_error = env.find_cogworker_python(candidates)
    if cog_python is None and not os.environ.get("BENCH_COGWORKER_PYTHON"):
        env.ensure_project_venv()  # a fresh clone: no manual step
        cog_python, cog_error = env.find_cogworker_python(candidates)
    return cog_python, cog_error


def run_meta(args, mode, reps, plan, notes, cog_python, iterations, job_seconds):
    """What the run's report says about the run itself: when, where, with what versions."""
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "mode": mode,
        "reps": reps,
        "cpu_count": os.cpu_count(),
        "workloads": list(args.workloads),
        "partial": set(args.workloads) != set(RUNNERS),
        "machine": f"{platform.system()} {platform.release()} {platform.machine()}",
        "redis_server": redis_server.redis_version(),
        "peers": env.versions(
            str(env.PEERS_PYTHON), ["celery", "kombu", "billiard", "rq", "dramatiq", "huey", "redis", "hiredis"]
        ),
        "cogworker": (
            {
                **env.versions(cog_python, ["redis", "hiredis"]),
                "interpreter": cog_python,
                "version": env.cogworker_version(cog_python),
            }
            if cog_python
            else None
        ),
        "peers_interpreter": str(env.PEERS_PYTHON),
        "git_commit": env.git_commit(),
        "plan": {**plan, "payload": PAYLOAD, "curve_points": CURVE_POINTS},
        "cpu_job": {"iterations": iterations, "seconds": job_seconds},
        "notes": notes,
        "loadavg_start": os.getloadavg()[0],
    }


def run_workloads(ctx, results, systems, workloads_run, plan, reps, iterations, job_seconds):
    """Each workload in turn over the systems it applies to; the seconds each took."""
    seconds = {}
    for workload in workloads_run:
        chosen = [s for s in systems if s.name not in SKIP.get(workload, set())]
        say(f"\n== {workload}")
        t = time.monotonic()
        RUNNERS[workload](ctx, results, chosen, plan, reps, iterations, job_seconds)
        ctx.prefill.clear()
        seconds[workload] = round(time.monotonic() - t, 1)
        say(f"   ({workload}: {seconds[workload]:.0f} s)")
    return seconds


def main(args):
    # Stop cleanly (every fleet and redis-server killed) on TERM and on Ctrl-C, even when
    # launched in the background with SIGINT ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    started = time.time()
    mode = "quick" if args.quick else "full"
    plan = dict(PLANS[mode])
    reps = args.reps or plan["reps"]
    out_dir = env.BENCH / "results"
    log_dir = out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    for old in log_dir.glob("*.log"):  # this run's worker logs only
        old.unlink()

    cog_python, cog_error = cogworker_python()
    systems, notes = select_systems(args.systems, cog_python, cog_error)
    ctx = Context(cog_python, log_dir)
    for n in notes:
        say(f"bench: {n}")

    iterations, job_seconds = calibrate_cpu(plan["cpu_ms"])
    meta = run_meta(args, mode, reps, plan, notes, cog_python, iterations, job_seconds)
    say(
        f"bench: {mode} run, {reps} rep(s), {len(systems)} systems, {os.cpu_count()} CPUs, "
        f"redis-server {meta['redis_server']}; load average {meta['loadavg_start']:.2f}; "
        f"CPU job = {iterations} iterations = {job_seconds * 1000:.1f} ms"
    )

    results = Results()
    try:
        meta["workload_seconds"] = run_workloads(
            ctx, results, systems, args.workloads, plan, reps, iterations, job_seconds
        )
    finally:
        fleet.stop_all()
        redis_server.stop_all()

    meta["duration_s"] = round(time.time() - started, 1)
    meta["loadavg_end"] = os.getloadavg()[0]
    doc = report.build(meta, systems, results.data)
    text = report.markdown(doc)
    paths = report.write(doc, text, out_dir)
    say("\n" + text)
    wrote = ", ".join(str(Path(p).relative_to(env.REPO)) for p in paths)
    say(f"bench: done in {meta['duration_s']:.0f} s; wrote {wrote}")
    return 0


def _interrupt(signum, frame):
    workloads.STOP.set()  # the threads of memory/recovery give up their waits too
    raise KeyboardInterrupt


def w_throughput(ctx, results, systems, plan, reps, *_):
    run_sequential(
        results,
        "throughput",
        systems,
        plan,
        reps,
        [
            (
                f"2p-{PAYLOAD}B",
                f"{plan['thr_n']} no-op, N=2",
                lambda s: workloads.throughput(ctx, s, 2, PAYLOAD, plan["thr_n"], plan["thr_cap"]),
            )
        ],
    )


def w_truenoop(ctx, results, systems, plan, reps, *_):
    run_sequential(
        results,
        "truenoop",
        systems,
        plan,
        reps,
        [
            (
                f"2p-{PAYLOAD}B",
                f"{plan['tn_n']} true no-op, N=2",
                lambda s: truenoop.truenoop(ctx, s, 2, PAYLOAD, plan["tn_n"], plan["tn_cap"]),
            )
        ],
    )


def w_curves(ctx, results, systems, plan, reps, *_):
    run_sequential(
        results,
        "curves",
        systems,
        plan,
        reps,
        [
            (
                f"{procs}p-{payload}B",
                f"{plan['curve_n']} no-op, N={procs}, {payload} B",
                lambda s, procs=procs, payload=payload: workloads.throughput(
                    ctx, s, procs, payload, plan["curve_n"], plan["curve_cap"]
                ),
            )
            for procs, payload in CURVE_POINTS
        ],
    )


def w_cpu(ctx, results, systems, plan, reps, iterations, job_seconds):
    run_sequential(
        results,
        "cpu",
        systems,
        plan,
        reps,
        [
            (
                f"{procs}p",
                f"{plan['cpu_n']} CPU jobs, N={procs}",
                lambda s, procs=procs: workloads.cpu_scaling(ctx, s, procs, plan["cpu_n"], iterations),
            )
            for procs in (1, 2)
        ],
    )


def w_latency(ctx, results, systems, plan, reps, *_):
    lo, hi = plan["lat_gap"]
    run_sequential(
        results,
        "latency",
        systems,
        plan,
        reps,
        [("2p", f"{plan['lat_n']} probes, N=2", lambda s: workloads.latency(ctx, s, 2, plan["lat_n"], lo, hi, SEED))],
    )


def w_enqueue(ctx, results, systems, plan, reps, *_):
    # Enqueueing is the client's business: one run per library (celery-default and
    # celery-reliable share one client), reported on each of its rows.
    per_lib = {}
    for s in systems:
        per_lib.setdefault(s.lib, s)
    run_sequential(
        results,
        "enqueue",
        list(per_lib.values()),
        plan,
        reps,
        [
            (
                f"{PAYLOAD}B",
                f"{plan['enq_single']} single + {plan['enq_bulk']} bulk",
                lambda s: workloads.enqueue(ctx, s, plan["enq_single"], plan["enq_bulk"], plan["enq_chunk"], PAYLOAD),
            )
        ],
    )
    for s in systems:
        if per_lib[s.lib] is not s:
            point = results.data["enqueue"][f"{PAYLOAD}B"]
            point[s.name] = point[per_lib[s.lib].name]


def w_memory(ctx, results, systems, plan, reps, *_):
    # Bytes, not seconds: the systems' fleets may run side by side without skewing it.
    for rep in range(reps):
        for procs in (2, 4):
            label = f"memory N={procs} rep {rep + 1}/{reps}"

            def one(s, procs=procs, label=label):
                measure(
                    results,
                    "memory",
                    f"{procs}p",
                    s,
                    label,
                    lambda: workloads.memory(ctx, s, procs, plan["mem_warmup"]),
                )

            with ThreadPoolExecutor(len(systems) or 1) as pool:
                list(pool.map(one, systems))


def w_recovery(ctx, results, systems, plan, reps, *_):
    # Mostly waiting (a 1 s job, then up to rec_bound s for a re-run): the systems' trials
    # run side by side, each system's one after the other. A system whose trial was not
    # re-run within SLOW s (a supervisor restart, a heartbeat timeout, or not at all) gets
    # rec_slow_trials in all: each such trial costs a minute or more.
    trials = max(plan["rec_trials"], reps)

    def one_system(s):
        for i in range(trials):
            measure(
                results,
                "recovery",
                "2p",
                s,
                f"SIGKILL mid-job, trial {i + 1}/{trials}",
                lambda: recovery.recovery(ctx, s, 2, plan["rec_job"], plan["rec_bound"], plan["rec_trickle"]),
            )
            slot = results.slot("recovery", "2p", s)
            slow = any(r["lost"] or r["rerun_s"] > SLOW for r in slot["reps"])
            if "error" in slot or (slow and len(slot["reps"]) >= plan["rec_slow_trials"]):
                return

    with ThreadPoolExecutor(len(systems) or 1) as pool:
        list(pool.map(one_system, systems))


SLOW = 20.0  # seconds: a re-run later than this is not a fast failover


RUNNERS = {
    "throughput": w_throughput,
    "truenoop": w_truenoop,
    "curves": w_curves,
    "cpu": w_cpu,
    "latency": w_latency,
    "enqueue": w_enqueue,
    "memory": w_memory,
    "recovery": w_recovery,
}
