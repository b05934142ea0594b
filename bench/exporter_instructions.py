"""Instructions per job the exporter adds to the worker loop (a prefork child's), counted
by callgrind rather than timed: the machine is shared and CPU time per job is noisier
than the cost being measured.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python -m bench.exporter_instructions N on|off

runs N no-op jobs through ``Worker`` with the job-metrics hook subscribed (on) or not;
the difference of two N (e.g. 500 and 1500) cancels the start-up, so

    per job = (I(1500) - I(500)) / 1000.

Redis runs in its own process (valgrind does not follow it): the exporter adds no
Redis call per job.
"""

from __future__ import annotations

import sys

from bench.core import Env


def main() -> None:
    n, mode = int(sys.argv[1]), sys.argv[2]
    from cogworker import jobmetrics
    from cogworker.worker import Worker

    if mode == "on":
        jobmetrics.enable()
    with Env() as env:
        env.app.noop.enqueue_many([(i,) for i in range(n)])
        Worker([("default", None)], block_timeout=0.05, max_jobs=n).run()
    if mode == "on":
        assert jobmetrics.local is not None and jobmetrics.local.copy()["counts"], "nothing counted"


if __name__ == "__main__":
    main()
