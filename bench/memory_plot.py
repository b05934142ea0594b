"""Plots a bench/memory_run.py results file: Redis used_memory against finished jobs
(successes + failed executions, from the stats counters). Needs matplotlib (in
bench/.venv-peers, as bench/costs_report.py):

    bench/.venv-peers/bin/python -m bench.memory_plot bench/results/memory-hour-*.json [--out docs/x.png]
"""

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs"


def queued(sample: dict) -> int:  # as bench.memory_run.queued (this runs in another venv)
    if "queued" in sample:
        return int(sample["queued"])
    return max(0, sample["enqueued"] - sample["processed"] - sample["failed"])


def plot(result: dict, out: Path) -> None:
    samples = result["samples"]
    done = [(s["processed"] + s["failed"]) / 1000 for s in samples]
    used = [s["used_memory"] / 1e6 for s in samples]
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    ax.plot(done, used, marker=".", linewidth=1.2, label="used_memory")
    if "less_queued_spread" in result["verdict"]:
        less = [(s["used_memory"] - queued(s) * 337) / 1e6 for s in samples]  # bench.memory_run.QUEUED_JOB_BYTES
        ax.plot(
            done,
            less,
            linestyle="--",
            linewidth=1.0,
            color="tab:blue",
            alpha=0.6,
            label="used_memory less the queued jobs (337 B each)",
        )
    ax.axhline(result["empty_used_memory"] / 1e6, color="grey", linestyle=":", label="empty instance")
    verdict = result["verdict"]
    if "last_half_spread" in verdict:
        end = samples[-1]["t"]
        tail = [d for d, s in zip(done, samples, strict=True) if s["t"] >= end / 2]
        ax.axvspan(
            tail[0],
            tail[-1],
            color="tab:green",
            alpha=0.08,
            label=f"last half: {verdict['last_half_min_mb']}-{verdict['last_half_max_mb']} MB "
            f"({verdict['last_half_spread'] * 100:.1f} %)"
            + (f"; less queued {verdict['less_queued_spread'] * 100:.1f} %" if "less_queued_spread" in verdict else ""),
        )
        title = (
            f"{float(result['args']['minutes']):g} min at {float(result['args']['rate']):g} jobs/s, "
            f"--procs {result['args']['procs']}, default retention"
        )
    else:
        title = (
            f"{result['enqueued']:,} jobs, {float(result['args']['fail_rate']) * 100:g} % failing: "
            f"{verdict['final_minus_empty_mb']} MB over the empty instance"
        )
    backlog = [queued(s) / 1000 for s in samples]
    if max(backlog) > 0:  # queued jobs take memory too: shown, to tell them from what is retained
        twin = ax.twinx()
        twin.plot(done, backlog, color="tab:orange", linewidth=0.8, alpha=0.7, label="queued (thousands)")
        twin.set_ylabel("jobs waiting (thousands, approx.)", color="tab:orange", fontsize=8)
        twin.set_ylim(bottom=0)
        twin.legend(fontsize=8, loc="upper center")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("finished executions (thousands)")
    ax.set_ylabel("Redis used_memory (MB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out)
    print(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="default: docs/<results name>.png")
    args = parser.parse_args()
    result = json.loads(args.results.read_text())
    plot(result, args.out or DOCS / (args.results.stem + ".png"))


if __name__ == "__main__":
    main()
