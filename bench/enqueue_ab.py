"""`python -m bench.enqueue_ab OLD NEW`: single enqueue of two checkouts against the bare
client (`json.dumps` + `LPUSH`), in the same session.

- **instructions per call** (deterministic): a producer making 1,000 and then 3,000 calls
  under `valgrind --tool=callgrind`, (Ir(3,000) - Ir(1,000)) / 2,000, for the bare client
  and for each checkout's `noop.enqueue()` (100 B argument, status as configured there);
- **calls/s ratio**: one process per checkout, OLD and NEW alternating (`--procs` each),
  each timing the bare client and `noop.enqueue()` in alternating rounds on a private
  Redis; per process the median of the per-round ratios, and Redis's CPU and its time in
  commands per call (commandstats) for both.

Each checkout runs from its own `.venv/bin/python` (the bench's job module, `bench/apps`,
from that checkout). Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.checkout import run_child
from bench.redis_server import RedisServer

CHILD = textwrap.dedent("""
    import json, os, statistics, sys, time
    sys.path.insert(0, os.path.join(os.getcwd(), "bench", "apps"))
    import redis
    import bench_cogworker as app
    mode, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    r = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    arg = "x" * 100
    bare = lambda: r.lpush("bare:queue", json.dumps({"class": "noop", "args": [arg]}))
    cog = lambda: app.noop.enqueue(arg)
    bare(); cog()
    if mode in ("bare", "cog"):  # a fixed number of calls, for callgrind
        for _ in range(n):
            (bare if mode == "bare" else cog)()
        sys.exit(0)

    def per_call(fn):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t) / n * 1e6

    ratios = []
    for i in range(rounds):
        if i % 2 == 0:
            b = per_call(bare)
            c = per_call(cog)
        else:
            c = per_call(cog)
            b = per_call(bare)
        ratios.append(b / c)
    out = {"ratio": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    for name, fn in (("bare", bare), ("cog", cog)):
        r.config_resetstat()
        info = r.info("cpu")
        cpu0 = info["used_cpu_sys"] + info["used_cpu_user"]
        for _ in range(n):
            fn()
        info = r.info("cpu")
        out[name + "_redis_cpu_us"] = (info["used_cpu_sys"] + info["used_cpu_user"] - cpu0) / n * 1e6
        out[name + "_cmd_us"] = {k[8:]: round(v["usec"] / n, 2) for k, v in r.info("commandstats").items()
                                 if v["calls"] >= n and "info" not in k and "config" not in k}
    print(json.dumps(out))
""")


def child(checkout: str, url: str, argv: list[str], prefix: list[str] | None = None) -> str:
    return run_child(checkout, CHILD, argv, str(argv), prefix or (), env={"BENCH_REDIS_URL": url})


def instructions(checkout: str, mode: str) -> float:
    """Ir per call of `mode` (bare or cog) in `checkout`'s interpreter."""
    counts = []
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        for n in (1000, 3000):
            out = os.path.join(tmp, f"cg{n}")
            child(
                checkout,
                server.url,
                [mode, str(n), "0"],
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no"],
            )
            found = re.search(r"^(?:summary|totals):\s+(\d+)", Path(out).read_text(), re.M)
            if not found:
                raise RuntimeError(f"no totals in {out}")
            counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) / 2000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.enqueue_ab", description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--procs", type=int, default=6, help="processes per checkout (alternating)")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=2000, help="calls per round")
    ap.add_argument("--no-callgrind", action="store_true")
    args = ap.parse_args(argv)
    sides = {"old": args.old, "new": args.new}
    if not args.no_callgrind:
        print(f"bare client: {instructions(args.new, 'bare'):,.0f} instructions/call", flush=True)
        for side, path in sides.items():
            print(f"{side} noop.enqueue(): {instructions(path, 'cog'):,.0f} instructions/call", flush=True)
    got: dict[str, list[dict[str, object]]] = {side: [] for side in sides}
    for i in range(args.procs):
        for side in list(sides) if i % 2 == 0 else list(sides)[::-1]:
            with RedisServer() as server:
                got[side].append(json.loads(child(sides[side], server.url, ["ab", str(args.calls), str(args.rounds)])))
            v = got[side][-1]
            print(
                f"{side} process {i + 1}: enqueue ÷ bare calls/s {v['ratio']:.3f} [{v['min']:.3f}–{v['max']:.3f}]; "
                f"Redis CPU µs/call bare {v['bare_redis_cpu_us']:.1f}, enqueue {v['cog_redis_cpu_us']:.1f}; "
                f"in commands: bare {v['bare_cmd_us']}, enqueue {v['cog_cmd_us']}",
                flush=True,
            )
    for side in sides:
        ratios = [float(v["ratio"]) for v in got[side]]  # type: ignore[arg-type]
        print(
            f"{side}: enqueue ÷ bare calls/s, median of {len(ratios)} processes {statistics.median(ratios):.3f} "
            f"[{min(ratios):.3f}–{max(ratios):.3f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
