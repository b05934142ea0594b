"""The tables of what each system costs Redis: the true no-op run (jobs/s, Redis CPU
and commands per job) and the projection of how many jobs/s one Redis core carries
(1 / Redis CPU per job, enqueue included)."""


def _point(doc):
    return f"2p-{doc['meta']['plan']['payload']}B"


def s_truenoop(doc):
    from bench import report as R

    P = _point(doc)
    rows = []
    for n in R._names(doc, "truenoop", P):
        r = R.get(doc, "truenoop", P, n)
        if not r.get("overall"):
            rows.append([n, R._err(r), "", "", "", "", ""])
            continue
        rows.append(
            [
                n,
                R._jobs(r),
                R.rng(r["overall"]),
                R.rng(r.get("steady")),
                R._m(r, "redis_us", 1),
                R._m(r, "redis_cmds", 2),
                _core(r.get("redis_us")),
            ]
        )
    if not rows:
        return None
    plan = doc["meta"]["plan"]
    return [
        f"### True no-op: {plan['tn_n']:,} jobs whose body makes no Redis call (it appends a byte to a "
        f"file of its process), enqueued before the workers start, N = 2; Redis CPU (`INFO cpu` user + "
        "sys) and commands (`INFO stats`) per job over the steady window (10–90% of the jobs)",
        "",
        R.table(
            [
                "system",
                "jobs run",
                "jobs/s first→last",
                "jobs/s steady",
                "Redis CPU µs/job",
                "commands/job",
                "jobs/s one Redis core carries (consume only)",
            ],
            rows,
        ),
    ]


def _core(stats):
    if not stats or not stats.get("median"):
        return "—"
    return f"{1e6 / stats['median']:,.0f}"


def enqueue_cost(doc, name):
    """(Redis µs per enqueued job, which API) for a system: bulk where it has one."""
    r = doc["results"].get("enqueue", {}).get(f"{doc['meta']['plan']['payload']}B", {}).get(name) or {}
    for api in ("bulk", "single"):
        us = r.get(f"{api}_redis_us")
        if us and us.get("median") is not None:
            return us["median"], api
    return None, None


def projection(doc):
    """[(system, consume µs, enqueue µs, API, jobs/s one core carries)] where both are known."""
    out = []
    for n in doc["systems"]:
        r = doc["results"].get("truenoop", {}).get(_point(doc), {}).get(n) or {}
        consume = (r.get("redis_us") or {}).get("median")
        enq, api = enqueue_cost(doc, n)
        if consume is None or enq is None:
            continue
        out.append((n, consume, enq, api, 1e6 / (consume + enq)))
    return out


def s_projection(doc):
    from bench import report as R

    rows = [
        [n, f"{c:.1f}", f"{e:.1f} ({api})", f"{c + e:.1f}", f"{jobs:,.0f}"] for n, c, e, api, jobs in projection(doc)
    ]
    if not rows:
        return None
    return [
        "### Projection: jobs/s one Redis core carries, enqueue included (1 ÷ Redis CPU per job; "
        "medians of the true no-op run and of the enqueue run, bulk API where the library has one)",
        "",
        R.table(["system", "consume µs/job", "enqueue µs/job", "total µs/job", "jobs/s per Redis core"], rows),
    ]
