"""Keys named by data only Redis holds (docs/architecture.md#keys-named-by-data): a job's
queue and unique lock, read from its payload by a script that requeues it; a callback's
queue, result and lock, read from its group's or batch's record; a dead job's result,
group and batch; the keys an index names when retention sheds them. A script never builds
such a name: each comes in its declared tail of KEYS, and its name, ``<kind>:<data>``
(``keys.DECLARED``), in a run of its ARGV (``_declared.lua``). What the caller knows it
declares up front: what the payload names (``of_entry``), or its guess, the keys of its
last call. What only Redis holds, the script asks for by a ``{0, "need", name...}`` reply,
having written nothing, and ``run_declared`` declares it and calls again."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ..boundedjson import loads
from ..keys import Keys
from .call import Arg, Call, Key, run, text

# Calls of one transition that may each answer "need": a script names what it needs
# before any write, so a second call almost always has it all; more only while the data
# keeps changing under it (another settlement, another poller).
ROUNDS = 8


class Declared(NamedTuple):
    """One declared key, for a script's KEYS tail, and its name, for its ARGV run."""

    key: Key
    name: Arg


class Ran(NamedTuple):
    reply: Any  # the script's reply (never a "need")
    declared: list[Declared]  # the keys its last call was given (a caller's next guess)


class Undeclared(RuntimeError):
    """A script still asked for keys after ``ROUNDS`` calls, or asked again for keys it was given."""


def declare(keys: Keys, names: Iterable[str]) -> list[Declared]:
    """The keys ``names`` name (``Keys.declared``), each with its name, duplicates dropped."""
    return [Declared(keys.declared(name), name) for name in dict.fromkeys(names)]


def of_entry(keys: Keys, entry: str | bytes) -> list[Declared]:
    """What settling the job ``entry`` holds as dead or cancelled writes, named by its
    payload (as ``wf_dead_needs`` and ``batch_of`` read it): its result, its chain's
    last result, its group, its batch. Nothing for a job of no workflow or batch."""
    raw = entry.encode() if isinstance(entry, str) else entry
    if b'"wf":' not in raw:
        return []
    try:
        job = loads(raw)
    except ValueError:  # (the script reads what it can, and asks for what it then needs)
        return []
    wf = job.get("wf") if isinstance(job, dict) else None
    if not isinstance(wf, dict):
        return []
    jid, names = job.get("jid"), []
    if isinstance(jid, str) and wf.get("ttl", False) is not False:  # (Lua: any value but nil, false)
        names += [f"result:{jid}", f"result_wait:{jid}"]
    last = wf.get("last")
    if isinstance(last, str) and last != jid:
        names += [f"result:{last}", f"result_wait:{last}"]
    if isinstance(wf.get("g"), str):
        names += [f"group:{wf['g']}", f"group_wait:{wf['g']}"]
    if isinstance(wf.get("b"), str) and isinstance(jid, str):
        names += [f"batch:{wf['b']}", f"batch_jobs:{wf['b']}"]
    return declare(keys, names)


def needs(reply: Any) -> list[str] | None:
    """The names a ``{0, "need", name...}`` reply asks for; None for any other reply."""
    if isinstance(reply, list) and len(reply) > 1 and reply[0] == 0 and reply[1] in (b"need", "need"):
        return [text(name) for name in reply[2:]]
    return None


def run_declared(client: Any, keys: Keys, call: Call, given: Sequence[Declared], at: int | None = None) -> Ran:
    """Runs ``call`` with the keys ``given`` at the end of its KEYS and their names in its
    ARGV at ``at`` (None: at the end); while its script answers ``{0, "need", name...}``
    (having written nothing), runs it again with those keys added."""
    have = list({d.name: d for d in given}.values())
    where = len(call.args) if at is None else at
    for _ in range(ROUNDS):
        args = [*call.args[:where], *(d.name for d in have), *call.args[where:]]
        reply = run(client, Call(call.script, [*call.keys, *(d.key for d in have)], args))
        wanted = needs(reply)
        if wanted is None:
            return Ran(reply, have)
        known = {text(d.name) for d in have}
        missing = [name for name in wanted if name not in known]
        if not missing:
            raise Undeclared(f"{call.script}.lua asked again for keys it was given: {wanted}")
        have += declare(keys, missing)
    raise Undeclared(f"{call.script}.lua still asked for keys after {ROUNDS} calls")
