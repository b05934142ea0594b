"""Bulk operations' manners: ask before changing many entries (unless ``--yes``), and show
progress on a terminal. Both talk on stderr, so stdout stays the result (or the JSON)."""

from __future__ import annotations

import sys
from typing import TextIO

from .output import usage


def confirm(question: str, yes: bool, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
    """Returns when the operation may go on; raises a usage error (exit 2) when it may
    not. Without ``--yes`` it asks on the terminal; with no terminal to ask on it refuses:
    a script must say ``--yes`` rather than have a bulk change happen by default."""
    if yes:
        return
    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    if not (stdin.isatty() and stderr.isatty()):
        raise usage(f"{question.rstrip('?')}: refused without --yes (no terminal to confirm on)")
    stderr.write(f"{question} [y/N] ")
    stderr.flush()
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise usage("cancelled (nothing changed)")


class ProgressLine:
    """``done/total`` on one rewritten stderr line, only when stderr is a terminal (a log
    file must not fill with carriage returns)."""

    def __init__(self, what: str, total: int | None, stream: TextIO | None = None) -> None:
        self.what = what
        self.total = total
        self.stream = stream or sys.stderr
        self.shown = self.stream.isatty()
        self.done = 0

    def add(self, count: int) -> None:
        self.done += count
        if self.shown:
            of = f"/{self.total}" if self.total is not None else ""
            self.stream.write(f"\r{self.what}: {self.done}{of}")
            self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
