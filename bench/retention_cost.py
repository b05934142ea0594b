"""`python -m bench.retention_cost OLD NEW`: what retention's trimming costs no-op jobs.

Two checkouts as `bench.compare_commits` takes them (each with its own `.venv`), the
prefork `--procs 2` worker draining `--jobs` true no-op jobs (50,000 by default, so the
10,000-success count bound trims for four fifths of them) from a fresh private
redis-server; OLD and NEW alternate, `--reps` times. Over the steady window (5 % done to
the queue drained) it takes the jobs/s, Redis's CPU per job (`INFO cpu`) and Redis's
commands per job (`INFO commandstats`, the scripts' own calls included); prints every
figure, the medians and NEW/OLD. Run from the repository root:

    .venv/bin/python -m bench.retention_cost /path/to/main-checkout . --reps 5
"""

from __future__ import annotations

import statistics
import time

from bench.checkout import old_new_parser
from bench.compare_commits import APP_PATH, child, redis_cpu
from bench.drain import checkout_prefork, wait_drained, wait_steady
from bench.redis_server import RedisServer


def commands(r) -> int:  # type: ignore[no-untyped-def]
    return sum(
        int(v["calls"])
        for k, v in r.info("commandstats").items()
        if k.startswith("cmdstat_") and k not in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_info", "cmdstat_llen")
    )


def prefork2(checkout: str, n: int) -> tuple[float, float, float]:
    """jobs/s, Redis CPU µs per job and commands per job over the steady window."""
    import redis

    with RedisServer() as server:
        child(checkout, "enqueue", server.url, n)
        r = redis.Redis.from_url(server.url)
        queue = "cogworker:queue:default"
        try:
            with checkout_prefork(checkout, server.url, "cmp_app", APP_PATH):
                left = wait_steady(r, queue, n)
                started, cpu, calls = time.perf_counter(), redis_cpu(r), commands(r)
                wait_drained(r, queue)
                wall = time.perf_counter() - started
                time.sleep(1.5)  # the last status flush lands: its cost is the window's too
                return left / wall, (redis_cpu(r) - cpu) / left * 1e6, (commands(r) - calls) / left
        finally:
            r.close()


def main(argv: list[str] | None = None) -> None:
    ap = old_new_parser("python -m bench.retention_cost", __doc__, 50_000)
    args = ap.parse_args(argv)
    sides = {"old": args.old, "new": args.new}
    figures: dict[str, list[tuple[float, float, float]]] = {s: [] for s in sides}
    for rep in range(args.reps):
        for side in list(sides) if rep % 2 == 0 else list(sides)[::-1]:
            rate, cpu, calls = prefork2(sides[side], args.jobs)
            figures[side].append((rate, cpu, calls))
            print(
                f"rep {rep + 1} {side} {rate:,.0f} jobs/s, Redis {cpu:.2f} us/job, {calls:.2f} commands/job", flush=True
            )
    medians = {s: [statistics.median(f[i] for f in figures[s]) for i in range(3)] for s in sides}
    for i, what in enumerate(("jobs/s", "Redis CPU us/job", "commands/job")):
        old, new = medians["old"][i], medians["new"][i]
        print(f"{what:17} median old {old:,.2f}  new {new:,.2f}  new/old {new / old:.3f}")


if __name__ == "__main__":
    main()
