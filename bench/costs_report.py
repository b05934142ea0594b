"""`python -m bench.costs_report <costs json> [suffix]`: the cost curves' tables
(costs-latest.md) and one PNG per curve. Runs in bench/.venv-peers (matplotlib)."""

import json
import sys
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COG, BARE = "tab:blue", "tab:gray"


def med(s):
    return s["median"] if isinstance(s, dict) else s


def err(stats_list):
    """matplotlib yerr from [{"median","min","max"}]."""
    if not all(isinstance(s, dict) for s in stats_list):
        return None  # single numbers (one repetition): no bars
    return [[s["median"] - s["min"] for s in stats_list], [s["max"] - s["median"] for s in stats_list]]


def rng(s, digits=0):
    if not isinstance(s, dict):
        return f"{s:,.{digits}f}"
    if s["min"] == s["max"]:
        return f"{s['median']:,.{digits}f}"
    return f"{s['median']:,.{digits}f} [{s['min']:,.{digits}f}–{s['max']:,.{digits}f}]"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def size_label(b):
    b = int(b)
    return f"{b // 1_048_576} MB" if b >= 1_048_576 else f"{b // 1024} KB" if b >= 1024 else f"{b} B"


def queues(c, out):
    ks = sorted(c, key=int)
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.errorbar(
        [int(k) for k in ks],
        [med(c[k]["steady"]) for k in ks],
        yerr=err([c[k]["steady"] for k in ks]),
        marker="o",
        color=COG,
        label="jobs/s (left)",
    )
    ax.set_xscale("log")
    ax.set_xticks([int(k) for k in ks], [str(k) for k in ks])
    ax.set_xlabel("queues the worker listens to (job on the last, the others empty)")
    ax.set_ylabel("no-op jobs/s, N = 2")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(
        [int(k) for k in ks],
        [med(c[k]["redis_us_per_job"]) for k in ks],
        marker="s",
        ls="--",
        color="tab:red",
        label="Redis CPU per job, whole process (right)",
    )
    if "fetch_script_us" in c[ks[0]]:
        ax2.plot(
            [int(k) for k in ks],
            [med(c[k]["fetch_script_us"]) for k in ks],
            marker="^",
            ls=":",
            color="tab:purple",
            label="Redis time per fetch-and-ack script call (right)",
        )
    if "fetch_script_us_first" in c[ks[0]]:
        ax2.plot(
            [int(k) for k in ks],
            [med(c[k]["fetch_script_us_first"]) for k in ks],
            marker="v",
            ls=":",
            color="tab:green",
            label="the same, job on the first queue (right)",
        )
    ax2.set_ylabel("µs (Redis)")
    ax2.set_ylim(bottom=0)
    _legend(ax, ax2)
    ax.set_title("cogworker: cost of idle queues in the fetch order")
    _save(fig, out)
    first = "fetch_script_us_first" in c[ks[0]]
    return table(
        [
            "queues",
            "no-op jobs/s, N = 2",
            "Redis CPU µs/job (process)",
            "fetch-and-ack script µs/call",
            *(["the same, job on the first queue"] if first else []),
        ],
        [
            [
                k,
                rng(c[k]["steady"]),
                rng(c[k]["redis_us_per_job"], 1),
                rng(c[k]["fetch_script_us"], 1),
                *([rng(c[k]["fetch_script_us_first"], 1)] if first else []),
            ]
            for k in ks
        ],
    )


