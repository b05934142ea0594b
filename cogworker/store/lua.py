"""The script runner: runs a Lua script by name through redis-py's ``Script``.

Only ``cogworker.transitions`` calls it (an import contract says so): that package holds
the scripts, one file each, and one typed function per script that names its keys and
arguments. The runner reads the files as data, by name, and imports nothing above store.

``Script`` runs EVALSHA and, on NOSCRIPT (after SCRIPT FLUSH or a Redis restart), loads
the script and runs it again; in a pipeline it loads missing scripts before EXEC.
A script may start with ``--! include NAME`` lines to share a Lua function.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import redis
from redis.commands.core import Script

from ..errors import Fenced
from . import pipes, replication

# The scripts live beside their typed callers (cogworker/transitions/*.lua), read as files.
_DIR = Path(__file__).resolve().parent.parent / "transitions"
_lock = threading.Lock()
# client -> {name: Script}; weak so a dropped client takes its scripts with it.
_registered: weakref.WeakKeyDictionary[Any, dict[str, Script]] = weakref.WeakKeyDictionary()


@cache
def source(name: str) -> str:
    text = (_DIR / f"{name}.lua").read_text()
    parts = []
    for line in text.splitlines():
        if line.startswith("--! include "):
            parts.append(source(line.split()[-1]))
    parts.append(text)
    return "\n".join(parts)


def script(client: redis.Redis, name: str) -> Script:
    scripts = _registered.get(client)
    if scripts is None:
        with _lock:
            scripts = _registered.setdefault(client, {})
    found = scripts.get(name)
    if found is None:
        found = scripts[name] = client.register_script(source(name))
    return found


def run(client: redis.Redis, name: str, keys: list[Any], args: list[Any], pipe: Any = None) -> Any:
    """Run script ``name``; with ``pipe``, queue it on that pipeline instead. A script
    refusing a process that was declared dead raises ``Fenced``."""
    found = script(client, name)
    try:
        if pipe is not None:
            return found(keys=keys, args=args, client=pipe)
        if replication.need_of(client) is not None:
            return _run_replicated(client, found, keys, args)
        # Straight to EVALSHA, not through ``Script.__call__`` (three calls and an import
        # statement fewer per job); loaded as that does, when Redis lost its scripts.
        try:
            return client.execute_command("EVALSHA", found.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            found.sha = client.script_load(found.script)
            return client.execute_command("EVALSHA", found.sha, len(keys), *keys, *args)
    except redis.ResponseError as exc:
        raise_if_fenced(exc)
        raise


def _run_replicated(client: redis.Redis, found: Script, keys: list[Any], args: list[Any]) -> Any:
    """The script and its ``WAIT`` on one connection (``pipes.send`` adds and checks it)."""
    reply = pipes.send(client, ("EVALSHA", found.sha, len(keys), *keys, *args))[0]
    if isinstance(reply, redis.exceptions.NoScriptError):
        found.sha = client.script_load(found.script)
        reply = pipes.send(client, ("EVALSHA", found.sha, len(keys), *keys, *args))[0]
    return pipes.ok(reply)


def command(client: redis.Redis, name: str, keys: Sequence[Any], args: Sequence[Any]) -> tuple[Any, ...]:
    """Script ``name`` as one ``EVALSHA`` command, for ``rawpipe.send``: its reply is a
    ``NoScriptError`` when Redis doesn't have it (then ``run`` loads it and runs it)."""
    return ("EVALSHA", script(client, name).sha, len(keys), *keys, *args)


def raise_if_fenced(exc: redis.ResponseError) -> None:
    """A script's ``FENCED <identity>`` error reply, as ``Fenced``."""
    text = str(exc)
    if text.startswith("FENCED "):
        raise Fenced(text[len("FENCED ") :]) from None


def reset() -> None:
    with _lock:
        _registered.clear()
