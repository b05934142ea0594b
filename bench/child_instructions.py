"""`python -m bench.child_instructions OLD NEW`: a prefork child's own instructions per
true no-op job (no Redis call in its body), checkouts side by side, alternating.

Each checkout's source runs (``cogworker.prefork.cli --procs 1``, this interpreter, the
checkout as the working directory) under ``valgrind --tool=callgrind`` against a fresh
private redis-server holding the jobs beforehand. The job body calls ``os.getpgid`` at its
``--skip``-th run and ``os.getsid`` ``--jobs`` runs later: callgrind zeroes the child's
counts before the first (``--zero-before``) and dumps them before the second
(``--dump-before``), so the dump holds exactly that many jobs of the child (all its
threads: the watchdog's wake-ups make ~1 % of noise). ``Depth.HOLD`` is stretched so
the look-ahead's K reaches its 32 under valgrind's slowdown, as it does natively.

    .venv/bin/python -m bench.child_instructions /path/to/old-checkout . --reps 2
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from bench.redis_server import RedisServer

APP = textwrap.dedent("""
    import os
    import cogworker
    from cogworker.engine import lookahead
    lookahead.Depth.HOLD = 2.0  # valgrind runs a job ~50x slower: K still reaches 32
    lookahead.Depth.LONG = 0.2
    SKIP, JOBS = int(os.environ["CG_SKIP"]), int(os.environ["CG_JOBS"])
    n = 0

    @cogworker.job
    def noop(i):
        global n
        n += 1
        if n == SKIP:
            os.getpgid(0)  # callgrind --zero-before
        elif n == SKIP + JOBS:
            os.getsid(0)  # callgrind --dump-before
""")

ENQUEUE = textwrap.dedent("""
    import sys, cogworker, cg_app
    cogworker.configure(redis_url=sys.argv[1])
    total = int(sys.argv[2])
    for s in range(0, total, 1000):
        cg_app.noop.enqueue_many([(i,) for i in range(s, min(total, s + 1000))])
""")


def per_job(checkout: str, skip: int, jobs: int) -> float:
    work = tempfile.mkdtemp(prefix="cogbench-child-ir-")
    with open(os.path.join(work, "cg_app.py"), "w") as f:
        f.write(APP)
    env = {
        **os.environ,
        "PYTHONPATH": f"{work}:{os.path.abspath(checkout)}",
        "CG_SKIP": str(skip),
        "CG_JOBS": str(jobs),
    }
    with RedisServer() as server:
        subprocess.run(
            [sys.executable, "-c", ENQUEUE, server.url, str(skip + jobs + 100)], cwd=checkout, env=env, check=True
        )
        env["COGWORKER_REDIS_URL"] = server.url
        out = os.path.join(work, "cg.%p")
        proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--dump-instr=no",
                "--zero-before=getpgid",
                "--dump-before=getsid",
                sys.executable,
                "-m",
                "cogworker.prefork.cli",
                "--procs",
                "1",
                "cg_app",
            ],
            cwd=checkout,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            dump = _wait_dump(work, proc)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    with open(dump) as f:
        found = re.search(r"^(?:summary|totals):\s+(\d+)", f.read(), re.M)
    if not found:
        raise RuntimeError(f"no totals in {dump}")
    return int(found.group(1)) / jobs


def _wait_dump(work: str, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        dumps = [f for f in glob.glob(os.path.join(work, "cg.*")) if re.search(r"\.\d+\.1$", f)]
        if dumps:
            time.sleep(0.5)  # written whole
            return dumps[0]
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode}) before its dump")
        time.sleep(0.5)
    raise RuntimeError("no dump in 30 minutes")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.child_instructions", description=__doc__.splitlines()[0])
    ap.add_argument("checkouts", nargs="+")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--skip", type=int, default=1000, help="jobs run before the count starts")
    ap.add_argument("--jobs", type=int, default=3000, help="jobs counted")
    args = ap.parse_args(argv)
    figures: dict[str, list[float]] = {c: [] for c in args.checkouts}
    for rep in range(args.reps):
        for checkout in args.checkouts if rep % 2 == 0 else args.checkouts[::-1]:
            figures[checkout].append(per_job(checkout, args.skip, args.jobs))
            print(f"rep {rep + 1} {checkout}: {figures[checkout][-1]:,.0f} instructions/job", flush=True)
    first = statistics.median(figures[args.checkouts[0]])
    for checkout, values in figures.items():
        median = statistics.median(values)
        print(f"{checkout}: median {median:,.0f} instructions/job ({median / first:.3f} of the first)")


if __name__ == "__main__":
    main()
