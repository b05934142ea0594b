"""Reads the job log of apps.fence_app (one line per start and end: tag, pid, event,
epoch) and checks it: nothing lost, which jobs ran twice, which twice at once."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Run:
    tag: str
    pid: int
    start: float
    end: float | None = None  # None: it never ended (its process was killed)

    def overlaps(self, other: Run) -> bool:
        inf = float("inf")
        return self.start < (other.end or inf) and other.start < (self.end or inf)


@dataclass
class Report:
    runs: dict[str, list[Run]]
    lost: list[str] = field(default_factory=list)  # enqueued, never ended
    duplicates: dict[str, list[Run]] = field(default_factory=dict)  # started more than once
    concurrent: dict[str, list[Run]] = field(default_factory=dict)  # two runs at the same time

    def summary(self) -> str:
        return f"lost {len(self.lost)}, duplicates {len(self.duplicates)}, concurrent duplicates {len(self.concurrent)}"


def read_runs(path: Path) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = defaultdict(list)
    open_runs: dict[tuple[str, int], Run] = {}
    if not path.exists():
        return runs
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue  # a line cut short by a kill: never a whole event
        tag, pid, event, at = parts[0], int(parts[1]), parts[2], float(parts[3])
        if event == "start":
            run = Run(tag, pid, at)
            runs[tag].append(run)
            open_runs[(tag, pid)] = run
        elif event == "end" and (tag, pid) in open_runs:
            open_runs.pop((tag, pid)).end = at
    return runs


def check(path: Path, tags: list[str]) -> Report:
    runs = read_runs(path)
    report = Report(runs)
    report.lost = [t for t in tags if not any(r.end is not None for r in runs.get(t, []))]
    for tag, rs in runs.items():
        if len(rs) > 1:
            report.duplicates[tag] = rs
            if any(a.overlaps(b) for i, a in enumerate(rs) for b in rs[i + 1 :]):
                report.concurrent[tag] = rs
    return report


def ended(path: Path) -> int:
    return sum(1 for rs in read_runs(path).values() for r in rs if r.end is not None)
