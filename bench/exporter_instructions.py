"""Instructions per job the exporter adds to the worker loop (a prefork child's), counted
by callgrind rather than timed: the machine is shared and CPU time per job is noisier
than the cost being measured.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python -m bench.exporter_instructions N on|off

runs N no-op jobs through ``Worker`` with the job-metrics hook subscribed (on) or not;
the difference of two N (e.g. 500 and 1500) cancels the start-up, so

    per job = (I(1500) - I(500)) / 1000.

Redis runs in its own process (valgrind does not follow it): the exporter adds no
Redis call per job. The loop's count varies by several thousand instructions a job from
run to run (blocking fetches, wake-ups), more than the exporter's cost, so

    ... -m bench.exporter_instructions hook N on|off

counts only what the exporter adds: N ``succeeded`` hook firings as the loop makes them
(the stats counter subscribed, as always), with the job-metrics subscriber or without;
deterministic, so two N give the added instructions per job exactly.
"""

from __future__ import annotations

import sys

from bench.core import Env


def hook(n: int, mode: str) -> None:
    from cogworker.core import hooks
    from cogworker.lifecycle import stats
    from cogworker.metrics import jobcounts as jobmetrics

    counting = stats.counting("bench")  # noqa: F841 (held: the stats subscriber counts into it)
    payload = {"jid": "0" * 24, "class": "core_app.noop", "queue": "default", "args": [1]}
    if mode == "on":
        jobmetrics.enable()
    for _ in range(n):
        hooks.fire("succeeded", payload, queue="default", identity="bench", duration=0.0003)


def main() -> None:
    if sys.argv[1] == "hook":
        hook(int(sys.argv[2]), sys.argv[3])
        return
    n, mode = int(sys.argv[1]), sys.argv[2]
    from cogworker.engine.loop import Worker
    from cogworker.metrics import jobcounts as jobmetrics

    if mode == "on":
        jobmetrics.enable()
    with Env() as env:
        env.app.noop.enqueue_many([(i,) for i in range(n)])
        Worker([("default", None)], block_timeout=0.05, max_jobs=n).run()
    if mode == "on":
        assert jobmetrics.local is not None and jobmetrics.local.copy()["counts"], "nothing counted"


if __name__ == "__main__":
    main()
