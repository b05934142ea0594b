"""What a dead child owed Redis, turned into decisions (``fate``): pure, so it is tested
without processes. The master records what a reaped child left (``Reaped``) and applies
the decisions to its in-progress list (``apply``), through ``settlement``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .. import fate, settlement
from ..config import Config, logger
from ..errors import JobTimeout
from ..fate import Decision, Drop, File
from ..inprogress import InProgressList, jid_of
from ..payload import default_backoff
from ..registry import registry

TIMEOUT_GRACE = 5.0  # a job past its soft timeout by this much gets its child killed


@dataclass
class Reaped:
    """What a gone child still owed Redis, kept until Redis takes it."""

    decisions: dict[str, Decision]  # jid -> Drop (ran, only the ack is missing) or File
    timed_out: dict[str, Any] | None  # the job the master killed it for (filed once listed)
    # died on its own: an orphaning is counted for the job it ran (a jid), or for every
    # job (True) if that is unknown; False: none
    count_orphanings: bool | str
    stats: list[tuple[str, float]] = field(default_factory=list)  # (class, ms) failures to count


def reap(running: dict[str, Any] | None, acks: set[str], owes: dict[str, Decision], torn: bool,
         stop_reason: str | None, crashed: bool) -> Reaped:
    """A dead child's record -> its decisions. ``running``: the job its slot said it ran;
    ``acks``: jids that ran, their ack due or riding on a fetch; ``owes``: what it told
    the master it still owed; ``torn``: it died mid-write of its slot (what it ran is
    unknown); ``crashed``: it died on its own (not stopped or killed by the master)."""
    decisions: dict[str, Decision] = {jid: how for jid, how in owes.items() if isinstance(how, File)}
    for jid, how in owes.items():
        if isinstance(how, (fate.Ack, Drop)):
            decisions[jid] = fate.DROP
    for jid in acks:
        decisions[jid] = fate.DROP
    timed_out = running if stop_reason == "timeout" else None
    # Only the job it ran can have killed it: a job fetched ahead never started. If
    # which job that was is unknown, every job counts (none escapes the limit).
    count: bool | str = False
    if crashed and (torn or (running and not running["jid"])):
        count = True
    elif crashed and running:
        count = running["jid"]
    return Reaped(decisions, timed_out, count)


def timed_out_decision(config: Config, raw: bytes, running: dict[str, Any]) -> File | None:
    """The job ran past its timeout and its grace: filed as failed, not orphaned."""
    payload, _ = fate.parse_payload(raw)
    if payload is None:
        return None
    error = JobTimeout(f"killed {TIMEOUT_GRACE:g}s after its timeout "
                       f"({payload.get('timeout')}s); it ignored JobTimeout")
    job = registry.get(payload["class"])
    backoff = job.backoff_for if job is not None else default_backoff
    decision = fate.decide(config, payload, fate.TimedOut(error, backoff))
    assert isinstance(decision, File)
    return decision


def apply(config: Config, identity: str, owed: Reaped, listed: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """Files (or parks) what the child owed, for it. Returns (entries to drop: the acks,
    entries to keep listed: neither filing nor parking worked). Raises ``Fenced`` if the
    identity was declared dead elsewhere first."""
    by_jid = {jid_of(raw): raw for raw in listed}
    if owed.timed_out is not None:
        raw = by_jid.get(owed.timed_out["jid"])
        filing = timed_out_decision(config, raw, owed.timed_out) if raw is not None else None
        if filing is not None:
            # The child was killed before it could count this failure: counted here.
            run_at = owed.timed_out.get("run_at", time.time())
            owed.stats.append((owed.timed_out.get("class") or "?", (time.time() - run_at) * 1000))
            owed.decisions[owed.timed_out["jid"]] = filing
        owed.timed_out = None
    lst = InProgressList(config, identity, beats=False)
    keep: list[bytes] = []
    for jid, decision in list(owed.decisions.items()):
        raw = by_jid.get(jid)
        if isinstance(decision, File):
            if raw is not None and not _file(lst, raw, decision, jid):
                keep.append(raw)
            del owed.decisions[jid]
    drop = [by_jid[jid] for jid, how in owed.decisions.items() if isinstance(how, Drop) and jid in by_jid]
    return drop, keep


def _file(lst: InProgressList, raw: bytes, decision: File, jid: str) -> bool:
    """Filed, or parked in unsettled if it can't be (never re-run); False: neither."""
    import redis

    try:
        settlement.apply(lst, raw, decision)
        return True
    except redis.ResponseError as exc:
        logger.error("master: couldn't file jid=%s (%s); parking it in unsettled", jid, exc)
    try:
        return settlement.apply(lst, raw, fate.Park(decision.record()))
    except redis.ResponseError:
        return False
