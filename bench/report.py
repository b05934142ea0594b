"""Turn the repetitions into medians [min-max], tables (markdown) and JSON files."""

import json
import math
import statistics
from pathlib import Path

from bench import report_redis
from bench.targets import targets

INF = math.inf


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(workload, slot):
    reps = slot.get("reps", [])
    out = {"reps": reps}
    if slot.get("error"):
        out["error"] = slot["error"]
    if not reps:
        return out
    if workload == "recovery":
        # A lost trial counts as infinitely late, so the median says "lost" when most were.
        times = sorted(INF if r["lost"] else r["rerun_s"] for r in reps)
        med = statistics.median(times)
        found = [t for t in times if t != INF]
        out.update(
            trials=len(reps),
            lost=sum(r["lost"] for r in reps),
            fleet_exited=sum(bool(r.get("fleet_exited")) for r in reps),
            restarted=sum(bool(r.get("restarted")) for r in reps),
            rerun_s={
                "median": None if med == INF else med,
                "min": min(found) if found else None,
                "max": max(found) if found else None,
            },
        )
        return out
    keys = [k for k, v in reps[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for k in keys:
        out[k] = stats(r.get(k) for r in reps)
    if "capped" in reps[0]:
        out["capped"] = any(r["capped"] for r in reps)
    return out


def build(meta, systems, data):
    results = {
        w: {p: {name: summarize(w, slot) for name, slot in per.items()} for p, per in points.items()}
        for w, points in data.items()
    }
    doc = {
        "meta": meta,
        "systems": {s.name: {"lib": s.lib, "config": s.config, "interpreter": s.interpreter} for s in systems},
        "results": results,
    }
    doc["targets"] = targets(doc)  # bench/targets.py
    return doc


# ---------------------------------------------------------------- formatting


def num(x, digits=0):
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def rng(s, digits=0, scale=1.0):
    """median [min–max] of a stats dict."""
    if not s:
        return "—"
    m, lo, hi = (s[k] * scale for k in ("median", "min", "max"))
    if s.get("n", 2) == 1:
        return num(m, digits)
    return f"{num(m, digits)} [{num(lo, digits)}–{num(hi, digits)}]"


def brief(workload, v):
    """One line for the progress log."""
    if workload in ("throughput", "curves", "truenoop"):
        cut = f", cut at {v['n']}" if v["capped"] else ""
        red = (
            f"; Redis {num(v['redis_us'], 1)} µs, {num(v['redis_cmds'], 2)} cmds per job"
            if v.get("redis_us") is not None
            else ""
        )
        return f"{num(v['overall'])} jobs/s (steady {num(v['steady'])}{cut}){red}"
    if workload == "cpu":
        return f"{num(v['rate'], 1)} jobs/s, efficiency {v['efficiency'] * 100:.1f}%"
    if workload == "latency":
        return f"p50 {v['p50_ms']:.2f} ms, p99 {v['p99_ms']:.2f} ms"
    if workload == "enqueue":
        return (
            f"single {num(v['single'])}/s ({num(v.get('single_redis_us'), 1)} µs Redis), "
            f"bulk {num(v['bulk'])}/s ({num(v.get('bulk_redis_us'), 1)} µs Redis)"
        )
    if workload == "memory":
        return (
            f"child USS {v['child_uss_mb']:.1f} MB, RSS {v['child_rss_mb']:.1f} MB, "
            f"total USS {v['total_uss_mb']:.1f} MB"
        )
    if workload == "recovery":
        why = _restart_note(v.get("fleet_exited"), v.get("restarted"))
        if v["lost"]:
            return "not re-run within the bound" + (f" ({why})" if why else "")
        return f"re-run {v['rerun_s']:.3f} s after the kill" + (f" ({why})" if why else "")
    return str(v)


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def get(doc, workload, point, name):
    return doc["results"].get(workload, {}).get(point, {}).get(name)


def _restart_note(all_exited, restarted):
    if all_exited:
        return "all workers exited; restarted"
    if restarted:
        return "the killed worker exited; restarted"
    return ""


def _secs(x):
    return f"{x:.3f} s" if x < 10 else f"{x:.0f} s"


def sigkill_cell(r, lib, bound=None):
    if lib == "bare":
        return "n/a (ceiling)"
    if not r or "trials" not in r:
        return _err(r)
    why = _restart_note(r["fleet_exited"], r.get("restarted"))
    why = f"; {why}" if why else ""
    if r["lost"] == 0:
        verb = "re-run in" if r["rerun_s"]["median"] < 10 else "re-run after"
        return f"{verb} {_secs(r['rerun_s']['median'])} (0/{r['trials']} lost{why})"
    within = f" within {bound:.0f} s" if bound else ""
    return f"**LOST**: not re-run{within} ({r['lost']}/{r['trials']}{why})"


def markdown(doc):
    meta = doc["meta"]
    md = [f"## Benchmark results ({meta['mode']} run)", "", header_line(meta), ""]
    md += [f"> {n}\n" for n in meta.get("notes", [])]
    for section in (
        s_summary,
        s_throughput,
        report_redis.s_truenoop,
        report_redis.s_projection,
        s_curves,
        s_cpu,
        s_latency,
        s_enqueue,
        s_memory,
        s_recovery,
        s_targets,
    ):
        part = section(doc)
        if part:
            md += part + [""]
    return "\n".join(md)


def header_line(meta):
    versions = ", ".join(f"{k} {v}" for k, v in meta["peers"].items() if k != "python" and v)
    if meta.get("cogworker"):
        versions += f", cogworker {meta['cogworker']['version']}"
    if meta.get("git_commit"):
        versions += f" (commit {meta['git_commit']})"
    load = meta.get("loadavg_start")
    return (
        f"{meta['date']}; {meta['cpu_count']} CPUs ({meta['machine']}); "
        f"load average at start {load:.2f}; redis-server {meta['redis_server']}; "
        f"Python {meta['peers'].get('python')}. {meta['reps']} repetition(s) per number, "
        f"shown as median [min–max]. Versions: {versions}."
    )


def _names(doc, workload, *points):
    """The systems, in table order, that have a result in any of these points."""
    return [n for n in doc["systems"] if any(get(doc, workload, p, n) is not None for p in points)]


def _main_point(meta):
    return f"2p-{meta['plan']['payload']}B"


def s_summary(doc):
    meta = doc["meta"]
    rows = []
    for n, s in doc["systems"].items():
        rows.append(
            [
                n,
                s["config"],
                sigkill_cell(get(doc, "recovery", "2p", n), s["lib"], meta["plan"].get("rec_bound")),
                _m(get(doc, "throughput", _main_point(meta), n), "overall"),
                _pct(get(doc, "cpu", "2p", n)),
                _ms(get(doc, "latency", "2p", n), "p99_ms"),
                _enq(get(doc, "enqueue", f"{meta['plan']['payload']}B", n)),
                _mb(get(doc, "memory", "2p", n), "child_uss_mb"),
            ]
        )
    return [
        "### Summary",
        "",
        table(
            [
                "system",
                "configuration",
                "SIGKILL mid-job (measured)",
                "no-op jobs/s, N=2",
                "CPU efficiency, N=2",
                "pickup p99 ms",
                "enqueue/s single · bulk",
                "USS MB per child, N=2",
            ],
            rows,
        ),
    ]


def s_throughput(doc):
    meta = doc["meta"]
    P = _main_point(meta)
    rows = []
    for n in _names(doc, "throughput", P):
        r = get(doc, "throughput", P, n)
        if not r.get("overall"):
            rows.append([n, _err(r), "", "", ""])
            continue
        rows.append(
            [
                n,
                _jobs(r),
                rng(r["overall"]),
                rng(r.get("steady")),
                rng(r.get("startup_s"), 2),
                _m(r, "redis_us", 1),
                _m(r, "redis_cmds", 2),
            ]
        )
    if not rows:
        return None
    return [
        f"### Throughput: {meta['plan']['thr_n']:,} no-op jobs enqueued before the workers start, N = 2 "
        "(the body counts itself in Redis: one script call per job, in the Redis columns too)",
        "",
        table(
            [
                "system",
                "jobs run",
                "jobs/s first→last",
                "jobs/s steady (10–90%)",
                "start-up s",
                "Redis CPU µs/job (steady)",
                "commands/job",
            ],
            rows,
        ),
    ]


def s_curves(doc):
    meta = doc["meta"]
    if "curves" not in doc["results"]:
        return None
    cols = [(f"{p}p-{b}B", f"N={p}, {_bytes(b)}") for p, b in meta["plan"]["curve_points"]]
    cols.insert(1, (_main_point(meta), f"N=2, {_bytes(meta['plan']['payload'])}"))
    rows = [
        [n] + [_m(_curve(doc, p, n, meta), "steady") for p, _ in cols]
        for n in _names(doc, "curves", *(p for p, _ in cols))
    ]
    return [
        f"### Scaling curves: steady-state jobs/s by processes and payload size "
        f"({meta['plan']['curve_n']:,} jobs per point; N=2, 100 B is the throughput run)",
        "",
        table(["system"] + [h for _, h in cols], rows),
    ]


def s_cpu(doc):
    meta = doc["meta"]
    names = _names(doc, "cpu", "1p", "2p")
    if not names:
        return None
    cj = meta["cpu_job"]
    rows = []
    for n in names:
        r1, r2 = get(doc, "cpu", "1p", n), get(doc, "cpu", "2p", n)
        rows.append(
            [n, _m(r1, "rate", 1), _pct(r1), _m(r1, "job_ms", 1), _m(r2, "rate", 1), _pct(r2), _m(r2, "job_ms", 1)]
        )
    return [
        f"### CPU scaling: {meta['plan']['cpu_n']} jobs of {cj['iterations']:,} iterations of "
        f"pure Python (~{cj['seconds'] * 1000:.1f} ms measured alone); "
        "efficiency = jobs/s ÷ (N / job time), job time = the work's mean CPU time in the run; "
        "each job records itself in a file (no Redis round trip in the body)",
        "",
        table(
            ["system", "N=1 jobs/s", "N=1 efficiency", "N=1 job ms", "N=2 jobs/s", "N=2 efficiency", "N=2 job ms"], rows
        ),
    ]


def s_latency(doc):
    meta = doc["meta"]
    names = _names(doc, "latency", "2p")
    if not names:
        return None
    keys = ("p50_ms", "p95_ms", "p99_ms", "max_ms")
    rows = [[n] + [_ms(get(doc, "latency", "2p", n), k) for k in keys] for n in names]
    return [
        f"### Pickup latency on idle workers (N=2): {meta['plan']['lat_n']} jobs one at a time, enqueue → start, ms",
        "",
        table(["system", "p50", "p95", "p99", "max"], rows),
    ]


def s_enqueue(doc):
    meta = doc["meta"]
    pl = f"{meta['plan']['payload']}B"
    rows = []
    for n in _names(doc, "enqueue", pl):
        r = get(doc, "enqueue", pl, n)
        if not r.get("single"):
            rows.append([n, _err(r), ""])
            continue
        bulk = r.get("bulk")
        rows.append(
            [
                n,
                _m(r, "single"),
                _m(r, "single_redis_us", 1),
                _m(r, "single_redis_cmds", 2),
                _m(r, "bulk") if bulk else "— (no bulk API)",
                _m(r, "bulk_redis_us", 1) if bulk else "—",
                _m(r, "bulk_redis_cmds", 2) if bulk else "—",
            ]
        )
    if not rows:
        return None
    return [
        f"### Enqueue, one producer: {meta['plan']['enq_single']:,} single calls, "
        f"{meta['plan']['enq_bulk']:,} through the bulk API (jobs/s; Redis CPU µs and commands per job)",
        "",
        table(
            ["system", "single jobs/s", "Redis µs/job", "commands/job", "bulk jobs/s", "Redis µs/job", "commands/job"],
            rows,
        ),
    ]


def s_memory(doc):
    names = _names(doc, "memory", "2p", "4p")
    if not names:
        return None
    head = ["system"]
    for p in (2, 4):
        head += [f"N={p} child USS", "child RSS", "master USS", "total USS"]
    keys = ("child_uss_mb", "child_rss_mb", "master_uss_mb", "total_uss_mb")
    rows = [[n] + [_mb(get(doc, "memory", p, n), k) for p in ("2p", "4p") for k in keys] for n in names]
    return [
        "### Memory with a preloaded 50 MB module (MB, psutil memory_full_info, idle after a few jobs)",
        "",
        table(head, rows),
    ]


def s_recovery(doc):
    meta = doc["meta"]
    rows = []
    for n in _names(doc, "recovery", "2p"):
        r = get(doc, "recovery", "2p", n)
        if "trials" not in r:
            rows.append([n, _err(r), "", "", ""])
            continue
        rs = r["rerun_s"]
        restarts = [x["restart_s"] for x in r["reps"] if x.get("restart_s") is not None]
        note = _restart_note(r["fleet_exited"], r.get("restarted"))
        rows.append(
            [
                n,
                f"{r['lost']}/{r['trials']}",
                "not re-run (lost)" if rs["median"] is None else _secs(rs["median"]),
                "—" if rs["min"] is None else f"{_secs(rs['min'])}–{_secs(rs['max'])}",
                f"{note} after {_secs(statistics.median(restarts))}" if restarts else "no",
            ]
        )
    if not rows:
        return None
    p = meta["plan"]
    return [
        f"### Recovery: the process running a {p['rec_job']:.0f} s job is SIGKILLed half-way "
        f"(N=2); seconds until that job starts again (lost: not within {p['rec_bound']:.0f} s). "
        f"A launched process that exits is restarted once, as a supervisor would; "
        f"{p.get('rec_trickle', 0)} no-op jobs/s keep arriving meanwhile. Up to {p['rec_trials']} "
        f"trials; {p.get('rec_slow_trials', p['rec_trials'])} for a system with a trial slower than 20 s",
        "",
        table(["system", "lost", "re-run after (median)", "min–max", "supervisor restart"], rows),
    ]


def s_targets(doc):
    if not doc.get("targets"):
        return None
    return [
        "### cogworker's targets (benchmark figures, not tests)",
        "",
        table(["target", "measured", "met"], [[t["target"], t["measured"], t["met"]] for t in doc["targets"]]),
    ]


def _curve(doc, p, n, meta):
    return get(doc, "throughput" if p == _main_point(meta) else "curves", p, n)


def _m(r, key, digits=0):
    if not r:
        return "—"
    if r.get(key) is None:
        return _err(r)
    return rng(r[key], digits)


def _pct(r, key="efficiency"):
    return rng(r[key], 1, 100) + " %" if r and r.get(key) else _err(r)


def _ms(r, key):
    return rng(r[key], 2) if r and r.get(key) else _err(r)


def _mb(r, key):
    return rng(r[key], 1) if r and r.get(key) is not None else _err(r)


def _enq(r):
    if not r or not r.get("single"):
        return _err(r)
    bulk = num(r["bulk"]["median"]) if r.get("bulk") else "—"
    return f"{num(r['single']['median'])} · {bulk}"


def _jobs(r):
    text = f"{r['n']['median']:,.0f}"
    if r.get("capped"):
        text += f" of {r['enqueued']['median']:,.0f} (time cap)"
    return text


def _err(r):
    return f"error: {r['error'][:50]}" if r and r.get("error") else "—"


def _bytes(b):
    return f"{b // 1024} KB" if b >= 1024 else f"{b} B"


# ---------------------------------------------------------------- files


def write(doc, text, out_dir):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = doc["meta"]["date"].replace(":", "").replace("-", "")[:15]
    # A --quick smoke run, or a run of only some workloads, never overwrites the last full
    # run's latest.*: it writes latest-quick.*, latest-recovery.* (the workloads it ran) etc.
    suffix = "-quick" if doc["meta"]["mode"] == "quick" else ""
    if doc["meta"].get("partial"):
        suffix += "-" + "-".join(doc["meta"]["workloads"])
    data = json.dumps(doc, indent=1, default=_json_default)
    paths = []
    for name, content in (
        (f"{stamp}{suffix}.json", data),
        (f"latest{suffix}.json", data),
        (f"latest{suffix}.md", text + "\n"),
    ):
        path = out_dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(content)
        tmp.replace(path)  # never leave a half-written latest.* behind
        paths.append(path)
    return paths


def _json_default(o):
    if isinstance(o, float) and math.isinf(o):
        return None
    return str(o)
