"""bench/ reaches into cogworker's internals (its building blocks, timed apart), and no
test ran it: when ``queued_field`` moved from ``history`` to ``status_enqueue`` the
enqueue cost curve crashed at the end of a 5-minute run. These checks are cheap: every
bench module imports, the enqueue curve's steps each run once against a private Redis,
and the targets are judged against the rows the throughput issue names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Run elsewhere: bench.bare needs the job bodies on its path, bench.costs_report matplotlib
# (both live in the bench's own venv).
NOT_HERE = {"bench.__main__", "bench.bare", "bench.costs_report"}


def bench_modules() -> list[str]:
    files = sorted((REPO / "bench").glob("*.py")) + sorted((REPO / "bench" / "systems").glob("*.py"))
    names = [".".join(f.relative_to(REPO).with_suffix("").parts) for f in files]
    return [n for n in names if n not in NOT_HERE]


def run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_every_bench_module_imports() -> None:
    modules = bench_modules()
    assert "bench.costs_profile" in modules and "bench.systems.cogworker_" in modules
    p = run("import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\n".replace(
        "sys.argv[1:]", repr(modules)))
    assert p.returncode == 0, p.stderr


def test_the_enqueue_curves_steps_each_run_once(config, redis_server) -> None:  # config: emptied first
    code = f"""
import redis
from bench import costs_profile
from bench.costs import use_redis
config, app = use_redis({redis_server.url!r})
r = redis.Redis.from_url({redis_server.url!r})
steps = costs_profile._enqueue_steps(config, app, r, "x" * 100)
assert costs_profile.BARE in steps and costs_profile.WHOLE in steps, list(steps)
for name, step in steps.items():
    step()
print(len(steps))
"""
    p = run(code)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout.strip()) >= 5


def test_targets_judge_75_percent_against_bare_batch8_and_show_the_ceiling() -> None:
    from bench.targets import targets

    def thr(jobs: float) -> dict[str, dict[str, float]]:
        return {"overall": {"median": jobs}}

    doc = {
        "meta": {"plan": {"payload": 100}},
        "systems": {"cogworker": {"lib": "cogworker"}, "bare-batch8": {"lib": "bare"},
                    "bare-ahead": {"lib": "bare"}, "dramatiq-p16": {"lib": "dramatiq"},
                    "huey": {"lib": "huey"}},
        "results": {
            "throughput": {"2p-100B": {"cogworker": thr(6000), "bare-batch8": thr(8000), "bare-ahead": thr(12000),
                                       "dramatiq-p16": thr(3000), "huey": thr(5000)}},
            # huey is faster but lost the job: it doesn't count for the 3x target.
            "recovery": {"2p": {"dramatiq-p16": {"trials": 2, "lost": 0}, "huey": {"trials": 2, "lost": 2}}},
        },
    }
    rows = {row["target"]: row for row in targets(doc)}
    three = rows["no-op throughput ≥ 3× the fastest peer row that re-ran every SIGKILLed job"]
    assert three["measured"].startswith("2.0× (dramatiq-p16") and three["met"] == "NO"
    ceiling = [r for t, r in rows.items() if "ceiling" in t]
    assert len(ceiling) == 1 and ceiling[0]["measured"] == "4.0×"  # bare-ahead, the fastest bare row
    share = rows["no-op throughput ≥ 75% of the bare batch-of-8 row (bare-batch8)"]
    assert share["measured"].startswith("75% (8,000") and share["met"] == "yes"  # 6000/8000, not 6000/12000
