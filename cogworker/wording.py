"""How a count reads, in the command's output and the web UI alike: "1 job", "2 jobs",
"1 entry", "1,204 entries"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None, grouped: bool = False) -> str:
    """``n`` and the noun in its number (``plural``: when it isn't ``noun`` + "s");
    ``grouped``: thousands separated (the web UI; the command's lines stay plain digits,
    for scripts)."""
    return (f"{n:,}" if grouped else str(n)) + f" {noun if n == 1 else plural or noun + 's'}"
