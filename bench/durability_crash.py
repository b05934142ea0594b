"""What a crash of Redis's host loses, Jepsen-style, with and without durability="aof"
(README "Durability"; docs/architecture.md#durable-mode).

    python -m bench.durability_crash                  # 10 crashes per mode, then the cost per job
    python -m bench.durability_crash --rounds 3 --fsync always --modes aof --no-cost

One server with an append-only file (appendfsync ``everysec`` or ``always``, no rewrite),
run under ``strace -f -e trace=write,fdatasync,fsync``: every write to the AOF's incr file
and every fsync of it, with times. A ``cogworker-prefork --procs 2`` worker and a producer
thread at up to ``--rate`` enqueues/s (bench/failover.py's, whose logs and counts this
reuses: every acknowledged enqueue logged by the producer, every start by the job itself,
outside Redis). Each round: ``--load`` seconds of load, then the machine's crash:

- the server SIGKILLed. That alone loses nothing: what it wrote is in the page cache, and
  the restarted server reads it all. A host crash loses what was not fsynced, so:
- the incr file cut back to what its last completed fsync covered: the bytes written
  (writes returned) before that fsync began. A write that returned while the fsync ran may
  or may not be on disk: counted as lost (the model is the disk's worst case; a real disk may
  keep more, never less).
- the server restarted on the same files (aof-load-truncated, the default, takes a file cut
  mid-command).

Then the producer stops, the worker drains, and: lost = acknowledged enqueues that never
started; twice = jobs started more than once. Modes: ``none`` (the default) and ``aof``
(producer and worker with durability="aof"; on ``everysec`` with durability_trust_everysec,
since the server answers WAITAOF before its fsync there: the run shows what that costs).

Cost: the same server without strace, for each mode: bench/wait_cost.py's single enqueues
and prefork drain of ``--jobs`` no-op jobs, jobs/s and the server's CPU per job.

Results: bench/results/durability-crash-<time>.json and durability-crash-latest.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
_CALL = re.compile(r"^(\d+)\s+[\d.]+ (write|fdatasync|fsync)\(\d+<([^>]*)>")
_RESUMED = re.compile(r"^(\d+)\s+[\d.]+ <\.\.\. (write|fdatasync|fsync) resumed>")
_RETURNED = re.compile(r"= (-?\d+) <[\d.]+>$")


def covered(trace: Path, sizes: dict[str, int]) -> dict[str, int]:
    """For each incr file written in ``trace``: its size when the last completed fsync of
    it began (``sizes``: each file's size when tracing began). A fsync cut off by the kill
    (never returned) covers nothing. A call interrupted in the trace by another thread's
    line (``<unfinished ...>``) is matched with its ``resumed`` line, by thread id."""
    written = dict(sizes)  # path -> bytes written so far (writes returned)
    safe = dict(sizes)  # path -> bytes a completed fsync covers
    open_calls: dict[str, tuple[str, str, int]] = {}  # thread -> (call, path, size when it began)
    for line in trace.read_text(errors="replace").splitlines():
        call, resumed = _CALL.match(line), _RESUMED.match(line)
        if call is not None:
            tid, name, path = call.groups()
            begun = (name, path, written.get(path, 0))
        elif resumed is not None and resumed.group(1) in open_calls:
            tid = resumed.group(1)
            begun = open_calls.pop(tid)
        else:
            continue
        name, path, size = begun
        if ".incr.aof" not in path:
            continue
        returned = _RETURNED.search(line)
        if returned is None:
            if line.endswith("<unfinished ...>"):
                open_calls[tid] = begun
        elif name == "write" and int(returned.group(1)) > 0:
            written[path] = written.get(path, 0) + int(returned.group(1))
        elif name != "write" and returned.group(1) == "0":
            safe[path] = max(safe.get(path, 0), size)
    return safe


class TracedServer:
    """The server on its own port and folder, started under strace; ``crash()`` SIGKILLs it
    and cuts its incr file back to its last fsync; ``start()`` again on the same files."""

    def __init__(self, fsync: str, binary: str | None = None) -> None:
        from cogworker.testing.binaries import server_binary
        from cogworker.testing.servers import free_port

        self.binary, self.port, self.fsync = binary or server_binary().path, free_port(), fsync
        self.dir = Path(tempfile.mkdtemp(prefix="cogworker-crash-"))
        self.strace: subprocess.Popen[bytes] | None = None
        self.trace = self.dir / "trace.0"
        self.sizes: dict[str, int] = {}
        self.cut: list[int] = []  # bytes cut at each crash

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> TracedServer:
        import redis

        self.sizes = {str(p): p.stat().st_size for p in (self.dir / "appendonlydir").glob("*.incr.aof")}
        self.trace = self.dir / f"trace.{len(self.cut)}"
        command = [*server_args(self.binary, self.port, self.dir, self.fsync), "--loglevel", "warning"]
        self.strace = subprocess.Popen(
            ["strace", "-f", "-qq", "-ttt", "-T", "-y", "-s", "0", "-e", "trace=write,fdatasync,fsync"]
            + ["-o", str(self.trace), *command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_timeout=5)
        for _ in range(500):
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError(f"the server on port {self.port} did not start")

    def crash(self) -> int:
        """SIGKILL the server (strace's child), cut each incr file back to its last fsync:
        the bytes cut."""
        import psutil

        assert self.strace is not None
        for child in psutil.Process(self.strace.pid).children():
            os.kill(child.pid, signal.SIGKILL)
        self.strace.wait(30)
        cut = 0
        for path, size in covered(self.trace, self.sizes).items():
            now = os.path.getsize(path)
            if now > size:
                os.truncate(path, size)
                cut += now - size
        self.cut.append(cut)
        return cut

    def cleanup(self) -> None:
        import shutil

        import psutil

        if self.strace is not None and self.strace.poll() is None:
            for child in psutil.Process(self.strace.pid).children():
                os.kill(child.pid, signal.SIGKILL)
            self.strace.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


def server_args(binary: str, port: int, folder: Path, fsync: str) -> list[str]:
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "", *aof_args(fsync)]


def aof_args(fsync: str) -> list[str]:
    """The append-only file on, never rewritten (a rewrite would start another incr file)."""
    return ["--appendonly", "yes", "--appendfsync", fsync, "--auto-aof-rewrite-percentage", "0"]


def _configure(url: str, mode: str, fsync: str, **more: Any) -> dict[str, str]:
    """The producer's config, and the worker's environment, for ``mode``."""
    import cogworker

    cogworker.config._config = None
    trust = mode == "aof" and fsync == "everysec"
    cogworker.configure(
        redis_url=url, durability=mode, durability_trust_everysec=trust, wait_timeout=2.0, socket_timeout=2.0, **more
    )
    return {
        "COGWORKER_DURABILITY": mode,
        "COGWORKER_DURABILITY_TRUST_EVERYSEC": "1" if trust else "0",
        "COGWORKER_WAIT_TIMEOUT": "2.0",
        "PYTHONPATH": str(ROOT),
    }


def one_mode(
    fsync: str, mode: str, rounds: int, load: float, rate: float, procs: int, job: float, binary: str | None = None
) -> dict[str, Any]:
    """``rounds`` crashes under load (``binary``: the server's; by default the test servers')."""
    from bench import failover
    from cogworker.testing.servers import PreforkWorker

    server = TracedServer(fsync, binary).start()
    log = server.dir / "runs.log"
    log.touch()
    os.environ["BENCH_FAILOVER_LOG"] = str(log)
    acked: list[tuple[str, float]] = []
    refused: Counter[str] = Counter()
    stop, kills = threading.Event(), []
    try:
        env = {
            **_configure(server.url, mode, fsync),
            "BENCH_FAILOVER_LOG": str(log),
            "BENCH_FAILOVER_JOB_SECONDS": str(job),
        }
        worker = PreforkWorker(server.url, "bench.apps.failover_app", procs=procs, env=env).wait_ready()
        producer = threading.Thread(target=failover._producer, args=(stop, rate, acked, refused), daemon=True)
        producer.start()
        for number in range(rounds):
            time.sleep(load)
            kills.append(time.time())
            cut = server.crash()
            server.start()
            print(f"  {fsync} {mode} crash {number + 1}/{rounds}: {cut:,} bytes cut, {len(acked):,} acked", flush=True)
        time.sleep(load)
        stop.set()
        producer.join(30)
        drained = failover.drained_within(time.monotonic() + 120)
        worker.stop()
        figures = failover.analyse(acked, log, kills)
    finally:
        stop.set()
        server.cleanup()
    return {
        "fsync": fsync,
        "durability": mode,
        "rounds": rounds,
        "drained": drained,
        **figures,
        "refused": dict(refused),
        "bytes_cut": server.cut,
        "job_seconds": job,
        "enqueue_rate": rate,
    }


def cost(fsync: str, mode: str, jobs: int) -> dict[str, float]:
    """bench/wait_cost.py's enqueue and drain, on a server without strace."""
    from bench import wait_cost
    from cogworker.testing.servers import RedisServer

    server = RedisServer(args=tuple(aof_args(fsync))).start()
    try:
        env = _configure(server.url, mode, fsync, status=False, history=False)
        return wait_cost.measure(jobs, server.client(), env)
    finally:
        server.cleanup()


def costs_of(runs: list[tuple[str, str]], jobs: int, reps: int) -> list[dict[str, Any]]:
    """The medians of ``reps`` measurements of each mode, the modes alternating (the machine's
    load drifts). On everysec, durability="aof" (trusted) waits ~0.1 s per enqueue on Valkey
    (its WAITAOF answers at the next server tick): measured on a tenth of the jobs."""
    measured: dict[tuple[str, str], list[dict[str, float]]] = {run: [] for run in runs}
    for _ in range(reps):
        for fsync, mode in runs:
            slow = fsync == "everysec" and mode == "aof"
            measured[fsync, mode].append(cost(fsync, mode, max(50, jobs // 10) if slow else jobs))
    return [
        {"fsync": f, "durability": m, **{k: statistics.median(r[k] for r in rows) for k in rows[0]}}
        for (f, m), rows in measured.items()
    ]


def report(rows: list[dict[str, Any]], costs: list[dict[str, Any]], command: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# What a crash of Redis's host loses, with and without durability='aof'",
        "",
        f"`{command}` ({when}); {_server()}, 2 cores; the AOF cut back to its last completed fsync at each crash.",
        "",
        "| appendfsync | durability | crashes | acknowledged enqueues | lost (median per crash) "
        "| ran twice (median per crash) | enqueues refused |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        kills = int(row["rounds"])
        lost, twice = _median(row["lost_per_kill"][:kills]), _median(row["twice_per_kill"][:kills])
        lines.append(
            f"| {row['fsync']} | {row['durability']} | {kills} | {row['acknowledged']:,} | {row['lost']:,} ({lost:g}) "
            f"| {row['twice']:,} ({twice:g}) | {sum(row['refused'].values()):,} |"
        )
    if costs:
        lines += ["", "| appendfsync | durability | single enqueues/s | server CPU per enqueue (µs) "
                  "| jobs/s (prefork --procs 2) | server CPU per job (µs) |", "|---|---|---|---|---|---|"]  # fmt: skip
        for row in costs:
            lines.append(
                f"| {row['fsync']} | {row['durability']} | {row['enqueue_per_s']:,.0f} | {row['enqueue_cpu_us']:.1f} "
                f"| {row['jobs_per_s']:,.0f} | {row['work_cpu_us']:.1f} |"
            )
    return "\n".join(lines) + "\n"


def _server() -> str:
    from cogworker.testing.binaries import server_binary

    return server_binary().version


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2]) if ordered else 0.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.durability_crash", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="crashes per mode")
    parser.add_argument("--load", type=float, default=2.0, help="seconds of load before each crash")
    parser.add_argument("--rate", type=float, default=300.0, help="enqueues per second (at most)")
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument(
        "--job-seconds",
        type=float,
        default=0.01,
        help="how long each job sleeps: with the default rate the worker falls behind, so jobs wait in the queue "
        "when the server crashes (as in a backlog; a job run at once is never counted lost)",
    )
    parser.add_argument("--fsync", default="everysec,always", help="appendfsync values to run, in order")
    parser.add_argument("--modes", default="none,aof", help="durability values to run, in order")
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs per cost measurement")
    parser.add_argument("--reps", type=int, default=3, help="cost measurements per mode, alternating (medians)")
    parser.add_argument("--no-cost", action="store_true", help="the crashes only")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    runs = [(fsync, mode) for fsync in args.fsync.split(",") for mode in args.modes.split(",")]
    rows = [
        one_mode(fsync, mode, args.rounds, args.load, args.rate, args.procs, args.job_seconds) for fsync, mode in runs
    ]
    costs = [] if args.no_cost else costs_of(runs, args.jobs, args.reps)
    command = ("python -m bench.durability_crash " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"durability-crash-{stamp}.json").write_text(
        json.dumps({"command": command, "crashes": rows, "costs": costs}, indent=1) + "\n"
    )
    text = report(rows, costs, command)
    (RESULTS / "durability-crash-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
