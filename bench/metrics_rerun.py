"""How long a SIGKILLed child's job takes to run again while scrapers hammer the master's
/metrics (issue #25, point 8): a prefork master with 500 job classes of 8,000 characters
counted (unknown classes, each filed dead), N scraper threads requesting /metrics back to
back, and a job whose first run hangs: its child is SIGKILLed and the time until the job
starts again is read from Redis (the job writes its start). Each run also without scrapers,
alternating, as the baseline. Never asserted: the numbers are for the closing note.

    .venv/bin/python -m bench.metrics_rerun [--runs 5] [--scrapers 2] [--label-chars 8000]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

import redis  # noqa: E402
from prefork_harness import Master, wait_for  # noqa: E402
from redis_server import RedisServer, free_port  # noqa: E402


def unknown(name: str) -> str:
    return json.dumps(
        {
            "class": name,
            "args": [],
            "kwargs": {},
            "jid": secrets.token_hex(12),
            "queue": "default",
            "retry": 0,
            "created_at": time.time(),
            "enqueued_at": time.time(),
        }
    )


def hammer(port: int, stop: threading.Event, out: dict) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
                out["bytes"] = max(out.get("bytes", 0), len(answer.read()))
            out.setdefault("took", []).append(time.monotonic() - started)
        except Exception:  # refused, timed out, or cut short (IncompleteRead): a failed scrape
            out["failed"] = out.get("failed", 0) + 1


def rerun(r: redis.Redis, tag: str) -> float:
    r.lpush(
        "cogworker:queue:default",
        json.dumps(
            {
                "class": "apps.obs_app.hang",
                "args": [tag],
                "kwargs": {},
                "jid": secrets.token_hex(12),
                "queue": "default",
                "retry": 3,
                "created_at": time.time(),
                "enqueued_at": time.time(),
            }
        ),
    )
    mine = lambda: [x.decode() for x in r.lrange("test:started", 0, -1) if x.decode().startswith(tag + ":")]  # noqa: E731
    started = wait_for(mine, 30, 0.005, "the first run")
    killed_at = time.monotonic()
    os.kill(int(started[0].split(":")[1]), signal.SIGKILL)
    wait_for(lambda: len(mine()) == 2, 30, 0.002, "the re-run")
    return time.monotonic() - killed_at


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scrapers", type=int, default=2)
    parser.add_argument("--label-chars", type=int, default=8000)
    parser.add_argument("--classes", type=int, default=500)
    args = parser.parse_args()
    server = RedisServer().start()
    port = free_port()
    master = Master(server.url, module="apps.obs_app", procs=2, args=["--metrics-port", str(port)])
    try:
        master.wait_children(timeout=60)
        r = server.client()
        r.lpush(
            "cogworker:queue:default",
            *[unknown(f"apps.obs_app.u{i:04d}" + "L" * args.label_chars) for i in range(args.classes)],
        )
        wait_for(lambda: r.zcard("cogworker:dead") == args.classes, 120, 0.1, "the classes counted")
        times: dict[str, list[float]] = {"idle": [], "scraped": []}
        scrapes: dict = {}
        for i in range(args.runs):
            times["idle"].append(rerun(r, f"idle{i}"))
            master.wait_children(timeout=30)
            stop = threading.Event()
            threads = [
                threading.Thread(target=hammer, args=(port, stop, scrapes), daemon=True) for _ in range(args.scrapers)
            ]
            for t in threads:
                t.start()
            time.sleep(1.0)
            times["scraped"].append(rerun(r, f"scraped{i}"))
            stop.set()
            for t in threads:
                t.join(60)
            master.wait_children(timeout=30)
        took = scrapes.get("took", [0.0])
        for what, values in times.items():
            print(
                f"re-run after SIGKILL, {what:7}: median {statistics.median(values):.3f} s, "
                f"max {max(values):.3f} s  ({', '.join(f'{v:.3f}' for v in values)})"
            )
        print(
            f"scrapes: {len(took)} answered, {scrapes.get('failed', 0)} failed, "
            f"median {statistics.median(took):.3f} s, body {scrapes.get('bytes', 0) / 1e6:.2f} MB"
        )
    finally:
        master.signal(signal.SIGTERM)
        master.proc.wait(30)
        server.cleanup()


if __name__ == "__main__":
    main()
