"""How a process that has finished its work leaves: what a normal exit does that matters,
without the interpreter's teardown.

After the prefork master logs ``stopped`` it owes nothing more, yet a plain ``sys.exit``
then spends the interpreter's teardown freeing every module and object (bench/stop_exit.py:
14-150 ms of CPU on this machine, the larger when the app's objects are not frozen), which
a CPU-starved host stretches several times over: a platform that waits for the exit (a
Heroku restart, systemd's stop) waits for that too. The kernel frees the memory at once."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """Exit with ``code`` as a normal exit would, in its order, less the teardown: the
    app's non-daemon threads joined, then the atexit handlers (logging's flush among them),
    then stdio flushed."""
    # What the interpreter's exit calls first: marks the main thread done (a thread that
    # waits for that can end), joins the non-daemon threads, runs threading's own exit hooks.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing more to say there
            pass
    os._exit(code)
