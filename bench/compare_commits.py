"""`python -m bench.compare_commits OLD NEW`: the worker's hot path, two checkouts side by side.

Each checkout runs from its own `.venv` (OLD/.venv/bin/python, NEW/.venv/bin/python) and
its own source tree, against a fresh private redis-server per measurement.

- **instructions per job** (the primary, deterministic figure): the single-process worker
  loop (`Worker`, plain fetch: what `python -m cogworker.worker` runs) draining N no-op
  jobs under `valgrind --tool=callgrind`, at two sizes; (Ir(N2) - Ir(N1)) / (N2 - N1)
  cancels the interpreter's start-up and imports. Jobs are enqueued beforehand by an
  unmeasured process. Instruction counts don't change with the machine's load.
- **Redis per job**: commands per job (`INFO commandstats`, Lua's calls included) and
  Redis's CPU per job (`used_cpu_user+sys`), over the worker's drain only.
- **wall clock** (secondary: noisy on a shared machine): single-process no-op jobs/s,
  prefork `--procs 2` jobs/s, single `enqueue` calls/s; OLD and NEW alternate, `--reps`
  times, medians and NEW/OLD ratios printed.

`--priorities`: a third side, NEW with its jobs enqueued at priorities 10, 0 and -10 in
turn (a third each, on three lists of the queue): what priorities cost when in use, beside
what they cost a fleet that uses none (NEW against OLD).

`COGWORKER_BENCH_STATUS=0|1` (or `--status on|off|default`) sets job status/history in
the checkout that knows them (`configure(status=, history=)`); the other ignores it.
Run from the repository root: `.venv/bin/python -m bench.compare_commits /work/wt/pre .`
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import tempfile
import textwrap
from pathlib import Path

from bench.checkout import app_dir, old_new_parser, run_child
from bench.drain import checkout_drain_rate
from bench.redis_server import RedisServer

# Run by each checkout's own interpreter (cwd = the checkout): stdlib + that cogworker only.
CHILD = textwrap.dedent("""
    import inspect, os, sys, time
    mode, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, sys.argv[4])
    import cogworker
    kwargs = {"redis_url": url}
    switch = os.environ.get("COGWORKER_BENCH_STATUS")
    if switch in ("0", "1") and "status" in getattr(cogworker.config.Config, "__dataclass_fields__", {}):
        kwargs.update(status=switch == "1", history=switch == "1")
    config = cogworker.configure(**kwargs)
    import cmp_app
    if mode == "enqueue":
        for start in range(0, n, 1000):
            cmp_app.noop.enqueue_many([(i,) for i in range(start, min(n, start + 1000))])
    elif mode == "enqueue_priorities":
        levels = [cmp_app.noop.options(priority=p) for p in (10, 0, -10)]
        for i in range(n):
            levels[i % 3].enqueue(i)
    elif mode in ("enqueue_single", "enqueue_single_priorities"):
        levels = [cmp_app.noop.options(priority=p) for p in (10, 0, -10)] if "prio" in mode else [cmp_app.noop]
        started = time.perf_counter()
        for i in range(n):
            levels[i % len(levels)].enqueue(i)
        print(n / (time.perf_counter() - started))
    elif mode == "work":
        try:
            from cogworker.engine.loop import Worker
        except ImportError:  # a checkout from before the packages (6755add and older)
            from cogworker.worker import Worker
        extra = {"lookahead": False} if "lookahead" in inspect.signature(Worker).parameters else {}
        worker = Worker([("default", None)], block_timeout=0.05, max_jobs=n, **extra)
        cpu, started = time.process_time(), time.perf_counter()
        worker.run()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(n / wall, cpu / n)
""")

APP = textwrap.dedent("""
    import cogworker

    @cogworker.job
    def noop(i):
        pass
