"""What a dead child owed Redis, turned into decisions (``fate``): pure, so it is tested
without processes. The master records what a reaped child left (``Reaped``) and applies
the decisions to its in-progress list (``apply``), through ``settlement``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..config import Config, logger
from ..core import fate, settlement
from ..core.fate import Decision, File
from ..core.inprogress import InProgressList, jid_of
from ..core.payload import default_backoff
from ..core.registry import registry
from ..errors import JobTimeout

TIMEOUT_GRACE = 5.0  # a job past its soft timeout by this much gets its child killed


@dataclass
class Reaped:
    """What a gone child still owed Redis, kept until Redis takes it."""

    decisions: dict[str, Decision]  # jid -> Drop (ran, only the ack is missing) or File
    timed_out: list[dict[str, Any]]  # the jobs the master killed it for (each filed once listed)
    # died on its own: an orphaning is counted for the jobs it ran (their jids, one a
    # line), or for every job (True) if that is unknown; False: none
    count_orphanings: bool | str
    stats: list[tuple[str, float]] = field(default_factory=list)  # (class, ms) failures to count
    # The jobs it was running when the master killed it (a shutdown's deadline, a second
    # TERM, a stop it ignored): requeued uncounted, each with a history entry.
    killed: list[str] = field(default_factory=list)


def reap(
    running: dict[str, Any] | list[dict[str, Any]] | None,
    acks: set[str],
    owes: dict[str, Decision],
    torn: bool,
    stop_reason: str | None,
    crashed: bool,
    now: float | None = None,
) -> Reaped:
    """A dead child's record -> its decisions. ``running``: the job its slot said it ran
    (or, ``--concurrency`` above 1, every job it had in flight); ``acks``: jids that ran,
    their ack due or riding on a fetch; ``owes``: what it told the master it still owed;
    ``torn``: it died mid-write of its record (what it ran is unknown); ``crashed``: it
    died on its own (not stopped or killed by the master)."""
    decisions = fate.owed_by_dead(owes, acks)
    jobs = running if isinstance(running, list) else [running] if running else []
    timed_out: list[dict[str, Any]] = []
    if stop_reason == "timeout":
        # The job(s) it was killed for: past their deadline and its grace. The others
        # it had in flight are requeued, uncounted (killed by us, not by themselves).
        at = time.time() if now is None else now
        timed_out = [
            job for job in jobs if len(jobs) == 1 or (job.get("deadline") and at > job["deadline"] + TIMEOUT_GRACE)
        ]
    # Only a job it ran can have killed it: a job fetched but not started never did. If
    # which jobs those were is unknown, every job counts (none escapes the limit).
    count: bool | str = False
    if crashed and (torn or any(not job["jid"] for job in jobs)):
        count = True
    elif crashed and jobs:
        count = "\n".join(job["jid"] for job in jobs)
    killed = [job["jid"] for job in jobs if job.get("jid")] if stop_reason == "killed" else []
    return Reaped(decisions, timed_out, count, killed=killed)


def timed_out_decision(config: Config, raw: bytes, running: dict[str, Any]) -> File | None:
    """The job ran past its timeout and its grace: filed as failed, not orphaned."""
    payload, _ = fate.parse_payload(raw)
    if payload is None:
        return None
    error = JobTimeout(
        f"killed {TIMEOUT_GRACE:g}s after its timeout ({payload.get('timeout')}s); it ignored JobTimeout"
    )
    job = registry.get(payload["class"])
    backoff = job.backoff_for if job is not None else default_backoff
    return fate.timed_out(config, payload, error, backoff)


def apply(config: Config, identity: str, owed: Reaped, listed: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """Files (or parks) what the child owed, for it. Returns (entries to drop: the acks,
    entries to keep listed: neither filing nor parking worked). Raises ``Fenced`` if the
    identity was declared dead elsewhere first."""
    by_jid = {jid_of(raw): raw for raw in listed}
    for running in owed.timed_out:
        raw = by_jid.get(running["jid"])
        filing = timed_out_decision(config, raw, running) if raw is not None else None
        if filing is not None:
            # The child was killed before it could count this failure: counted here.
            run_at = running.get("run_at", time.time())
            owed.stats.append((running.get("class") or "?", (time.time() - run_at) * 1000))
            owed.decisions[running["jid"]] = filing
    owed.timed_out = []
    lst = InProgressList(config, identity, beats=False)
    keep: list[bytes] = []
    for jid, decision in list(owed.decisions.items()):
        if fate.dropped(decision):  # the requeue script drops it: that is the ack
            continue
        raw = by_jid.get(jid)
        if raw is not None and not _write(lst, raw, decision, jid):
            keep.append(raw)
        del owed.decisions[jid]
    drop = [by_jid[jid] for jid in owed.decisions if jid in by_jid]
    return drop, keep


def _write(lst: InProgressList, raw: bytes, decision: Decision, jid: str) -> bool:
    """Written through the settle table; a filing Redis refuses is parked in unsettled
    instead (never re-run), a completion stays listed. False: neither worked."""
    from .. import store

    try:
        settlement.apply(lst, raw, decision)
        return True
    except store.ResponseError as exc:
        instead = fate.refused(decision)
        if instead is None:
            logger.error("master: couldn't settle the workflow of jid=%s (%s); left listed", jid, exc)
            return False
        logger.error("master: couldn't file jid=%s (%s); parking it in unsettled", jid, exc)
    try:
        return settlement.apply(lst, raw, instead)
    except store.ResponseError:
        return False
