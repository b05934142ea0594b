"""What can be checked of cogworker on Dragonfly without a Dragonfly binary (none can be
installed here): every Lua script against Dragonfly's rules for scripts.

Sources (Dragonfly's own, at dragonflydb/dragonfly commit f8eca6d0b05c, 2026-08-22, and
dragonflydb/documentation's docs/managing-dragonfly/scripting.md, "Scripting with Lua",
https://www.dragonflydb.io/docs/managing-dragonfly/scripting):

- Commands a script may not call: the ones its command registry flags ``CO::NOSCRIPT``
  (src/server/main_service.cc, server_family.cc, list_family.cc, zset_family.cc,
  generic_family.cc, acl/acl_family.cc), and every ``CO::ADMIN`` command, which the
  registry makes NOSCRIPT too (src/server/command_registry.cc: ``if (mask & CO::ADMIN)
  opt_mask_ |= CO::NOSCRIPT``). A script calling one gets "This Redis command is not
  allowed from scripts".
- Commands Dragonfly has at all: the names its registry declares (``CI{"NAME", ...}`` in
  src/server/*.cc; subcommands and module commands such as ``JSON.*`` left out). A command
  missing there is "Unknown Redis command called from Lua script".
- Keys: "Dragonfly forbids accessing undeclared keys from scripts and returns the following
  error: script tried accessing undeclared key" unless a ``flags=allow-undeclared-keys``
  line atop the script, the server (``--default_lua_flags``) or ``SCRIPT FLAGS`` allows it
  (scripting.md). cogworker's keys rule (a script builds no key name and calls Redis only
  on keys given in KEYS) is the one tests/test_transitions.py lints where it exists; this
  file reuses it there, else applies the same rule itself.
- Lua 5.4 (scripting.md), with ``unpack`` kept global as in Redis's 5.1 (Dragonfly's own
  tests call ``unpack(KEYS)`` in scripts: src/server/multi_test.cc).

What this cannot check (the README's Servers section lists it): Lua 5.4's number semantics
(a whole float made text in the script, by ``..`` or ``tostring``, is "3.0" there, "3" in
Redis; command arguments are formatted with %.17g as in Redis: src/core/interpreter.cc),
reply conversions, timing, and everything outside scripts."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Where the scripts live: the transitions package once it exists, else the store's lua folder.
SCRIPTS = next(p for p in (ROOT / "cogworker" / "transitions", ROOT / "cogworker" / "store" / "lua") if p.is_dir())
NAMES = sorted(p.stem for p in SCRIPTS.glob("*.lua"))
ENTRIES = [name for name in NAMES if not name.startswith("_")]  # the includes are checked inside them

NOSCRIPT = set(
    """
    ACL ADDREPLICAOF AUTH BGSAVE BLPOP BRPOP BRPOPLPUSH BZPOPMAX BZPOPMIN CLIENT COMMAND CONFIG
    DEBUG DFLY DFLYCLUSTER DFLYMIGRATE DISCARD EVAL EVALSHA EVALSHA_RO EVAL_RO EXEC FUNCTION
    LATENCY MODULE MONITOR MULTI PSUBSCRIBE PUNSUBSCRIBE REPLCONF REPLICAOF REPLTAKEOVER RESET
    ROLE SAVE SCRIPT SELECT SHUTDOWN SLAVEOF SLOWLOG SSUBSCRIBE SUBSCRIBE SUNSUBSCRIBE
    UNSUBSCRIBE WAIT
    """.split()
)
DRAGONFLY_COMMANDS = set(
    """
    ACL ADDREPLICAOF APPEND AUTH BGSAVE BITCOUNT BITFIELD BITFIELD_RO BITOP BITPOS BLMOVE
    BLMPOP BLPOP BRPOP BRPOPLPUSH BZMPOP BZPOPMAX BZPOPMIN CLIENT CLUSTER COMMAND CONFIG
    COPY DBSIZE DEBUG DECR DECRBY DEL DELEX DFLY DFLYCLUSTER DFLYMIGRATE DIGEST DISCARD DUMP
    ECHO EVAL EVALSHA EVALSHA_RO EVAL_RO EXEC EXISTS EXPIRE EXPIREAT EXPIRETIME FIELDEXPIRE
    FIELDTTL FLUSHALL FLUSHDB FUNCTION GAT GEOADD GEODIST GEOHASH GEOPOS GEORADIUS
    GEORADIUSBYMEMBER GEORADIUSBYMEMBER_RO GEORADIUS_RO GEOSEARCH GET GETBIT GETDEL GETEX
    GETRANGE GETSET HDEL HELLO HEXISTS HEXPIRE HGET HGETALL HGETEX HINCRBY HINCRBYFLOAT
    HKEYS HLEN HMGET HMSET HPEXPIRETIME HRANDFIELD HSCAN HSET HSETEX HSETNX HSTRLEN HTTL
    HVALS INCR INCRBY INCRBYFLOAT INFO KEYS LASTSAVE LATENCY LINDEX LINSERT LLEN LMOVE LMPOP
    LPOP LPOS LPUSH LPUSHX LRANGE LREM LSET LTRIM MEMORY MGET MODULE MONITOR MOVE MSET
    MSETNX MULTI PERSIST PEXPIRE PEXPIREAT PEXPIRETIME PFADD PFCOUNT PFMERGE PING PREPEND
    PSETEX PSUBSCRIBE PTTL PUBLISH PUBSUB PUNSUBSCRIBE QUIT RANDOMKEY READONLY READWRITE
    RENAME RENAMENX REPLCONF REPLICAOF REPLTAKEOVER RESET RESTORE RM ROLE RPOP RPOPLPUSH
    RPUSH RPUSHX SADD SADDEX SAVE SCAN SCARD SCRIPT SDIFF SDIFFSTORE SELECT SET SETBIT SETEX
    SETNX SETRANGE SHRINK SHUTDOWN SINTER SINTERCARD SINTERSTORE SISMEMBER SLAVEOF SLOWLOG
    SMEMBERS SMISMEMBER SMOVE SORT SORT_RO SPOP SPUBLISH SRANDMEMBER SREM SSCAN SSUBSCRIBE
    STICK STRLEN SUBSCRIBE SUBSTR SUNION SUNIONSTORE SUNSUBSCRIBE TIME TOUCH TTL TYPE UNLINK
    UNSUBSCRIBE UNWATCH WAIT WATCH XACK XADD XAUTOCLAIM XCLAIM XDEL XGROUP XINFO XLEN
    XPENDING XRANGE XREAD XREADGROUP XREVRANGE XSETID XTRIM ZADD ZCARD ZCOUNT ZDIFF
    ZDIFFSTORE ZINCRBY ZINTER ZINTERCARD ZINTERSTORE ZLEXCOUNT ZMPOP ZMSCORE ZPOPMAX ZPOPMIN
    ZRANDMEMBER ZRANGE ZRANGEBYLEX ZRANGEBYSCORE ZRANGESTORE ZRANK ZREM ZREMRANGEBYLEX
    ZREMRANGEBYRANK ZREMRANGEBYSCORE ZREVRANGE ZREVRANGEBYLEX ZREVRANGEBYSCORE ZREVRANK
    ZSCAN ZSCORE ZUNION ZUNIONSTORE
    """.split()
)

CALL = re.compile(r"\bredis\.p?call\(\s*")
LITERAL_FIRST = re.compile(r"""\s*["']([A-Za-z_.]+)["']""")
LOCAL_FUNCTION = re.compile(r"local function (\w+)\(")


def code_of(name: str) -> str:
    """The script without its comments."""
    text = (SCRIPTS / f"{name}.lua").read_text()
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def commands(code: str) -> tuple[set[str], list[str]]:
    """The commands a script calls, and what it calls that can't be told: a call whose
    command is not a literal is followed into the local function holding it, whose every
    call must then name its command literally (as beat.lua's ``write`` and
    status_flush.lua's ``chunked``)."""
    found: set[str] = set()
    unknown: list[str] = []
    for match in CALL.finditer(code):
        literal = LITERAL_FIRST.match(code, match.end())
        if literal:
            found.add(literal.group(1).upper())
            continue
        holders = [f for f in LOCAL_FUNCTION.finditer(code) if f.start() < match.start()]
        if not holders:
            unknown.append(code[match.start() : match.end() + 30].strip())
            continue
        wrapper = holders[-1].group(1)
        for use in re.finditer(rf"\b{wrapper}\(", code):
            if any(f.start() == use.start() - len("local function ") for f in holders):
                continue  # its definition
            literal = LITERAL_FIRST.match(code, use.end())
            if literal:
                found.add(literal.group(1).upper())
            else:
                unknown.append(code[use.start() : use.end() + 30].strip())
    return found, unknown


@pytest.mark.parametrize("name", NAMES)
def test_no_script_calls_a_command_dragonfly_refuses_in_scripts(name):
    found, unknown = commands(code_of(name))
    assert not unknown, f"{name}.lua calls Redis with a command this check can't read: {unknown}"
    assert not found & NOSCRIPT, f"{name}.lua calls what Dragonfly refuses in scripts: {sorted(found & NOSCRIPT)}"
    assert found <= DRAGONFLY_COMMANDS, f"{name}.lua calls what Dragonfly lacks: {sorted(found - DRAGONFLY_COMMANDS)}"


def test_the_command_reader_finds_every_form():
    found, unknown = commands(
        """
        redis.call("LMOVE", KEYS[1], KEYS[2], "RIGHT", "LEFT")
        redis.pcall('zadd', KEYS[3], 1, "x")
        local function write(...)
          local reply = redis.pcall(...)
        end
        write("HSET", KEYS[4], "a", 1)
        """
    )
    assert found == {"LMOVE", "ZADD", "HSET"} and unknown == []
    found, unknown = commands("local c = ARGV[1]\nredis.call(c, KEYS[1])")
    assert unknown  # no function to follow: can't be told
    found, _ = commands('redis.call("BLPOP", KEYS[1], 0)\nredis.call("WAIT", 1, 0)')
    assert found & NOSCRIPT == {"BLPOP", "WAIT"}
    found, _ = commands('redis.call("WAITAOF", 1, 0, 0)')
    assert found - DRAGONFLY_COMMANDS == {"WAITAOF"}  # Dragonfly has no WAITAOF


# -- every key declared ---------------------------------------------------------------------


def _expanded(name: str) -> str:
    text = (SCRIPTS / f"{name}.lua").read_text()
    parts = [_expanded(line.split()[-1]) for line in text.splitlines() if line.startswith("--! include ")]
    return "\n".join([*parts, text])


def _own_builds_keys(name: str, code: str | None = None) -> list[str]:
    """The keys rule, where tests/test_transitions.py is not there to give it: a script
    (its includes expanded, comments dropped) builds a key name when it concatenates or
    rewrites (``string.gsub``) a prefix (``ns``, or a name containing "prefix"), or calls
    Redis with a literal key name or with an ARGV as the key."""
    code = "\n".join(line.split("--", 1)[0] for line in (code or _expanded(name)).splitlines())
    op = r"(?:\bns\b|\b\w*prefix\w*\b)"
    found = []
    if re.search(rf"{op}\s*\.\.|\.\.\s*{op}", code):
        found.append("concatenates a prefix")
    if re.search(rf"gsub\(\s*\(?{op}", code):
        found.append("rewrites a prefix")
    if re.search(r"redis\.p?call\(\s*[\"']\w+[\"']\s*,\s*(?:[\"']|ARGV\[)", code):
        found.append("calls Redis on a key that is no KEYS")
    return found


def _the_rule():
    """tests/test_transitions.py's key lint where it exists (the form the scripts are held
    to), else this file's own."""
    try:
        lint = importlib.import_module("test_transitions")
    except ImportError:
        return _own_builds_keys
    return lint.builds_keys


builds_keys = _the_rule()


def test_every_key_a_script_touches_is_declared():
    """No script builds a key name inside Lua (Dragonfly refuses those unless
    allow-undeclared-keys is set); that every key a script reads as data was declared too
    is checked on a real server (tests/test_declared_keys*.py)."""
    building = {name: why for name in ENTRIES if (why := builds_keys(name))}
    assert building == {}, f"{len(building)} of {len(ENTRIES)} scripts build key names inside Lua"


def test_the_key_rule_catches_a_built_key():
    assert builds_keys("ack", 'redis.call("LPUSH", ns .. "queue:" .. q, job)')
    assert builds_keys("ack", "local b = queue_prefix .. name")
    assert builds_keys("ack", 'redis.pcall("INCR", "stats:x")')
    assert builds_keys("ack", 'redis.call("SMEMBERS", ARGV[7])')
    assert not builds_keys("ack", 'redis.call("LREM", KEYS[1], 1, ARGV[1])')
