"""The process title of every ``cogworker`` command: its own command line with every Redis
password hidden (``config.redact_url``), so ``ps`` and ``/proc/<pid>/cmdline`` never show one.

setproctitle overwrites the memory argv was in, which is what ``ps`` reads; until a
command calls ``hide_secrets`` (first thing in its ``main``) the password is visible, so
nothing slow may come before it."""

from __future__ import annotations

import sys

from setproctitle import setproctitle

from ..config import redact_url

# Options whose value may hold a password even without a scheme ("user:pass@host").
_SECRET_OPTIONS = ("--redis-url",)


def redacted(argv: list[str]) -> list[str]:
    """``argv`` with the value of every --redis-url, and every word that looks like a URL
    with user info, passed through ``redact_url``."""
    shown: list[str] = []
    secret_next = False
    for word in argv:
        option, eq, value = word.partition("=")
        if secret_next:
            word = redact_url(word)
        elif eq and option in _SECRET_OPTIONS:
            word = f"{option}={redact_url(value)}"
        elif "@" in word or "password=" in word.lower():
            word = redact_url(word)
        secret_next = word in _SECRET_OPTIONS
        shown.append(word)
    return shown


def hide_secrets(prog: str, argv: list[str] | None = None) -> None:
    """Set the title to ``prog`` and the (redacted) arguments."""
    words = redacted(sys.argv[1:] if argv is None else list(argv))
    setproctitle(" ".join([prog, *words]))
