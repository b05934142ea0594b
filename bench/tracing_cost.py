"""`python -m bench.tracing_cost`: what the OpenTelemetry hooks (cogworker/core/tracing.py)
cost on the two paths they touch, per call: running a job (`execute.run_job`, no Redis)
and enqueueing one (`client.push` to a private redis-server).

Modes, each measured in a fresh interpreter, alternating, `--reps` times:
  before     the tree of `--before` (a commit without the hooks, `git archive`d to a temp dir)
  absent     this tree with `opentelemetry` unimportable (as without the `otel` extra)
  installed  this tree, `opentelemetry` importable, no tracer provider set
  traced     a tracer provider with a simple processor and an exporter that drops spans
Prints every figure (µs per call, best of 5 timed loops) and the medians per mode.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import sys, time
mode, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "absent":
    sys.modules["opentelemetry"] = None  # import fails as when the package isn't installed
if mode == "traced":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    class Drop(SpanExporter):
        def export(self, spans): return SpanExportResult.SUCCESS
    provider = TracerProvider(); provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
import cogworker
from cogworker import client, execute
from cogworker.payload import build_payload, JobOptions
cogworker.configure(redis_url=url, status=False, history=False)
@cogworker.job
def noop(x): return None
payload = build_payload(noop.name, [1], {}, JobOptions())
def best(fn, count):
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(count): fn()
        times.append((time.perf_counter() - t) / count * 1e6)
    return min(times)
run = best(lambda: execute.run_job(noop, payload, "default", None), n)
conn = cogworker.get_config().redis()
push = best(lambda: client.push(dict(payload)), n // 10)
conn.flushall()
print(f"{run:.3f} {push:.3f}")
"""


def old_tree(commit: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="cogworker-before-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "cogworker"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def measure(mode: str, tree: Path, url: str, n: int) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, url, str(n)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    ).stdout
    run, push = out.split()
    return float(run), float(push)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="848e458", help="a commit without the tracing hooks")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("-n", type=int, default=20000)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.redis_server import RedisServer

    server = RedisServer()
    server.start()
    before = old_tree(args.before)
    trees = {"before": before, "absent": ROOT, "installed": ROOT, "traced": ROOT}
    figures: dict[str, list[tuple[float, float]]] = {mode: [] for mode in trees}
    try:
        for rep in range(args.reps):
            for mode, tree in trees.items():
                figures[mode].append(measure(mode, tree, server.url, args.n))
                print(
                    f"rep {rep} {mode:9} run_job {figures[mode][-1][0]:7.3f} µs  push {figures[mode][-1][1]:7.2f} µs",
                    flush=True,
                )
    finally:
        server.stop()
        shutil.rmtree(before, ignore_errors=True)
    for mode, values in figures.items():
        print(
            f"median {mode:9} run_job {statistics.median(v[0] for v in values):7.3f} µs  "
            f"push {statistics.median(v[1] for v in values):7.2f} µs   "
            f"best run_job {min(v[0] for v in values):7.3f} µs  push {min(v[1] for v in values):7.2f} µs"
        )


if __name__ == "__main__":
    main()
