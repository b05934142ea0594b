"""The transitions package (docs/architecture.md#transitions): each entry script's header
names its KEYS and ARGV, in order, and its one typed function takes and sends exactly
those, in that order; nothing outside the package sends a script or calls the runner;
and which scripts still build a key name inside Lua.

No Redis here: the functions run with the runner replaced by one that records the call.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import cogworker.transitions
from cogworker.store import lua
from cogworker.transitions.call import Call

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "cogworker" / "transitions"
ENTRIES = sorted(p.stem for p in SCRIPTS.glob("*.lua") if not p.stem.startswith("_"))

# A header line: "-- KEYS[n] = name: what it is", "-- ARGV[n..] = name: ..." (a variadic
# tail), "-- KEYS[4..] = group(a, b): ..." (per item, these fields of a NamedTuple), or
# "-- ARGV[n] = name (derived): ..." (a count the function computes).
HEADER = re.compile(r"^-- (KEYS|ARGV)\[([^\]]+)\] = (\w+)(?:\(([\w, ]+)\))?( \(derived\))?:")


class Declared(NamedTuple):
    kind: str  # KEYS or ARGV
    index: str
    name: str
    fields: tuple[str, ...]
    derived: bool

    @property
    def variadic(self) -> bool:
        return ".." in self.index


def header(name: str) -> list[Declared]:
    """The declarations of the script's leading comment block (after its includes)."""
    found = []
    for line in (SCRIPTS / f"{name}.lua").read_text().splitlines():
        if not line.startswith("--"):
            break
        m = HEADER.match(line)
        if m:
            fields = tuple(f.strip() for f in m.group(4).split(",")) if m.group(4) else ()
            found.append(Declared(m.group(1), m.group(2), m.group(3), fields, bool(m.group(5))))
    return found


def functions() -> dict[str, Callable[..., Any]]:
    found: dict[str, Callable[..., Any]] = {}
    for info in pkgutil.iter_modules(cogworker.transitions.__path__):
        module = importlib.import_module(f"cogworker.transitions.{info.name}")
        for value in vars(module).values():
            script = getattr(value, "script", None)
            if callable(value) and isinstance(script, str) and value.__module__ == module.__name__:
                assert script not in found, f"two functions for {script}.lua"
                found[script] = value
    return found


FUNCTIONS = functions()


def parameters(fn: Callable[..., Any]) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]


def test_every_entry_script_has_one_function_and_every_function_a_script() -> None:
    assert len(ENTRIES) >= 43
    assert sorted(FUNCTIONS) == ENTRIES


@pytest.mark.parametrize("name", ENTRIES)
def test_the_header_declares_positions_in_order(name: str) -> None:
    declared = header(name)
    assert declared, f"{name}.lua declares no KEYS or ARGV line"
    for kind in ("KEYS", "ARGV"):
        fixed = []
        for d in (d for d in declared if d.kind == kind):
            if d.variadic or not d.index.isdigit():
                break
            fixed.append(int(d.index))
        assert fixed == list(range(1, len(fixed) + 1)), f"{name}.lua: {kind} {fixed}"
        body = "\n".join(
            line for line in (SCRIPTS / f"{name}.lua").read_text().splitlines() if not line.startswith("--")
        )
        used = [int(n) for n in re.findall(rf"\b{kind}\[(\d+)\]", body)]
        if all(not d.variadic for d in declared if d.kind == kind):
            count = len([d for d in declared if d.kind == kind])
            assert max(used, default=0) <= count, f"{name}.lua uses {kind}[{max(used)}], declares {count}"


@pytest.mark.parametrize("name", ENTRIES)
def test_the_function_names_the_header_in_order(name: str) -> None:
    fn = FUNCTIONS[name]
    declared = header(name)
    wanted = list(dict.fromkeys(d.name for d in declared if not d.derived))
    assert parameters(fn) == wanted
    assert sorted(getattr(fn, "derived", ())) == sorted({d.name for d in declared if d.derived})
    keys = list(dict.fromkeys(d.name for d in declared if d.kind == "KEYS"))
    assert fn.n_keys == len(keys)  # type: ignore[attr-defined]


class Captured(Exception):
    def __init__(self, script: str, keys: list[Any], args: list[Any]) -> None:
        super().__init__(script)
        self.call = Call(script, list(keys), list(args))


def _sentinel(name: str, hint: Any) -> Any:
    """A value per parameter that says where it came from; a sequence has two items."""
    if typing.get_origin(hint) is not Sequence and hint is not Sequence:
        return f"<{name}>"
    (item,) = typing.get_args(hint)
    if isinstance(item, type) and issubclass(item, tuple) and hasattr(item, "_fields"):
        return [item(*(f"<{name}{i}.{f}>" for f in item._fields)) for i in (1, 2)]
    if typing.get_origin(item) in (tuple, Sequence) or item is tuple:
        return [(f"<{name}{i}.a>", f"<{name}{i}.b>") for i in (1, 2)]
    return [f"<{name}1>", f"<{name}2>"]