def scheduled(c, out):
    ks = sorted(c, key=int)
    xs = list(range(len(ks)))  # categories: 0 has no place on a log axis
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.errorbar(
        xs,
        [med(c[k]["poll_ms"]) for k in ks],
        yerr=err([c[k]["poll_ms"] for k in ks]),
        marker="o",
        color=COG,
        label="client wall time per pass, ms",
    )
    redis_key, redis_label = (
        ("poll_redis_us", "Redis time in the poll scripts per pass, ms")
        if "poll_redis_us" in c[ks[0]]
        else ("poll_redis_cpu_us", "Redis process CPU per pass (INFO cpu), ms")
    )
    a1.plot(xs, [med(c[k][redis_key]) / 1000 for k in ks], marker="s", ls="--", color="tab:red", label=redis_label)
    a2.errorbar(
        xs,
        [med(c[k]["steady"]) for k in ks],
        yerr=err([c[k]["steady"] for k in ks]),
        marker="o",
        color=COG,
        label="no-op jobs/s, N = 2, poller running",
    )
    parked = [k for k in ks if "steady_parked" in c[k]]
    if parked:
        a2.plot(
            [ks.index(k) for k in parked],
            [med(c[k]["steady_parked"]) for k in parked],
            marker="s",
            ls="--",
            color=BARE,
            label="the same Redis, sets renamed away",
        )
    for a in (a1, a2):
        a.set_xticks(xs, [f"{int(k):,}" for k in ks])
        a.set_xlim(-0.3, len(ks) - 0.7)
        a.set_xlabel("entries not yet due, in each of schedule and retry")
        a.set_ylim(bottom=0)
        a.legend(loc="best")
    a1.set_ylabel("ms per poller pass")
    a2.set_ylabel("jobs/s")
    a1.set_title("scheduled poller: one pass (both sets)")
    a2.set_title("throughput while the master polls")
    _save(fig, out)
    return table(
        [
            "entries per set",
            "poll ms/pass (client)",
            redis_label.replace(", ms", ", µs"),
            "no-op jobs/s",
            "no-op jobs/s, sets renamed away (same Redis)",
            "in place ÷ renamed away",
        ],
        [
            [
                f"{int(k):,}",
                rng(c[k]["poll_ms"], 3),
                rng(c[k][redis_key], 0),
                rng(c[k]["steady"]),
                rng(c[k]["steady_parked"]) if "steady_parked" in c[k] else "—",
                f"{med(c[k]['steady']) / med(c[k]['steady_parked']):.2f}" if "steady_parked" in c[k] else "—",
            ]
            for k in ks
        ],
    )


def dead(c, out, rate):
    ks = sorted(c, key=int)
    labels = ["empty" if int(k) == 0 else f"at its cap ({int(k):,})" for k in ks]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
    key = "paced_script_us" if "paced_script_us" in c[ks[0]] else "paced_redis_us"
    a1.bar(labels, [med(c[k][key]) for k in ks], yerr=err([c[k][key] for k in ks]), color=[COG, "tab:orange"])
    a1.set_ylabel(
        "Redis time in scripts per failing job, µs"
        if key == "paced_script_us"
        else "Redis process CPU per failing job, µs"
    )
    a1.set_title(f"jobs failing at {rate}/s")
    a2.bar(labels, [med(c[k]["steady"]) for k in ks], yerr=err([c[k]["steady"] for k in ks]), color=[COG, "tab:orange"])
    a2.set_ylabel("failing jobs/s, N = 2")
    a2.set_title("failing jobs queued at once")
    for a in (a1, a2):
        a.set_xlabel("dead set before the run")
    _save(fig, out)
    return table(
        [
            "dead set",
            f"Redis CPU µs per failing job at {rate}/s (process)",
            "of which in scripts (fetch, ack, file)",
            "of which trimming (ZREMRANGEBYSCORE, ZREMRANGEBYRANK)",
            "dead set after",
            "failing jobs/s (burst)",
        ],
        [
            [
                lab,
                rng(c[k]["paced_redis_us"], 1),
                rng(c[k]["paced_script_us"], 1) if "paced_script_us" in c[k] else "— (not measured)",
                rng(c[k]["paced_trim_us"], 2) if "paced_trim_us" in c[k] else "— (not measured)",
                rng(c[k]["dead_after"]),
                rng(c[k]["steady"]),
            ]
            for lab, k in zip(labels, ks, strict=False)
        ],
    )


