"""The worker's queue list as given on its command line (``-q NAME[,WEIGHT]``)."""

from __future__ import annotations

from ..errors import ConfigurationError
from ..names import QUEUE_NAME_MAX, problem, shown


def parse_queues(specs: list[str] | None) -> list[tuple[str, int | None]]:
    """``["critical,3", "default,1"]`` or ``["a", "b"]`` -> [(name, weight or None)].

    Weights must be given for all queues or for none (Sidekiq's rule): mixing them is
    ambiguous.
    """
    parsed: list[tuple[str, int | None]] = []
    for spec in specs or ["default"]:
        name, sep, weight = spec.partition(",")
        name = name.strip()
        if not name:
            raise ConfigurationError(f"invalid queue {shown(spec)}: expected NAME or NAME,WEIGHT")
        why = problem(name, QUEUE_NAME_MAX)
        if why is not None:
            raise ConfigurationError(f"invalid queue {shown(spec)}: the name {why}")
        if sep:
            try:
                w = int(weight)
            except ValueError:
                raise ConfigurationError(f"invalid queue {spec!r}: weight must be a whole number") from None
            if w < 1:
                raise ConfigurationError(f"invalid queue {spec!r}: weight must be at least 1")
            parsed.append((name, w))
        else:
            parsed.append((name, None))
    weighted = [w is not None for _, w in parsed]
    if any(weighted) and not all(weighted):
        raise ConfigurationError("give a weight for every queue or for none (-q NAME,WEIGHT)")
    if len({n for n, _ in parsed}) != len(parsed):
        raise ConfigurationError("a queue is listed twice")
    return parsed