""")


APP_PATH = app_dir("cmp_app", APP)


def child(checkout: str, mode: str, url: str, n: int, prefix: list[str] | None = None) -> str:
    return run_child(checkout, CHILD, [mode, url, str(n), APP_PATH], mode, prefix or ())


def redis_cpu(r) -> float:  # type: ignore[no-untyped-def]
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def instructions(checkout: str, n: int, fill: str = "enqueue") -> tuple[int, dict[str, dict[str, float]], float]:
    """Ir of the worker process draining n jobs (enqueued by ``fill``); Redis's commands
    and CPU over that drain."""
    import redis

    with RedisServer() as server:
        child(checkout, fill, server.url, n)
        r = redis.Redis.from_url(server.url)
        r.config_resetstat()
        cpu = redis_cpu(r)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cg.out")
            child(
                checkout,
                "work",
                server.url,
                n,
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"],
            )
            ir = _total_ir(out)
        cpu = redis_cpu(r) - cpu
        calls = {
            name.removeprefix("cmdstat_"): {"calls": float(v["calls"]), "usec": float(v["usec"])}
            for name, v in r.info("commandstats").items()
            if name.startswith("cmdstat_")
        }
        r.close()
    return ir, calls, cpu


def _total_ir(path: str) -> int:
    text = Path(path).read_text()
    found = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    if not found:
        raise RuntimeError(f"no totals in {path}")
    return int(found.group(1))


def per_job(checkout: str, n1: int, n2: int, fill: str = "enqueue") -> dict[str, object]:
    ir1, _, _ = instructions(checkout, n1, fill)
    ir2, calls, cpu = instructions(checkout, n2, fill)
    skip = {"info", "config|resetstat", "config", "client|setinfo", "client", "hello", "script|load", "script"}
    commands = {
        k: round(v["calls"] / n2, 3) for k, v in sorted(calls.items()) if k not in skip and v["calls"] / n2 >= 0.001
    }
    # Time inside scripts is counted both for EVALSHA and for each command the script ran.
    top = sum(
        v["usec"]
        for k, v in calls.items()
        if k not in skip and k in ("evalsha", "eval", "exec", "multi") or k not in skip and not _in_scripts(k)
    )
    return {
        "ir_per_job": (ir2 - ir1) / (n2 - n1),
        "commands_per_job": commands,
        "redis_calls_per_job": round(sum(commands.values()), 3),
        "redis_usec_per_job": round(top / n2, 2),
        "redis_cpu_usec_per_job": round(cpu / n2 * 1e6, 2),
    }


def _in_scripts(command: str) -> bool:
    """Commands the worker's scripts run (their time is inside EVALSHA's already)."""
    return command in {
        "lrem",
        "del",
        "lmove",
        "hset",
        "time",
        "exists",
        "smembers",
        "expire",
        "rpush",
        "ltrim",
        "hdel",
        "xrevrange",
        "zadd",
        "lpos",
        "lindex",
    }


def single(checkout: str, n: int, fill: str = "enqueue") -> tuple[float, float, float]:
    """Jobs/s of the single-process worker, its CPU per job, and Redis's CPU per job over
    that run (the child's start included: a few ms of an idle server's)."""
    import redis

    with RedisServer() as server:
        child(checkout, fill, server.url, n)
        r = redis.Redis.from_url(server.url)
        before = redis_cpu(r)
        rate, cpu = child(checkout, "work", server.url, n).split()
        used = redis_cpu(r) - before
        r.close()
    return float(rate), float(cpu) * 1e6, used / n * 1e6


def enqueue_single(checkout: str, n: int, fill: str = "enqueue") -> float:
    with RedisServer() as server:
        mode = "enqueue_single_priorities" if fill == "enqueue_priorities" else "enqueue_single"
        return float(child(checkout, mode, server.url, n))


def prefork2(checkout: str, n: int, fill: str = "enqueue") -> float:
    """bench.core's prefork figure: steady state, from 5% done to the queue drained."""
    with RedisServer() as server:
        child(checkout, fill, server.url, n)
        lists = ["default"] if fill == "enqueue" else ["default 10", "default", "default -10"]
        return checkout_drain_rate(
            checkout, server.url, "cmp_app", APP_PATH, n, [f"cogworker:queue:{q}" for q in lists]
        )


