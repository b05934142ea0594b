"""The whole system at a glance: counters, per-day history, processes, unsettled
records, and finding a jid wherever it is. In the queue layout on a cluster the counters
are the fleet's and the rest is read from every part and merged (``parts``)."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

from .. import routing, store
from ..config import Config, as_text, count, get_config, number
from ..errors import NotFound
from ..lifecycle.stats import day_of
from .queues import Queue, queue_names, with_levels
from .records import DayStats, JobRecord, ProcessRecord, RunningJob, Stats, check_page, checked
from .sets import DeadSet, RetrySet, ScheduledSet
from .status import parse_progress


def stats(config: Config | None = None) -> Stats:
    config = config or get_config()
    if routing.merged(config):
        processed, failed = config.redis().mget([config.keys.stats_processed, config.keys.stats_failed])
        enqueued = sum(_enqueued(part, queue_names(part)) for part in routing.parts(config))
    else:  # one namespace: the counters and the sizes in one round trip, as always
        names = queue_names(config)
        processed, failed, enqueued = _counters_and_sizes(config, names)
    procs = processes(config)
    return Stats(
        processed=count(processed),
        failed=count(failed),
        enqueued=enqueued,
        scheduled_size=ScheduledSet(config).size(),
        retry_size=RetrySet(config).size(),
        dead_size=DeadSet(config).size(),
        unsettled_size=_unsettled_size(config),
        processes=len(procs),
        busy=sum(p.busy for p in procs if p.kind != "master"),
        default_latency=Queue("default", config).latency(),
    )


def _counters_and_sizes(config: Config, names: list[str]) -> tuple[Any, Any, int]:
    keys = config.keys
    pipe = store.pipeline(config.redis())
    pipe.get(keys.stats_processed)
    pipe.get(keys.stats_failed)
    for name in with_levels(config, names):
        pipe.llen(keys.queue(name))
    results = pipe.execute(raise_on_error=False)
    sizes = [r for r in results[2:] if isinstance(r, int)]  # a queue key of the wrong type counts 0
    return results[0], results[1], sum(sizes)


def _enqueued(config: Config, names: list[str]) -> int:
    """The queues' sizes summed, in one part (one round trip)."""
    if not names:
        return 0
    pipe = store.pipeline(config.redis())
    for name in with_levels(config, names):
        pipe.llen(config.keys.queue(name))
    return sum(r for r in pipe.execute(raise_on_error=False) if isinstance(r, int))


def _unsettled_size(config: Config) -> int:
    if routing.merged(config):
        return sum(_unsettled_size(part) for part in routing.parts(config))
    client = config.redis()
    with checked(client, config.keys.unsettled, "list"):
        return int(client.llen(config.keys.unsettled))