def payload(c, out):
    sizes = sorted(c["cogworker"], key=int)
    xs = [int(s) for s in sizes]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for name, color in (("cogworker", COG), ("bare-2rt", BARE)):
        a1.errorbar(
            xs,
            [med(c[name][s]["steady"]) for s in sizes],
            yerr=err([c[name][s]["steady"] for s in sizes]),
            marker="o",
            color=color,
            label=name,
        )
        a2.plot(xs, [med(c[name][s]["redis_us_per_job"]) for s in sizes], marker="o", color=color, label=name)
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}")
    for a in (a1, a2):
        a.set_xscale("log")
        a.set_yscale("log")
        a.yaxis.set_major_formatter(plain)
        # Minor ticks: only 2x and 5x labelled, or they crowd into each other.
        a.yaxis.set_minor_formatter(
            matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if f"{v:.0e}"[0] in "25" else "")
        )
        a.tick_params(axis="y", which="minor", labelsize=7)
        a.set_xticks(xs, [size_label(s) for s in sizes])
        a.set_xlabel("payload (one string argument)")
        a.legend()
    a1.set_ylabel("no-op jobs/s, N = 2")
    a2.set_ylabel("Redis CPU per job, µs")
    a1.set_title("throughput by payload size")
    a2.set_title("Redis CPU per job")
    _save(fig, out)
    return table(
        [
            "payload",
            "cogworker jobs/s",
            "bare-2rt jobs/s",
            "cogworker ÷ bare",
            "Redis µs/job cogworker",
            "Redis µs/job bare",
        ],
        [
            [
                size_label(s),
                rng(c["cogworker"][s]["steady"]),
                rng(c["bare-2rt"][s]["steady"]),
                f"{med(c['cogworker'][s]['steady']) / med(c['bare-2rt'][s]['steady']) * 100:.0f}%",
                rng(c["cogworker"][s]["redis_us_per_job"], 1),
                rng(c["bare-2rt"][s]["redis_us_per_job"], 1),
            ]
            for s in sizes
        ],
    )


def payload_commands(c):
    """Redis's time per job inside each command, at each payload size."""
    rows = []
    for name in ("cogworker", "bare-2rt"):
        for s in sorted(c[name], key=int):
            cmds = c[name][s].get("cmd_us_per_job") or {}
            top = sorted(cmds.items(), key=lambda kv: -med(kv[1]))[:6]
            total = med(c[name][s]["redis_us_per_job"])
            rows.append([name, size_label(s), f"{total:,.0f}", ", ".join(f"{k} {med(v):,.0f}" for k, v in top)])
    return table(
        [
            "system",
            "payload",
            "Redis CPU µs/job (process)",
            "µs/job inside commands (EVALSHA includes the commands its script runs)",
        ],
        rows,
    )


def enqueue(c, out):
    steps = list(c["us_per_call"])
    fig, ax = plt.subplots(figsize=(10, 4))
    vals = [med(c["us_per_call"][s]) for s in steps]
    colors = [BARE if s.startswith("bare") else COG for s in steps]
    ax.barh(steps[::-1], vals[::-1], xerr=err([c["us_per_call"][s] for s in steps][::-1]), color=colors[::-1])
    ax.set_xlabel("µs per call, one producer (lower is faster)")
    ax.set_title("single enqueue: bare LPUSH vs cogworker, step by step")
    fig.subplots_adjust(left=0.5, right=0.97)
    _save(fig, out, tight=False)
    rows = [[s, rng(c["us_per_call"][s], 1), f"{1e6 / med(c['us_per_call'][s]):,.0f}"] for s in steps]
    cmds = c.get("redis_cmd_us_per_call", {})
    rows += [
        [
            f"Redis CPU per call: {k}"
            + (
                " (in commands: " + ", ".join(f"{name} {med(us):.2f}" for name, us in cmds[k].items()) + ")"
                if k in cmds
                else ""
            ),
            rng(v, 1),
            "",
        ]
        for k, v in c["redis_us_per_call"].items()
    ]
    md = table(["step", "µs per call", "calls/s"], rows)
    if "ratio" in c:
        r = c["ratio"]
        md += (
            f"\n\ncogworker `noop.enqueue()` ÷ the bare client, calls/s, in {med(r['rounds']):.0f} "
            f"alternating rounds of {med(r['calls_per_round']):,.0f} calls each: median {med(r['median']):.3f} "
            f"[{med(r['min']):.3f}–{med(r['max']):.3f}] (of one repetition's rounds; medians over repetitions)"
        )
    return md


