"""Helpers of the workflow tests: the start/end log the jobs of ``apps.wf`` keep in Redis."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def runs(client: Any) -> dict[str, list[tuple[int, float, float | None]]]:
    """tag -> [(pid, started, ended or None)], from the log's start/end lines."""
    open_runs: dict[tuple[str, int], float] = {}
    found: dict[str, list[tuple[int, float, float | None]]] = defaultdict(list)
    for line in client.lrange("test:log", 0, -1):
        kind, tag, pid, at = line.decode().split("|")
        if kind == "start":
            open_runs[(tag, int(pid))] = float(at)
        elif kind == "end":
            started = open_runs.pop((tag, int(pid)))
            found[tag].append((int(pid), started, float(at)))
    for (tag, pid), started in open_runs.items():
        found[tag].append((pid, started, None))  # killed mid-run
    return found


def overlapping(found: dict[str, list[tuple[int, float, float | None]]]) -> list[str]:
    """Tags that ran twice at once (two runs whose start/end intervals overlap)."""
    bad = []
    for tag, each in found.items():
        spans = sorted((s, e if e is not None else float("inf")) for _, s, e in each)
        if any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)):
            bad.append(tag)
    return bad


def kills(client: Any) -> list[str]:
    return [line.decode().split("|")[1] for line in client.lrange("test:log", 0, -1) if line.startswith(b"kill|")]
