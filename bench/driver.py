"""The client side of one measurement, run in the system's own interpreter:
`python -m bench.driver '<json spec>'` prints one JSON line with its result.

It imports the system's job module (PYTHONPATH has bench/apps) and enqueues through
the system's own client API, so enqueue costs are each library's own.
"""

import json
import os
import random
import sys
import time

from redis import Redis

from bench import rcpu
from bench.systems import by_name


def in_chunks(items, size):
    for i in range(0, len(items), size):
        yield items[i : i + size]


def fill(client, fn, args, n, chunk=1000, max_seconds=None):
    """Put n jobs on the queue, in bulk where the library can; with max_seconds, stop
    after a chunk once that long has gone by. Returns (seconds, jobs enqueued)."""
    t = time.perf_counter()
    done = 0
    while done < n and (max_seconds is None or time.perf_counter() - t < max_seconds):
        part = min(chunk, n - done)
        if client.enqueue_many is not None:
            client.enqueue_many(fn, [args] * part)
        else:
            for _ in range(part):
                client.enqueue(fn, args)
        done += part
    return time.perf_counter() - t, done


def main():
    spec = json.loads(sys.argv[1])
    r = Redis.from_url(os.environ["BENCH_REDIS_URL"])
    client = by_name(spec["system"]).client()
    action = spec["action"]
    out = {}
    if action == "fill":
        out["seconds"], out["n"] = fill(
            client, spec["fn"], spec["args"], spec["n"], max_seconds=spec.get("max_seconds")
        )
    elif action == "enqueue":
        # Redis's CPU and commands per enqueued job too (bench/rcpu.py), single and bulk.
        args = ("x" * spec["payload"],)
        before = rcpu.snapshot(r)
        t = time.perf_counter()
        for _ in range(spec["n_single"]):
            client.enqueue("noop", args)
        out["single"] = spec["n_single"] / (time.perf_counter() - t)
        after = rcpu.snapshot(r)
        out.update({f"single_{k}": v for k, v in rcpu.per_job(before, after, spec["n_single"]).items()})
        out["bulk"] = None
        if client.enqueue_many is not None:
            out["bulk"] = spec["n_bulk"] / fill(client, "noop", args, spec["n_bulk"], spec["chunk"])[0]
            out.update({f"bulk_{k}": v for k, v in rcpu.per_job(after, rcpu.snapshot(r), spec["n_bulk"]).items()})
    elif action == "latency":
        if r.blpop("bench:go", 120) is None:  # the orchestrator says go once workers are warm
            raise SystemExit("no go signal")
        rng = random.Random(spec["seed"])  # the same arrival schedule for every system
        for i in range(spec["n"]):
            time.sleep(rng.uniform(spec["min_gap"], spec["max_gap"]))
            client.enqueue("probe", (i, time.time()))
            # Wait until it has started before the next gap, so each probe meets an idle
            # worker (a slow system is not measured on its own backlog). Blocking, no polling.
            if r.blmove("bench:probe", "bench:probe_seen", 30, "LEFT", "RIGHT") is None:
                raise SystemExit(f"probe {i} did not start within 30 s")
    elif action == "trickle":
        # Steady light traffic for the recovery workload, from "go" until killed (or
        # `seconds` later): a deployed system keeps receiving work after a crash.
        if r.blpop("bench:go", 120) is None:
            raise SystemExit("no go signal")
        gap, started = 1.0 / spec["rate"], time.monotonic()
        for i in range(int(spec["seconds"] * spec["rate"])):
            time.sleep(max(0.0, started + i * gap - time.monotonic()))
            client.enqueue("noop", ("",))
    else:
        raise SystemExit(f"unknown action {action}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
