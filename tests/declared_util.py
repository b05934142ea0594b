"""Watching scripts on a real server for keys they were not given (docs/internals/scripts.md#named-keys):
MONITOR lists each command a script runs right after the EVALSHA that ran it, and
COMMAND GETKEYS names the keys of each. Shared by tests/test_declared_keys.py and
tests/test_declared_keys_settle.py."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import redis

from cogworker.store import lua

ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')
ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b", b'"': b'"', b"\\": b"\\"}
SCRIPTS = Path(lua.__file__).resolve().parent.parent / "transitions"

# One command MONITOR showed: run by a script?, then its command and arguments.
Line = tuple[bool, list[bytes]]


def unescape(text: bytes) -> bytes:
    """An argument as MONITOR quotes it (Redis's sdscatrepr), back to its bytes."""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i : i + 1] == b"\\":
            code = text[i + 1 : i + 2]
            if code == b"x":
                out += bytes([int(text[i + 2 : i + 4], 16)])
                i += 4
                continue
            out += ESCAPES.get(code, code)
            i += 2
            continue
        out += text[i : i + 1]
        i += 1
    return bytes(out)


class Monitor:
    """The server's MONITOR stream, read on a connection of its own until ``stop``."""

    def __init__(self, client: Any) -> None:
        self.conn = client.connection_pool.make_connection()
        self.conn.socket_timeout = None  # idle between commands: no read times out
        self.conn.connect()
        self.conn.send_command("MONITOR")
        assert self.conn.read_response() in (b"OK", "OK")
        self.lines: list[Line] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                line = self.conn.read_response()
            except Exception:
                return
            raw = line if isinstance(line, bytes) else line.encode()
            head, _, rest = raw.partition(b"] ")
            self.lines.append((head.endswith(b"lua"), [unescape(a) for a in ARG.findall(rest)]))

    def stop(self, client: Any) -> list[Line]:
        client.execute_command("ECHO", "monitor-end")
        deadline = time.monotonic() + 5
        while not any(b"monitor-end" in args for _, args in self.lines) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.conn.disconnect()
        return list(self.lines)


def sha(source: str) -> bytes:
    return hashlib.sha1(source.encode()).hexdigest().encode()


@cache
def entry_scripts() -> dict[bytes, str]:
    """Each entry script's SHA -> its name."""
    names = (p.stem for p in SCRIPTS.glob("*.lua") if not p.stem.startswith("_"))
    return {sha(lua.source(name)): name for name in names}


def undeclared(client: Any, lines: Iterable[Line], only: Iterable[str] | None = None) -> list[str]:
    """Each key a script's command touched that its call's KEYS didn't hold: every script
    (``only``: those named)."""
    watch = None if only is None else set(only)
    found: list[str] = []
    current: tuple[str, set[bytes]] | None = None
    for by_lua, args in lines:
        if not by_lua:  # a script's commands follow its call at once (it runs atomically)
            current = None
            verb = args[0].upper() if args else b""
            if verb in (b"EVALSHA", b"EVAL"):
                name = entry_scripts().get(args[1] if verb == b"EVALSHA" else sha(args[1].decode()), repr(args[1][:8]))
                current = (name, set(args[3 : 3 + int(args[2])])) if watch is None or name in watch else None
            continue
        if current is None:
            continue
        try:
            keys = client.command_getkeys(*args)
        except redis.ResponseError:  # a command with no keys (TIME)
            keys = []
        for key in keys:
            key = key if isinstance(key, bytes) else str(key).encode()
            if key not in current[1]:
                found.append(f"{current[0]}: {args[0].decode()} {key.decode()}")
    return found


def calls(lines: list[Line], name: str) -> int:
    """How many times script ``name`` ran (an EVALSHA refused as NOSCRIPT runs nothing)."""
    wanted, ran = sha(lua.source(name)), 0
    for (by_lua, args), (after, _) in zip(lines, [*lines[1:], (False, [])], strict=True):
        ran += not by_lua and args[:1] == [b"EVALSHA"] and args[1] == wanted and after
    return ran


def watched(config: Any, step: Callable[[], Any]) -> list[Line]:
    """What MONITOR showed while ``step`` ran; some script ran."""
    client = config.redis()
    monitor = Monitor(client)
    step()
    lines = monitor.stop(client)
    assert any(by_lua for by_lua, _ in lines), "no script ran"
    return lines
