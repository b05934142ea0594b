"""Helpers of the workflow tests: the start/end log the jobs of ``apps.wf`` keep in Redis."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def runs(client: Any) -> dict[str, list[tuple[int, float, float | None]]]:
    """tag -> [(pid, started, ended or None)], from the log's start/end lines. A run with no
    end was killed mid-run: it ended when its process was killed (the ``kill`` line of that
    pid: a job running beside the killer in the same child, with ``--concurrency``, died
    with it), or None if no kill of its process is logged."""
    open_runs: dict[tuple[str, int], float] = {}
    killed_at: dict[int, float] = {}
    found: dict[str, list[tuple[int, float, float | None]]] = defaultdict(list)
    for line in client.lrange("test:log", 0, -1):
        kind, tag, pid, at = line.decode().split("|")
        if kind == "start":
            open_runs[(tag, int(pid))] = float(at)
        elif kind == "end":
            started = open_runs.pop((tag, int(pid)))
            found[tag].append((int(pid), started, float(at)))
        elif kind == "kill":
            killed_at[int(pid)] = float(at)
    for (tag, pid), started in open_runs.items():
        found[tag].append((pid, started, killed_at.get(pid)))  # killed mid-run
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
