"""A process's records (docs/architecture.md#beat): the heartbeat of one or more
processes in one step, a process's deregistration, and a running job's progress."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..keys import Keys
from .call import Arg, Call, Key, entry, run, texts
from .declare import Declared, run_declared


class Beating(NamedTuple):
    """One process of a beat: its keys, then what the script writes of it."""

    key: Key  # process:<identity>
    workers: Key
    fence: Key
    identity: Arg
    owns: Arg  # "1" if it owns an in-progress list, else "0"
    record: Arg  # its record, a JSON object of strings
    running: Arg  # what it runs (the same), or ""


class Mark(NamedTuple):
    """The cancel mark of a job a beating process runs."""

    key: Key  # cancelled:<jid>
    jid: Arg
    identity: Arg  # the process running it


class Beat(NamedTuple):
    refused: list[str]  # declared dead (fenced): not refreshed, and must stop
    cancelled: list[str]  # jids the records say run now, cancelled by an operator: tell them


@entry("beat", keys=5, derived=("n",))
def beat(
    client: Any,
    *,
    processes: Key,
    last_beat: Key,
    identities: Key,
    beating: Sequence[Beating],
    marks: Sequence[Mark],
    ttl: Arg,
) -> Beat:
    keys: list[Any] = [processes, last_beat, identities]
    args: list[Any] = [ttl, len(beating)]
    for one in beating:
        keys += one[:3]
        args += one[3:]
    for mark in marks:
        keys.append(mark.key)
        args += mark[1:]
    refused, cancelled = run(client, Call("beat", keys, args))
    return Beat(texts(refused), texts(cancelled))


@entry("forget", keys=7)
def forget(
    client: Any,
    *,
    in_progress: Key,
    identities: Key,
    last_beat: Key,
    processes: Key,
    process: Key,
    workers: Key,
    ahead: Key,
    identity: Arg,
) -> bool:
    """Deregisters a process; True if its in-progress list was empty and it is forgotten."""
    reply = run(
        client, Call("forget", [in_progress, identities, last_beat, processes, process, workers, ahead], [identity])
    )
    return bool(reply == 1)


@entry("progress", keys=3)
def progress(
    client: Any,
    keys: Keys,
    *,
    record_key: Key,
    index: Key,
    declared: Sequence[Declared],
    record: Arg,
    ttl: Arg,
    now: Arg,
    keep: Arg,
) -> None:
    """A running job's progress record, and its key in the progress index (trimmed: what
    the trim sheds the script asks to be declared, ``declare.run_declared``)."""
    run_declared(client, keys, Call("progress", [record_key, index], [record, ttl, now, keep]), declared)
