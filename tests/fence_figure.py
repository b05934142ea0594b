"""The figure for fault F2: 2,000 short jobs on two prefork masters, Redis SIGSTOPped for
2x the orphan threshold mid-run; then every job's start/end log is checked.

    .venv/bin/python tests/fence_figure.py [--boot-at-resume]

``--boot-at-resume`` also starts a third master as Redis comes back, so its first
orphan-recovery pass looks at once. Prints: lost, duplicates, concurrent duplicates."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fence_check import check, ended  # noqa: E402
from prefork_harness import Master, wait_for  # noqa: E402
from redis_server import RedisServer  # noqa: E402

import cogworker  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--boot-at-resume", action="store_true")
    args = parser.parse_args()
    server = RedisServer().start()
    masters: list[Master] = []
    log = Path(tempfile.mkdtemp(prefix="fence-figure-")) / "jobs.log"
    try:
        cogworker.configure(redis_url=server.url)
        from apps import fence_app

        stall = 2 * fence_app.THRESHOLD
        env = {"FENCE_LOG": str(log)}
        for _ in range(2):
            masters.append(Master(server.url, module="apps.fence_app", procs=2, env=env))
        for m in masters:
            m.wait_children()
        tags = [f"f{i}" for i in range(args.jobs)]
        fence_app.work.enqueue_many([(t, 0.01) for t in tags])
        wait_for(lambda: ended(log) > 200, 60, what="some progress")
        server.pause()
        paused_at = ended(log)
        time.sleep(stall)
        server.resume()
        if args.boot_at_resume:
            masters.append(Master(server.url, module="apps.fence_app", procs=2, env=env))
        wait_for(lambda: not check(log, tags).lost, 180, interval=0.5, what="every job ended")
        time.sleep(fence_app.THRESHOLD + 2)  # long enough for a wrongful recovery to show
        report = check(log, tags)
        declared = sum(m.output().count("left in progress by") for m in masters)
        print(
            f"{args.jobs} jobs, Redis stalled {stall:g}s (threshold {fence_app.THRESHOLD:g}s) after "
            f"{paused_at} had ended, {len(masters)} masters: {report.summary()}; "
            f"lists requeued as dead: {declared}"
        )
    finally:
        for m in masters:
            m.stop()
        server.cleanup()


if __name__ == "__main__":
    main()
