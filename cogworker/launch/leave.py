"""How a process that has finished its work leaves: what a normal exit does that matters,
without the interpreter's teardown.

After the prefork master logs ``stopped`` it owes nothing more, yet a plain ``sys.exit``
then spends the interpreter's teardown freeing every module and object (bench/stop_exit.py:
14-150 ms of CPU on this machine, the larger when the app's objects are not frozen), which
a CPU-starved host stretches several times over: a platform that waits for the exit (a
Heroku restart, systemd's stop) waits for that too. The kernel frees the memory at once.

A reload (HUP) leaves the same way, then, instead of exiting, becomes a fresh run of the
command it was started with (``reexec``), in the same process."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from dataclasses import dataclass
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """Exit with ``code`` as a normal exit would, in its order, less the teardown: the
    app's non-daemon threads joined, then the atexit handlers (logging's flush among them),
    then stdio flushed."""
    wind_up()
    os._exit(code)


@dataclass(frozen=True)
class Relaunch:
    """How this process was started, captured before the app could change any of it (its
    import may set environment variables or change directory): what a reload re-executes."""

    command: list[str]
    env: dict[str, str]
    cwd: str

    @classmethod
    def capture(cls, module: str, argv: list[str] | None) -> Relaunch:
        """``argv`` None: the process's own command line, interpreter options included
        (``sys.orig_argv``: ``-m``, ``-X``); else ``python -m module`` with ``argv`` (a
        caller that ran ``main`` with its own arguments)."""
        args = sys.orig_argv[1:] if argv is None else ["-m", module, *argv]
        return cls([sys.executable, *args], dict(os.environ), os.getcwd())


def reexec(relaunch: Relaunch) -> NoReturn:
    """Leave as ``leave`` does, but become a fresh run of the same command in this process
    (same pid, so systemd's MAINPID or any supervisor keeps tracking it). Only inheritable
    descriptors survive exec: Python makes every file, socket and pipe non-inheritable."""
    wind_up()
    try:
        os.chdir(relaunch.cwd)
        os.execve(relaunch.command[0], relaunch.command, relaunch.env)
    except OSError as exc:  # the interpreter moved or vanished: exit as a failed start would
        sys.stderr.write(f"can't re-execute {relaunch.command[0]}: {exc}\n")
        os._exit(1)


def wind_up() -> None:
    """What a normal exit does that matters, in its order."""
    # What the interpreter's exit calls first: marks the main thread done (a thread that
    # waits for that can end), joins the non-daemon threads, runs threading's own exit hooks.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing more to say there
            pass
