"""`python -m bench.limits_cost OLD NEW`: what rate limits cost (docs/architecture.md#limits).

Rows, in one command, OLD and NEW alternating, `--reps` times, a fresh private
redis-server per measurement, each checkout from its own `.venv` and source tree (as
`bench.compare_commits`):

- `unlimited` on OLD and on NEW: no-op jobs with no limit, the single-process worker loop
  (`Worker`, plain fetch) and prefork `--procs 2`. The limit check is on this path, so
  NEW ÷ OLD is its cost: it should be 1 within noise;
- `limited` on NEW: the same no-op job declared with `Concurrency("bench", 1000)`, a limit
  it never reaches: the price of taking and giving back a slot (two more scripts a job);
- Redis commands per job (`INFO commandstats` over the single-process drain): the same
  for `unlimited` on both sides means no extra round trip on the hot path;
- with `--ir N1,N2`, client instructions per job of the single-process drain under
  `valgrind --tool=callgrind`, (Ir(N2) - Ir(N1)) / (N2 - N1): deterministic, whatever the
  machine's load (the wall-clock rows are not, on a shared machine).

Prints every figure, then medians and ratios. Run from the repository root, OLD being a
checkout of main with a `.venv` (a symlink to this one's will do, as its source tree comes
first on `sys.path`):
`git archive main | tar -x -C /tmp/main && ln -s $PWD/.venv /tmp/main/.venv &&
 .venv/bin/python -m bench.limits_cost /tmp/main .`
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import textwrap
from pathlib import Path

from bench.checkout import app_dir, old_new_parser, run_child
from bench.drain import checkout_drain_rate
from bench.redis_server import RedisServer

CHILD = textwrap.dedent("""
    import sys, time
    mode, kind, url, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    sys.path.insert(0, sys.argv[5])
    import cogworker
    cogworker.configure(redis_url=url)
    import limits_app
    job = getattr(limits_app, kind)
    if mode == "enqueue":
        for start in range(0, n, 1000):
            job.enqueue_many([(i,) for i in range(start, min(n, start + 1000))])
    else:
        from cogworker.engine.loop import Worker
        worker = Worker([("default", None)], block_timeout=0.05, max_jobs=n, lookahead=False)
        started = time.perf_counter()
        worker.run()
        print(n / (time.perf_counter() - started))
""")

APP = textwrap.dedent("""
    import cogworker

    @cogworker.job
    def unlimited(i):
        pass

    if hasattr(cogworker, "Concurrency"):
        @cogworker.job(limits=[cogworker.Concurrency("bench", 1000)])
        def limited(i):
            pass
""")


APP_PATH = app_dir("limits_app", APP)


def child(checkout: str, mode: str, kind: str, url: str, n: int, prefix: tuple[str, ...] = ()) -> str:
    return run_child(checkout, CHILD, [mode, kind, url, str(n), APP_PATH], f"{mode} {kind}", prefix)


def single(checkout: str, kind: str, n: int) -> tuple[float, dict[str, float]]:
    """Jobs/s of the single-process loop, and Redis commands per job over the drain."""
    import redis

    with RedisServer() as server:
        child(checkout, "enqueue", kind, server.url, n)
        r = redis.Redis.from_url(server.url)
        r.config_resetstat()
        rate = float(child(checkout, "work", kind, server.url, n))
        calls = {
            name.removeprefix("cmdstat_"): float(v["calls"]) / n
            for name, v in r.info("commandstats").items()
            if name in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_exec", "cmdstat_lmove", "cmdstat_lrem")
        }
        r.close()
    return rate, calls


def instructions(checkout: str, kind: str, n: int) -> int:
    """Client instructions (callgrind's total) of the single-process drain of n jobs."""
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        child(checkout, "enqueue", kind, server.url, n)
        out = os.path.join(tmp, "cg.out")
        child(
            checkout,
            "work",
            kind,
            server.url,
            n,
            ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"),
        )
        found = re.search(r"^(?:summary|totals):\s+(\d+)", Path(out).read_text(), re.M)
        if not found:
            raise RuntimeError(f"no totals in {out}")
        return int(found.group(1))


def prefork2(checkout: str, kind: str, n: int) -> float:
    """Steady state, as bench.core: from 5% done to the queue drained."""
    with RedisServer() as server:
        child(checkout, "enqueue", kind, server.url, n)
        return checkout_drain_rate(checkout, server.url, "limits_app", APP_PATH, n)


def main(argv: list[str] | None = None) -> None:
    ap = old_new_parser("python -m bench.limits_cost", __doc__, 10_000)
    ap.add_argument("--ir", default="", help="N1,N2: instructions per job under callgrind ('': skipped)")
    args = ap.parse_args(argv)
    rows = [("OLD", args.old, "unlimited"), ("NEW", args.new, "unlimited"), ("NEW", args.new, "limited")]
    if args.ir:
        n1, n2 = (int(x) for x in args.ir.split(","))
        for side, checkout, kind in rows:
            per = (instructions(checkout, kind, n2) - instructions(checkout, kind, n1)) / (n2 - n1)
            print(f"instructions per job, {side} {kind}: {per:,.0f}", flush=True)
    figures: dict[tuple[str, str, str], list[float]] = {}
    commands: dict[tuple[str, str], dict[str, float]] = {}
    for rep in range(args.reps):
        for side, checkout, kind in rows:
            rate, calls = single(checkout, kind, args.jobs)
            commands[side, kind] = calls
            figures.setdefault(("single", side, kind), []).append(rate)
            pre = prefork2(checkout, kind, args.jobs)
            figures.setdefault(("prefork2", side, kind), []).append(pre)
            print(
                f"rep {rep + 1} {side} {kind:9} single {rate:8,.0f} jobs/s  prefork2 {pre:8,.0f} jobs/s  "
                f"commands/job {calls}",
                flush=True,
            )
    if not args.reps:
        return
    print()
    print(
        "| figure | OLD unlimited | NEW unlimited | NEW limited | NEW unlimited ÷ OLD | NEW limited ÷ NEW unlimited |"
    )
    print("|---|---|---|---|---|---|")
    for figure in ("single", "prefork2"):
        old, new, limited = (statistics.median(figures[figure, side, kind]) for side, _, kind in rows)
        print(
            f"| {figure} jobs/s (median of {args.reps}) | {old:,.0f} | {new:,.0f} | {limited:,.0f} | "
            f"{new / old:.3f} | {limited / new:.3f} |"
        )
    for key, calls in sorted(commands.items()):
        print(f"Redis commands per job, {key[0]} {key[1]}: {calls}")


if __name__ == "__main__":
    main()
