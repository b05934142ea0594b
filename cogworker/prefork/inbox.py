"""The master's signals, caught from the very start of ``cogworker-prefork``.

Installed before the app module is imported (which can take seconds), so a TERM during
boot is a clean stop, exit 0 with nothing forked, not a death by signal. The handler
only records the signal; a self-pipe wakes the master's ``select``. While the app is
being imported, a TERM or INT also interrupts the import (like Ctrl-C would).
"""

from __future__ import annotations

import os
import signal
from collections import deque
from typing import Any

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGTSTP,
    signal.SIGTTIN,
    signal.SIGTTOU,
    signal.SIGHUP,
    signal.SIGCHLD,
)
STOPS = (signal.SIGTERM, signal.SIGINT)


class BootInterrupted(BaseException):
    """TERM or INT while the app was being imported: nothing was started, exit 0."""


class SignalInbox:
    def __init__(self) -> None:
        self.pending: deque[int] = deque()
        self.booting = False  # True: a stop signal interrupts what runs (the app's import)
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        self.wakeup_r, self.wakeup_w = rfd, wfd
        signal.set_wakeup_fd(wfd)
        for sig in FORWARDED:
            signal.signal(sig, self._record)
        # A reload re-executes with these blocked (prefork/cli.py): what arrived since is
        # delivered now, to these handlers.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)

    def _record(self, signum: int, frame: Any) -> None:
        self.pending.append(signum)
        if self.booting and signum in STOPS:
            self.booting = False
            raise BootInterrupted(signal.Signals(signum).name)

    def stop_requested(self) -> str | None:
        """The name of a TERM or INT received so far, if any."""
        for sig in self.pending:
            if sig in STOPS:
                return signal.Signals(sig).name
        return None

    def drain_wakeup(self) -> None:
        try:
            while os.read(self.wakeup_r, 512):
                pass
        except BlockingIOError:
            pass

    def close_in_child(self) -> None:
        """A forked child has its own handlers and no use for the master's pipe."""
        os.close(self.wakeup_r)
        os.close(self.wakeup_w)
