"""`python -m bench.cluster_plot [cluster.json] [out.png]` (in bench/.venv-peers: matplotlib):
bench/cluster.py's medians drawn per layout, each master's share of the Redis CPU as a bar
of its own (the 50 % line: the issue's target), jobs/s beside it. Default input: the
newest bench/results/cluster-*.json; default output: docs/bench-cluster-cpu.png."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def newest() -> Path:
    found = sorted((ROOT / "bench" / "results").glob("cluster-2*.json"))
    if not found:
        raise SystemExit("no bench/results/cluster-*.json: run python -m bench.cluster first")
    return found[-1]


def draw(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(doc["medians"])
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11, 0.8 * len(names) + 1.6), sharey=True, gridspec_kw={"width_ratios": [3, 2]}
    )
    colours = ["#4c72b0", "#dd8452", "#55a868"]
    height = 0.26
    legend_row = next((row for row, name in enumerate(names) if len(doc["medians"][name]["cpu_share"]) > 1), -1)
    for row, name in enumerate(names):
        shares = doc["medians"][name]["cpu_share"]
        for index, share in enumerate(shares):
            y = row + (index - (len(shares) - 1) / 2) * height  # centred on the row's label
            left.barh(
                y,
                share * 100,
                height=height * 0.9,
                color=colours[index % 3],
                label=f"master {index + 1}" if row == legend_row else None,
            )
            left.text(share * 100, y, f" {share * 100:.0f} %", va="center", fontsize=8)
        right.barh(row, doc["medians"][name]["jobs_per_s"], color="#8c8c8c")
        right.text(
            doc["medians"][name]["jobs_per_s"],
            row,
            f" {doc['medians'][name]['jobs_per_s']:,.0f}",
            va="center",
            fontsize=9,
        )
    left.axvline(50, color="#c44e52", linestyle="--", linewidth=1)
    left.set_xlim(0, 110)
    left.legend(loc="lower right", fontsize=8)
    left.set_yticks(range(len(names)), [textwrap.fill(name, 26) for name in names], fontsize=9)
    left.invert_yaxis()
    left.set_title("each master's share of the Redis CPU (%); target: none above 50", fontsize=10)
    right.set_title("jobs/s (2 shared cores)", fontsize=10)
    right.set_xlim(0, max(doc["medians"][n]["jobs_per_s"] for n in names) * 1.3)
    fig.suptitle(
        f"6 busy queues, 3 prefork masters of {doc['args']['procs']} children (medians of {doc['args']['rounds']})",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    source = Path(args[0]) if args else newest()
    out = Path(args[1]) if len(args) > 1 else ROOT / "docs" / "bench-cluster-cpu.png"
    draw(json.loads(source.read_text()), out)
    print(out)


if __name__ == "__main__":
    main()
