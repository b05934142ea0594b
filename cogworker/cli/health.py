"""``cogworker health [--max-age 30] [--identity ID]``: for a container's liveness probe
(docs/architecture.md#health). Exit 0 when a master on this host (or the process
``--identity``) has beaten within ``--max-age`` seconds and has all its children; else
exit 1 with a one-line reason (Redis unreachable included: the probe can't tell)."""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from .. import store
from ..config import Config, as_text, count, get_config, number
from ..launch.argtypes import positive_float
from ..routing import everywhere
from ..store import durability
from ..store.tls import certificate_hint


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    health = sub.add_parser(
        "health", parents=parents, help="exit 0 if this host's master beats and has all its children, else 1"
    )
    health.add_argument(
        "--max-age",
        type=positive_float,
        default=30.0,
        metavar="SECONDS",
        help="its last beat at most this old (default 30)",
    )
    health.add_argument("--identity", metavar="ID", help="this process (a master or a worker), not this host's master")


def run(args: argparse.Namespace) -> int:
    warnings: list[str] = []
    try:
        ok, reason = check(args.max_age, args.identity)
        warnings = list(dict.fromkeys(w for part in everywhere(get_config()) for w in durability.check(part.redis())))
    except store.RedisError as exc:
        ok, reason = False, certificate_hint(exc) or f"Redis unreachable: {type(exc).__name__}"
    if args.json:
        import json

        namespace = get_config().namespace
        answer = {"healthy": ok, "reason": reason, "namespace": namespace, "redis_warnings": warnings}
        sys.stdout.write(json.dumps(answer) + "\n")
        return 0 if ok else 1
    if ok:
        sys.stdout.write(f"ok: {reason}\n")
    else:
        sys.stderr.write(f"cogworker: unhealthy: {reason}\n")
    for warning in warnings:  # reported, not failed: a probe that restarts the worker fixes nothing
        sys.stderr.write(f"cogworker: warning: {warning}\n")
    return 0 if ok else 1


def check(max_age: float, identity: str | None) -> tuple[bool, str]:
    """(healthy, why): the freshest matching process decides."""
    candidates = records(identity)
    where = f"namespace {get_config().namespace!r}"  # a probe looking in the wrong one says so
    if not candidates:
        what = f"process {identity}" if identity else f"master on host {socket.gethostname()}"
        return False, (
            f"no {what} is registered in {where} (not running, its record expired, or it uses "
            "another namespace: --namespace, $COGWORKER_NAMESPACE)"
        )
    ident, rec = max(candidates, key=lambda pair: number(pair[1].get("beat_at"), 0.0))
    age = time.time() - number(rec.get("beat_at"), 0.0)
    if age > max_age:
        return False, f"{rec.get('role')} {ident} last beat {age:.0f}s ago (--max-age {max_age:g}), in {where}"
    if "procs" in rec and count(rec.get("children")) < count(rec["procs"]):
        return False, f"master {ident} has {rec.get('children')} of its {rec['procs']} children, in {where}"
    children = f", {rec['children']}/{rec['procs']} children" if "procs" in rec else ""
    return True, f"{rec.get('role')} {ident} beat {age:.1f}s ago{children}, in {where}"


def records(identity: str | None) -> list[tuple[str, dict[str, str]]]:
    """The matching records: the fleet's and, in the queue layout on a cluster, every
    part's (a child beats in its part; a master in the fleet)."""
    return [found for part in everywhere(get_config()) for found in _records_in(part, identity)]


def _records_in(config: Config, identity: str | None) -> list[tuple[str, dict[str, str]]]:
    client, keys = config.redis(), config.keys
    names = [identity] if identity else sorted(as_text(i) for i in client.smembers(keys.processes))
    pipe = store.pipeline(client)
    for name in names:
        pipe.hgetall(keys.process(name))
    host = socket.gethostname()
    found = []
    for name, raw in zip(names, pipe.execute(raise_on_error=False), strict=True):
        if not isinstance(raw, dict) or not raw:
            continue
        rec = {as_text(k): as_text(v) for k, v in raw.items()}
        if identity or (rec.get("role") == "master" and rec.get("host") == host):
            found.append((name, rec))
    return found
