"""`python -m bench.redis_instructions OLD NEW`: what a job costs Redis, in instructions.

Redis itself runs under `valgrind --tool=callgrind`, instrumented only while the jobs are
taken (`callgrind_control -i on/off` around them; the enqueue before is not counted), so
the figure is deterministic: it does not move with the machine's load as Redis's CPU
time does. Two checkouts as `bench.compare_commits` takes them (each with its own
`.venv`), each against a fresh redis-server per measurement:

- **fetcher**: one `Fetcher` draining `--jobs` no-op jobs by look-aheads of `--k`
  (`send_ahead` then `read_ahead_all`), each look-ahead's acks riding on the next: the fetch
  and ack path alone;
- **prefork**: `cogworker.prefork.cli --procs 2` draining `--jobs` true no-op jobs
  (bench.compare_commits' app: the job body makes no Redis call), everything it sends
  until the queue is drained and 1.5 s more (the last acks and status flush).

Prints Redis instructions per job for each. Run from the repository root:

    .venv/bin/python -m bench.redis_instructions /work/main . --jobs 10000
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.compare_commits import APP_PATH, child
from bench.drain import checkout_prefork
from bench.redis_server import free_port

# Run by each checkout's own interpreter: its Fetcher, look-aheads of k, acks riding on the next.
FETCHER = textwrap.dedent("""
    import sys
    import cogworker
    from cogworker.engine.fetch.fetcher import Fetcher
    config = cogworker.configure(redis_url=sys.argv[1])
    f = Fetcher(config, "host:1:bench", [("default", None)], block_timeout=0)
    k, number, acks = int(sys.argv[2]), 0, []
    while True:
        number += 1
        works = f.read_ahead_all(f.send_ahead(number, None, None, k, tuple(acks)))
        if not works:
            break
        acks = [(w.raw, None) for w in works]
""")


@contextmanager
def callgrind_redis() -> Iterator[tuple[Any, str, int, str]]:
    """A private redis-server under callgrind, not instrumented yet: (client, url, pid,
    its callgrind output file)."""
    import redis

    port, work = free_port(), tempfile.mkdtemp(prefix="cogbench-cg-")
    out = os.path.join(work, "cg.out")
    proc = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            "--dump-instr=no",
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            work,
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    r = redis.Redis(port=port)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                r.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server under callgrind did not start") from None
                time.sleep(0.2)
        yield r, f"redis://127.0.0.1:{port}/0", proc.pid, out
    finally:
        r.close()
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def instrumented(pid: int, on: bool) -> None:
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(pid)], check=True, stdout=subprocess.DEVNULL)


def window_ir(pid: int, out: str) -> int:
    """Instructions since the zeroing: dumped (``callgrind_control -d``) to ``out``.1."""
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, stdout=subprocess.DEVNULL)
    found = re.search(r"^summary:\s+(\d+)", Path(out + ".1").read_text(), re.M)
    if not found:
        raise RuntimeError(f"no summary in {out}.1")
    return int(found.group(1))


def measure(checkout: str, mode: str, n: int, k: int) -> float:
    """Redis instructions per job of ``mode`` (fetcher or prefork) for ``checkout``."""
    with callgrind_redis() as (r, url, pid, out):
        child(checkout, "enqueue", url, n)
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, stdout=subprocess.DEVNULL)
        instrumented(pid, True)
        if mode == "fetcher":
            python = str(Path(checkout, ".venv", "bin", "python"))
            subprocess.run([python, "-c", FETCHER, url, str(k)], cwd=checkout, check=True)
        else:
            with checkout_prefork(checkout, url, "cmp_app", APP_PATH):
                while r.llen("cogworker:queue:default"):
                    time.sleep(0.05)  # seldom: each look is counted too
                time.sleep(1.5)
                ir = window_ir(pid, out)
        if mode == "fetcher":
            ir = window_ir(pid, out)
        instrumented(pid, False)
        if r.llen("cogworker:queue:default"):
            raise RuntimeError(f"{checkout}: the queue was not drained")
        return ir / n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.redis_instructions", description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=32, help="jobs per look-ahead fetch")
    ap.add_argument("--only", default="fetcher,prefork")
    args = ap.parse_args(argv)
    for mode in args.only.split(","):
        ir = {side: measure(path, mode, args.jobs, args.k) for side, path in (("old", args.old), ("new", args.new))}
        print(
            f"{mode}: Redis instructions/job old {ir['old']:,.0f}  new {ir['new']:,.0f}  "
            f"new/old {ir['new'] / ir['old']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
