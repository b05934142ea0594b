"""How long a prefork master takes to exit after it logs ``master: stopped`` (#31 point 1).

    python -m bench.stop_exit [--stops 10] [--spinners 6]

Each stop starts ``cogworker-prefork --procs 2 examples.app`` on a private redis-server,
waits for its children, sends TERM or INT, and times the phases after ``stopped``: to the
first atexit handler (non-daemon threads joined), through the atexit handlers, and to the
process's exit as its parent sees it (interpreter teardown). Conditions: a quiet machine,
CPU starved by busy loops, /metrics scraped during the stop, JSON logs, Redis frozen
(SIGSTOP) at the stop. When a stop lingers, the stacks of all its threads are dumped
(faulthandler) to find what it waits on. Results: bench/results/stop-exit-latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
ARMS = ("leave", "sys.exit")  # launch/leave.py, and a plain exit with the interpreter's teardown
LINGER = 0.3  # a stop still alive this long after "stopped" gets its stacks dumped

# Runs in the measured master: marks the phases on fd 2 (raw writes survive teardown).
WRAPPER = r"""
import atexit, faulthandler, os, sys, time
def mark(what):
    os.write(2, f"PHASE {what} {time.time():.6f}\n".encode())
atexit.register(mark, "atexit-last")  # registered first: runs last
from cogworker.prefork import master as m
orig = m.Master.shutdown_finish
def patched(self):
    orig(self)
    mark("stopped")
    atexit.register(mark, "atexit-first")
    faulthandler.dump_traceback_later(%(linger)s, repeat=True, file=sys.stderr)
m.Master.shutdown_finish = patched
if os.environ.get("BENCH_STOP_ARM") == "sys.exit":  # the code before launch/leave.py: a plain exit
    import cogworker.launch.leave as leave
    leave.leave = sys.exit
from cogworker.prefork.cli import main
sys.argv[0] = "cogworker-prefork"
main()
"""


def one_stop(
    port: int, condition: str, arm: str, sig: signal.Signals, redis: RedisServer, wrapper: Path
) -> dict[str, Any]:
    args = [sys.executable, str(wrapper), "--procs", "2", "examples.app"]
    metrics_port = free_port()
    if condition == "scraped":
        args[2:2] = ["--metrics-port", str(metrics_port)]
    if condition == "json-logs":
        args[2:2] = ["--log-format", "json"]
    env = dict(os.environ, COGWORKER_REDIS_URL=f"redis://127.0.0.1:{port}/0", PYTHONPATH=str(ROOT), BENCH_STOP_ARM=arm)
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "children on queues" in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(120):
        os.killpg(proc.pid, signal.SIGKILL)
        raise RuntimeError("the master never started its children:\n" + "".join(lines[-20:]))
    time.sleep(1.0)
    stop_scraping = threading.Event()
    if condition == "scraped":
        threading.Thread(target=scrape, args=(metrics_port, stop_scraping), daemon=True).start()
    if condition == "redis-frozen":
        os.kill(redis.proc.pid, signal.SIGSTOP)
    proc.send_signal(sig)
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        exited = time.time()
        stop_scraping.set()
        if condition == "redis-frozen":
            os.kill(redis.proc.pid, signal.SIGCONT)
    reader.join(5)
    return {"arm": arm, **phases(lines, exited, proc.returncode, condition, sig)}


def scrape(port: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
        except OSError:
            time.sleep(0.01)


def phases(lines: list[str], exited: float, rc: int | None, condition: str, sig: signal.Signals) -> dict[str, Any]:
    marks = {p[1]: float(p[2]) for p in (line.split() for line in lines if line.startswith("PHASE "))}
    row: dict[str, Any] = {"condition": condition, "signal": sig.name, "rc": rc}
    if "stopped" not in marks:
        row["note"] = "no 'stopped' (stopped during boot?)"
        return row
    stopped = marks["stopped"]
    row["gap_s"] = exited - stopped
    row["to_atexit_s"] = marks.get("atexit-first", exited) - stopped
    row["atexit_s"] = marks.get("atexit-last", exited) - marks.get("atexit-first", stopped)
    row["teardown_s"] = exited - marks.get("atexit-last", stopped)
    if row["gap_s"] > LINGER:
        row["stacks"] = "".join(line for line in lines if not line.startswith("PHASE"))[-6000:]
    return row


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def run(stops: int, spinners: int, conditions: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as workdir:
        wrapper = Path(workdir) / "wrapper.py"
        wrapper.write_text(WRAPPER % {"linger": LINGER})
        redis = RedisServer().start()
        port = redis.port
        try:
            for condition in conditions:
                spinning = []
                if condition == "starved":
                    spin_code = "from bench.stop_exit import spin; spin(3600)"
                    spinning = [subprocess.Popen([sys.executable, "-c", spin_code], cwd=ROOT) for _ in range(spinners)]
                try:
                    for i in range(2 * stops):  # the arms alternate, so both see the same load
                        sig = (signal.SIGTERM, signal.SIGINT)[i // 2 % 2]
                        row = one_stop(port, condition, ARMS[i % 2], sig, redis, wrapper)
                        rows.append(row)
                        print(json.dumps({k: v for k, v in row.items() if k != "stacks"}), flush=True)
                finally:
                    for p in spinning:
                        p.kill()
                        p.wait()
        finally:
            redis.stop()
    return rows


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for condition in dict.fromkeys(r["condition"] for r in rows):
        for arm in ARMS:
            mine = [r for r in rows if r["condition"] == condition and r["arm"] == arm and "gap_s" in r]
            if mine:
                gaps = [r["gap_s"] for r in mine]
                out.append(
                    {
                        "condition": condition,
                        "arm": arm,
                        "stops": len(gaps),
                        "median_ms": round(statistics.median(gaps) * 1000, 1),
                        "max_ms": round(max(gaps) * 1000, 1),
                        "teardown_median_ms": round(statistics.median(r["teardown_s"] for r in mine) * 1000, 1),
                        "over_linger": sum(g > LINGER for g in gaps),
                    }
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=10, help="stops per condition and arm")
    parser.add_argument("--spinners", type=int, default=6, help="busy loops for the 'starved' condition")
    parser.add_argument("--conditions", default="quiet,starved,scraped,json-logs,redis-frozen")
    a = parser.parse_args()
    rows = run(a.stops, a.spinners, a.conditions.split(","))
    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_before": os.getloadavg(),
        "summary": summary(rows),
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "stop-exit-latest.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