def profile(p):
    parts = [
        "`wall`: every sample, waits on Redis included (py-spy --idle); `gil`: only samples that hold "
        "the GIL, i.e. the process's own Python work (py-spy --gil). Self = the innermost frame; "
        "inclusive = anywhere in the stack.",
        "",
    ]
    for key, views in p.items():
        for view, prof in views.items():
            rows = [
                [a, b, c, d]
                for (a, b), (c, d) in zip(prof["self_pct"].items(), prof["inclusive_pct"].items(), strict=False)
            ]
            parts += [
                f"**{key}, {view}** ({prof['samples']} samples)",
                "",
                table(["function (self)", "%", "function (inclusive)", "%"], rows),
                "",
            ]
    return "\n".join(parts)


def _legend(*axes):
    handles, labels = [], []
    for a in axes:
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    # Below the plot: inside, it would cover points whatever the corner.
    axes[0].legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, frameon=False)


def _save(fig, out, tight=True):
    if tight:
        fig.tight_layout()
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(path, suffix=""):
    doc = json.loads(Path(path).read_text())
    results = Path(path).parent
    meta, curves = doc["meta"], doc["curves"]
    load = (
        f"load average {meta['loadavg_start']:.2f} at start, {meta['loadavg_end']:.2f} at end; "
        if meta.get("loadavg_start") is not None
        else ""
    )
    md = [
        f"## cogworker cost curves ({meta['mode']} run)",
        "",
        f"{meta['date']}; {meta['cpu_count']} CPUs; {load}commit {meta['git_commit']}; "
        f"median [min–max] of {meta['reps']}.",
        "",
    ]
    md += [f"> {meta['note']}", ""] if meta.get("note") else []
    makers = {
        "queues": queues,
        "scheduled": scheduled,
        "payload": payload,
        "enqueue": enqueue,
        "dead": lambda c, out: dead(c, out, meta["plan"]["dead_rate"]),
    }
    titles = {
        "queues": "Queues listened to",
        "scheduled": "Scheduled and retry set sizes",
        "dead": "Dead set at its cap",
        "payload": "Payload size",
        "enqueue": "Single enqueue",
    }
    for name in ("queues", "scheduled", "dead", "payload", "enqueue"):
        if name in curves:
            png = f"costs-{name}{suffix}.png"
            md += [
                f"### {titles[name]}",
                "",
                makers[name](curves[name]["summary"], results / png),
                "",
                f"![{titles[name]}]({png})",
                "",
            ]
            if name == "payload":
                md += [payload_commands(curves[name]["summary"]), ""]
    if doc.get("profile"):
        lua = doc["profile"]["lua_payload_us"]
        sizes = list(next(iter(lua.values())))
        md += [
            "### A payload through a Lua script (Redis's own time per call, commandstats, µs)",
            "",
            table(
                ["call"] + [size_label(s) for s in sizes],
                [[name] + [f"{per[s]:,.1f}" for s in sizes] for name, per in lua.items()],
            ),
            "",
        ]
        if doc["profile"].get("pyspy"):
            md += ["### py-spy samples", "", profile(doc["profile"]["pyspy"])]
    (results / f"costs-latest{suffix}.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