def _expected(declared: list[Declared], kind: str, given: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for d in (d for d in declared if d.kind == kind):
        if d.derived:
            out.append(DERIVED)
        elif not d.variadic:
            out.append(given[d.name])
        elif d.fields:
            out += [getattr(item, f) for item in given[d.name] for f in d.fields]
        else:
            out += [v for item in given[d.name] for v in (item if isinstance(item, (tuple, list)) else (item,))]
    return out


DERIVED = object()


def _same(sent: list[Any], expected: list[Any]) -> bool:
    return len(sent) == len(expected) and all(
        isinstance(s, int) if e is DERIVED else s == e for s, e in zip(sent, expected, strict=True)
    )


def _capture(monkeypatch: pytest.MonkeyPatch, fn: Callable[..., Any], given: dict[str, Any]) -> Call:
    def record(client: Any, script: str, keys: list[Any], args: list[Any], pipe: Any = None) -> Any:
        raise Captured(script, keys, args)

    monkeypatch.setattr(lua, "run", record)
    positional = [p for p in inspect.signature(fn).parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    try:
        reply = fn(*[None for _ in positional], **given)
    except Captured as sent:
        return sent.call
    assert isinstance(reply, Call), f"{fn.__name__} neither ran its script nor returned its call"
    return reply


@pytest.mark.parametrize("name", ENTRIES)
def test_the_function_sends_what_the_header_declares(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn = FUNCTIONS[name]
    hints = typing.get_type_hints(fn)
    given = {p: _sentinel(p, hints[p]) for p in parameters(fn)}
    sent = _capture(monkeypatch, fn, given)
    declared = header(name)
    assert sent.script == name
    assert _same(sent.keys, _expected(declared, "KEYS", given)), sent.keys
    assert _same(sent.args, _expected(declared, "ARGV", given)), sent.args


def test_a_swapped_argument_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above fails for a function that sends two arguments in the wrong order."""
    from cogworker.transitions import call, push

    @call.entry("release_lock", keys=1)
    def wrong(client: Any, *, lock: str, owner: str) -> Any:
        return call.run(client, Call("release_lock", [owner], [lock]))

    declared = header("release_lock")
    given = {"lock": "<lock>", "owner": "<owner>"}
    sent = _capture(monkeypatch, wrong, given)
    assert not _same(sent.keys, _expected(declared, "KEYS", given))
    right = _capture(monkeypatch, push.release_lock, given)
    assert _same(right.keys, _expected(declared, "KEYS", given))


# -- nothing else sends a script ------------------------------------------------------------

SENDS = re.compile(
    r"""["'](?:EVALSHA|EVAL|EVALSHA_RO|EVAL_RO|FCALL)["']|\.evalsha\(|\.eval\(|register_script|script_load"""
    r"""|\blua\.(?:run|command|script|source)\b|from \.+store(?:\.lua)? import [^\n]*\blua\b|store\.lua\b"""
)


def test_no_module_outside_transitions_sends_a_script_or_calls_the_runner() -> None:
    package = ROOT / "cogworker"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "transitions" or rel == Path("store/lua.py"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if SENDS.search(code) and not code.lstrip().startswith(('"', "'")):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert offenders == []


def test_the_grep_finds_a_sender() -> None:
    assert SENDS.search('client.execute_command("EVALSHA", sha, 1, key)')
    assert SENDS.search("    lua.run(client, 'ack', keys, args)")
    assert SENDS.search("from ..store import guard, lua")
    assert not SENDS.search("from ..transitions import fetch")


# -- every key declared ---------------------------------------------------------------------
#
# The rule: a script (its includes expanded, comments dropped) builds a key name when it
# concatenates (`..`) or rewrites (`string.gsub`) a key prefix: the namespace (`ns`), an
# identifier containing "prefix", or an ARGV its header names `namespace` or `*_prefix`;
# or when it calls Redis with a literal key name or with an ARGV as the key. Every key a
# script touches should come in KEYS, named in Python by cogworker/keys.py.
#
# No script builds a key: one that starts to fails here. A key named by data only Redis
# holds comes declared too (docs/internals/scripts.md#keys-named-by-data), which
# tests/test_declared_keys.py checks on a real server.


def expanded(name: str) -> str:
    text = (SCRIPTS / f"{name}.lua").read_text()
    parts = [expanded(line.split()[-1]) for line in text.splitlines() if line.startswith("--! include ")]
    return "\n".join([*parts, text])


def builds_keys(name: str, code: str | None = None) -> list[str]:
    """How the script builds key names (empty: it doesn't), by the rule above."""
    prefixes = [
        d.index for d in header(name) if d.kind == "ARGV" and (d.name == "namespace" or d.name.endswith("_prefix"))
    ]
    code = "\n".join(line.split("--", 1)[0] for line in (code or expanded(name)).splitlines())
    op = "(?:" + "|".join([r"\bns\b", r"\b\w*prefix\w*\b", *(rf"ARGV\[{n}\]" for n in prefixes)]) + ")"
    found = []
    if re.search(rf"{op}\s*\.\.|\.\.\s*{op}", code):
        found.append("concatenates a prefix")
    if re.search(rf"gsub\(\s*\(?{op}", code):
        found.append("rewrites a prefix")
    if re.search(r"redis\.p?call\(\s*\"\w+\"\s*,\s*(?:\"|ARGV\[)", code):
        found.append("calls Redis on a key that is no KEYS")
    return found


def test_no_script_builds_a_key() -> None:
    building = {name: why for name in ENTRIES if (why := builds_keys(name))}
    assert building == {}


def test_the_key_lint_catches_a_built_key() -> None:
    assert builds_keys("ack", 'redis.call("LPUSH", ns .. "queue:" .. q, job)')
    assert builds_keys("ack", "local b = queue_prefix .. name")
    assert builds_keys("ack", 'redis.pcall("INCR", "stats:x")')
    assert builds_keys("ack", 'redis.call("SMEMBERS", ARGV[7])')
    # An ARGV the header names a prefix (fetch.lua's ARGV[6] = queue_prefix), concatenated.
    assert builds_keys("fetch", 'local key = ARGV[6] .. "result:{" .. jid .. "}"')
    assert not builds_keys("ack", 'redis.call("LREM", KEYS[1], 1, ARGV[1])')