def history_stats(days: int = 7, config: Config | None = None) -> list[DayStats]:
    """Processed/failed per UTC day, today first, for the last ``days`` days (kept 35)."""
    if not isinstance(days, int) or days < 1:
        raise ValueError(f"days must be a whole number >= 1, not {days!r}")
    config = (config or get_config()).fleet  # the stats flush writes the days to the fleet
    today = int(time.time() // 86400)
    dates = [day_of((today - i) * 1440) for i in range(days)]
    keys = [config.keys.stats_day(kind, d) for d in dates for kind in ("processed", "failed")]
    values = config.redis().mget(keys)
    return [DayStats(d, count(values[2 * i]), count(values[2 * i + 1])) for i, d in enumerate(dates)]


def processes(config: Config | None = None) -> list[ProcessRecord]:
    """Every live process (its record not expired): each master followed by its children,
    by host and pid (``supervision_order``). In the queue layout: the fleet's records (the
    masters') and every part's (their children's), one per identity."""
    config = config or get_config()
    if not routing.merged(config):
        return supervision_order(_with_progress(config, _records(config)))
    chosen: dict[str, ProcessRecord] = {}
    for part in routing.everywhere(config):
        for p in _with_progress(part, _records(part)):
            chosen[p.identity] = _fresher(chosen.get(p.identity), p)
    return supervision_order(list(chosen.values()))


def running_job(jid: str, config: Config | None = None) -> tuple[ProcessRecord, JobRecord | None] | None:
    """Where a running job runs: the live process whose record names it (host, pid, a
    child's master's pid) and the job as it fetched it, from its in-progress list (None
    when it isn't there any more: it just ended). None when no live process runs it."""
    config = config or get_config()
    owner = next((p for p in processes(config) if p.running is not None and p.running.jid == jid), None)
    if owner is None:
        return None
    for part in routing.everywhere(config):  # the queue layout: the list is in its job's part
        for raw in part.redis().lrange(part.keys.in_progress(owner.identity), 0, -1):
            record = JobRecord.parse(raw, f"running:{owner.identity}")
            if record.jid == jid:
                return owner, record
    return owner, None


def _fresher(had: ProcessRecord | None, new: ProcessRecord) -> ProcessRecord:
    """One record of a process beating in several parts: the newest beat, with the job it
    runs from whichever part's record names one (it is kept in the job's part)."""
    if had is None:
        return new
    newer, older = (new, had) if (new.last_beat or 0) > (had.last_beat or 0) else (had, new)
    return newer if newer.running is not None else replace(newer, running=older.running)


def _records(config: Config) -> list[ProcessRecord]:
    """The live records of one namespace (or part): two reads a process, one pipeline."""
    client, keys = config.redis(), config.keys
    with checked(client, keys.processes, "set"):
        identities = sorted(as_text(i) for i in client.smembers(keys.processes))
    pipe = store.pipeline(client)
    for identity in identities:
        pipe.hgetall(keys.process(identity))
        pipe.hgetall(keys.workers(identity))
    results = pipe.execute(raise_on_error=False)
    found = []
    for i, identity in enumerate(identities):
        record, running = results[2 * i], results[2 * i + 1]
        if isinstance(record, dict) and record:
            found.append(_process(identity, _text_map(record), _text_map(running) if isinstance(running, dict) else {}))
    return found


def _with_progress(config: Config, found: list[ProcessRecord]) -> list[ProcessRecord]:
    """Each running job's last progress (``progress:<jid>``, in the namespace or part its
    ``workers:`` record was read in), in one more round trip."""
    jids = [p.running.jid for p in found if p.running is not None and p.running.jid]
    if not jids:
        return found
    shown = dict(
        zip(
            jids, (parse_progress(v) for v in config.redis().mget([config.keys.progress(j) for j in jids])), strict=True
        )
    )
    out = []
    for p in found:
        got = shown.get(p.running.jid or "") if p.running is not None else None
        if got is not None and p.running is not None:
            p = replace(p, running=replace(p.running, progress=got.fraction, progress_message=got.message or None))
        out.append(p)
    return out


def supervision_order(found: list[ProcessRecord]) -> list[ProcessRecord]:
    """Masters and single-process workers by host and pid, each master followed by its
    children (by pid); children whose master has no live record come last on their host."""
    heads = {(p.host, p.pid) for p in found if p.kind != "child"}

    def key(p: ProcessRecord) -> tuple[str, float, int, int]:
        if p.kind != "child":
            return (p.host, p.pid, 0, 0)
        return (p.host, p.ppid if (p.host, p.ppid) in heads else math.inf, 1, p.pid)

    return sorted(found, key=key)


def _text_map(raw: dict[Any, Any]) -> dict[str, str]:
    return {as_text(k): as_text(v) for k, v in raw.items()}


def _process(identity: str, rec: dict[str, str], running: dict[str, str]) -> ProcessRecord:
    job = None
    if running.get("jid"):
        job = RunningJob(running.get("jid"), running.get("class"), running.get("queue"), number(running.get("run_at")))
    return ProcessRecord(
        identity=identity,
        kind=rec.get("role", "?"),
        host=rec.get("host", ""),
        pid=count(rec.get("pid")),
        queues=[q for q in rec.get("queues", "").split(",") if q],
        started_at=number(rec.get("started_at")),
        last_beat=number(rec.get("beat_at")),
        busy=count(rec.get("busy")),
        rss=count(rec.get("rss")),
        running=job,
        state=rec.get("state", ""),
        ppid=count(rec.get("ppid")),
    )


def unsettled(offset: int = 0, limit: int = 100, config: Config | None = None) -> list[JobRecord]:
    """Records parked in ``unsettled`` (``{set, score, payload}``): failures a process could
    not file; any live process files them. ``source`` names the set each is bound for."""
    check_page(offset, limit)
    if limit == 0:
        return []
    config = config or get_config()
    if routing.merged(config):  # no order between parts' lists: part by part, then cut
        pages = [unsettled(0, offset + limit, part) for part in routing.parts(config)]
        return [record for page in pages for record in page][offset : offset + limit]
    client = config.redis()
    with checked(client, config.keys.unsettled, "list"):
        rows = client.lrange(config.keys.unsettled, offset, offset + limit - 1)
    found = []
    for raw in rows:
        outer = JobRecord.parse(raw, "unsettled")
        inner = outer.payload.get("payload")
        if outer.readable and isinstance(inner, str):
            found.append(
                JobRecord.parse(inner, f"unsettled:{outer.payload.get('set', '?')}", number(outer.payload.get("score")))
            )
        else:
            found.append(outer)
    return found


def locate(jid: str, config: Config | None = None) -> JobRecord:
    """The entry of ``jid`` wherever it waits (schedule, retry, dead, a queue); its
    ``source`` says where. ``NotFound`` if it is in none of them."""
    config = config or get_config()
    found = routing.first(routing.parts(config), lambda part: _locate_in(jid, part))
    if found is not None:
        return found
    raise NotFound(f"no job {jid!r} in any queue, schedule, retry or dead")


def _locate_in(jid: str, config: Config) -> JobRecord | None:
    """The entry of ``jid`` in one namespace (or part), or None."""
    for jobset in (ScheduledSet(config), RetrySet(config), DeadSet(config)):
        record = jobset.find(jid)
        if record is not None:
            return record
    for name in queue_names(config):
        record = Queue(name, config).find(jid)
        if record is not None:
            return record
    return None
