"""Periodic jobs (docs/architecture.md#periodic): a slot claimed by exactly one caller
fleet-wide, a claim rolled back, a fired slot recorded for the UI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .call import Arg, Call, Key, entry, run


class Claim(NamedTuple):
    status: int  # 0 not ours, 1 claimed, 2 primed, 3-5 skipped, 6 pushed already (cron/claims.py names them)
    detail: Any  # the previous last_slot, the running lock's jid or the pushed jid ("" if none)
    unreadable: int  # 1: the disabled set can't be read (counted as enabled)


@entry("periodic_claim", keys=5)
def periodic_claim(
    client: Any,
    *,
    last_slot: Key,
    lock: Key,
    running: Key,
    disabled: Key,
    pushed: Key,
    slot: Arg,
    mode: Arg,
    lock_ttl: Arg,
    jid: Arg,
    unique: Arg,
    running_ttl: Arg,
    pjid: Arg,
    reclaim: Sequence[Arg],
) -> Claim:
    """``reclaim`` (mode "reclaim" only): "1" if an earlier claim is known, then the jids it was tried under."""
    status, detail, unreadable = run(
        client,
        Call(
            "periodic_claim",
            [last_slot, lock, running, disabled, pushed],
            [slot, mode, lock_ttl, jid, unique, running_ttl, pjid, *reclaim],
        ),
    )
    return Claim(int(status), detail, int(unreadable))


@entry("periodic_rollback", keys=4)
def periodic_rollback(
    client: Any, *, last_slot: Key, lock: Key, running: Key, pushed: Key, slot: Arg, jid: Arg
) -> bool:
    """False if that claim's push had landed after all (nothing undone)."""
    return bool(run(client, Call("periodic_rollback", [last_slot, lock, running, pushed], [slot, jid])))


@entry("periodic_record", keys=1)
def periodic_record(client: Any, *, schedule: Key, pjid: Arg, record: Arg, slot: Arg) -> None:
    run(client, Call("periodic_record", [schedule], [pjid, record, slot]))
