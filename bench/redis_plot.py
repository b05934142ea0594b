"""`python -m bench.redis_plot [results.json] [out.png]` (in bench/.venv-peers: matplotlib):
the true no-op run drawn per system, jobs/s beside Redis CPU µs per job (medians, with
the repetitions' range), from one run's JSON (default bench/results/latest.json)."""

import json
import sys
from pathlib import Path

from bench import env


def rows(doc):
    point = f"2p-{doc['meta']['plan']['payload']}B"
    out = []
    for name, r in doc["results"].get("truenoop", {}).get(point, {}).items():
        if r.get("steady") and r.get("redis_us"):
            out.append((name, r["steady"], r["redis_us"]))
    return sorted(out, key=lambda row: -row[1]["median"])


def draw(doc, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = rows(doc)
    names = [n for n, _, _ in data]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.45 * len(names) + 1.8), sharey=True)
    for ax, k, title in (
        (left, 1, "steady jobs/s (true no-op, N = 2)"),
        (right, 2, "Redis CPU µs per job (INFO cpu; log scale)"),
    ):
        med = [row[k]["median"] for row in data]
        err = [
            [m - row[k]["min"] for m, row in zip(med, data, strict=True)],
            [row[k]["max"] - m for m, row in zip(med, data, strict=True)],
        ]
        colors = ["#c0392b" if n == "cogworker" else "#7f8c8d" if n.startswith("bare") else "#2980b9" for n in names]
        ax.barh(names, med, xerr=err, color=colors, capsize=3)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
        for y, m in enumerate(med):
            ax.text(m, y, f" {m:,.0f}" if k == 1 else f" {m:.1f}", va="center", fontsize=8)
    right.set_xscale("log")  # RQ's 1,000+ µs beside bare-batch32's 4
    left.invert_yaxis()
    meta = doc["meta"]
    fig.suptitle(
        f"{meta['date']}, load average {meta['loadavg_start']:.1f} at start, "
        f"{meta['reps']} repetitions (median, bars: min–max); red cogworker, grey bare rows, blue peers",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    src = Path(argv[0]) if argv else env.BENCH / "results" / "latest.json"
    out = Path(argv[1]) if len(argv) > 1 else env.REPO / "docs" / "bench-redis-cost.png"
    draw(json.loads(src.read_text()), out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