def main(argv: list[str] | None = None) -> None:
    ap = old_new_parser(
        "python -m bench.compare_commits",
        __doc__,
        10_000,
        reps_help="alternating wall-clock runs of each (0: none)",
        jobs_help="jobs per wall-clock run",
    )
    ap.add_argument("--ir-jobs", default="500,2500", help="the two sizes for instructions/job ('' to skip)")
    ap.add_argument("--status", choices=("on", "off", "default"), default="default")
    ap.add_argument("--only", default="single,prefork2,enqueue", help="wall-clock figures to take")
    ap.add_argument("--priorities", action="store_true", help="a third side: NEW with priorities in use")
    args = ap.parse_args(argv)
    if args.status != "default":
        os.environ["COGWORKER_BENCH_STATUS"] = "1" if args.status == "on" else "0"
    sides = {"old": args.old, "new": args.new, **({"prio": args.new} if args.priorities else {})}
    fills = {"old": "enqueue", "new": "enqueue", "prio": "enqueue_priorities"}
    for name, path in sides.items():
        rev = subprocess.run(
            ["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        print(f"{name}: {path} @ {rev}", flush=True)
    if args.ir_jobs:
        n1, n2 = (int(x) for x in args.ir_jobs.split(","))
        ir = {}
        for name, path in sides.items():
            ir[name] = per_job(path, n1, n2, fills[name])
            print(
                f"{name}: {ir[name]['ir_per_job']:,.0f} instructions/job (worker process, callgrind); "
                f"Redis {ir[name]['redis_calls_per_job']} commands/job {ir[name]['commands_per_job']}, "
                f"{ir[name]['redis_usec_per_job']} us/job in commands (commandstats), "
                f"{ir[name]['redis_cpu_usec_per_job']} us/job Redis CPU (used_cpu)",
                flush=True,
            )
        for name in list(sides)[1:]:
            ratio = ir[name]["ir_per_job"] / ir["old"]["ir_per_job"]  # type: ignore[operator]
            cpu_ratio = ir[name]["redis_cpu_usec_per_job"] / ir["old"]["redis_cpu_usec_per_job"]  # type: ignore[operator]
            print(f"instructions/job {name}/old = {ratio:.4f}; Redis CPU/job {name}/old = {cpu_ratio:.3f}")
    kinds = {
        "single": lambda p, fill: single(p, args.jobs, fill),
        "prefork2": lambda p, fill: prefork2(p, args.jobs, fill),
        "enqueue": lambda p, fill: enqueue_single(p, 2000, fill),
    }
    chosen = [k for k in args.only.split(",") if k]
    figures: dict[tuple[str, str], list[float]] = {(k, s): [] for k in chosen for s in sides}
    cpu: dict[str, list[float]] = {s: [] for s in sides}
    rcpu: dict[str, list[float]] = {s: [] for s in sides}
    for rep in range(args.reps):
        for kind in chosen:
            order = list(sides) if rep % 2 == 0 else list(sides)[::-1]
            for side in order:
                value = kinds[kind](sides[side], fills[side])
                if kind == "single":
                    value, us, redis_us = value
                    cpu[side].append(us)
                    rcpu[side].append(redis_us)
                figures[kind, side].append(value)
                print(f"rep {rep + 1} {kind:8} {side} {value:,.0f}/s", flush=True)
    for kind in chosen if args.reps else []:
        old = statistics.median(figures[kind, "old"])
        for name in list(sides)[1:]:
            new = statistics.median(figures[kind, name])
            print(f"{kind:8} median old {old:,.0f}/s  {name} {new:,.0f}/s  {name}/old {new / old:.3f}")
    if args.reps and "single" in chosen:
        old = statistics.median(cpu["old"])
        for name in list(sides)[1:]:
            new = statistics.median(cpu[name])
            print(f"single   worker CPU/job median old {old:.1f}us  {name} {new:.1f}us  {name}/old {new / old:.3f}")
        old = statistics.median(rcpu["old"])
        for name in list(sides)[1:]:
            new = statistics.median(rcpu[name])
            print(f"single   Redis CPU/job median old {old:.1f}us  {name} {new:.1f}us  {name}/old {new / old:.3f}")


if __name__ == "__main__":
    main()
