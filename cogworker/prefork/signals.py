"""The master's signals, each dispatched to one small method (a dict signal -> method).
A mixin of ``Master``."""

from __future__ import annotations

import signal
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import logger
from .children import ChildState
from .slots import MAX_SLOTS


class SignalsMixin:
    s: Any  # Settings
    signals: deque[int]
    on_signal: dict[int, Callable[[int], None]]
    stopping: bool
    stop_now: bool
    quiet: bool
    target: int
    shards: list[Any]  # the master's (prefork/shards.py)
    children: dict[int, ChildState]
    rolling: deque[int]
    rolling_current: int | None

    if TYPE_CHECKING:  # the master's, or another mixin's (never shadow them at run time)
        def title(self) -> None: ...
        def kill_child(self, child: ChildState, reason: str) -> None: ...
        def stop_child(self, child: ChildState, reason: str) -> None: ...
        def signal_child(self, child: ChildState, sig: int) -> None: ...
        def return_looked_ahead(self, children: list[ChildState] | None = None) -> None: ...
        def trim_children(self) -> None: ...

    def signal_handlers(self) -> dict[int, Callable[[int], None]]:
        return {signal.SIGTERM: self.on_stop, signal.SIGINT: self.on_stop, signal.SIGTSTP: self.on_quiet,
                signal.SIGTTIN: self.on_more, signal.SIGTTOU: self.on_fewer, signal.SIGHUP: self.on_restart}

    def handle_signals(self) -> None:
        while self.signals:
            sig = self.signals.popleft()
            handler = self.on_signal.get(sig)
            if handler is not None:
                handler(sig)

    def on_stop(self, sig: int) -> None:
        """TERM/INT: a graceful stop; a second one: stop now (the children are killed)."""
        if not self.stopping:
            self.begin_shutdown(signal.Signals(sig).name)
            return
        logger.warning("master: second %s: stopping now", signal.Signals(sig).name)
        self.stop_now = True
        for child in self.children.values():
            self.kill_child(child, "shutdown")

    def on_quiet(self, sig: int) -> None:
        """TSTP: no new jobs; running jobs finish, looked-ahead ones go back at once."""
        self.go_quiet("TSTP")

    def on_control(self, command: str | None) -> None:
        """An operator's request read from Redis on the heartbeat (api.quiet_process,
        api.stop_process): as TSTP, or as the first TERM (never a stop-now)."""
        if command == "quiet" and not self.quiet and not self.stopping:
            self.go_quiet("quiet requested through Redis")
        elif command == "stop" and not self.stopping:
            self.begin_shutdown("stop requested through Redis")

    def go_quiet(self, why: str) -> None:
        logger.info("master: %s: quiet (no new jobs; running jobs finish)", why)
        self.quiet = True
        for child in self.children.values():
            self.signal_child(child, signal.SIGTSTP)
        self.return_looked_ahead()
        self.title()

    def on_more(self, sig: int) -> None:
        """TTIN: one child more (up to the slots there are)."""
        if self.target >= MAX_SLOTS:
            logger.error("master: TTIN ignored: at most %d children", MAX_SLOTS)
            return
        self.target += 1
        logger.info("master: TTIN: %d children", self.target)
        self.title()

    def on_fewer(self, sig: int) -> None:
        """TTOU: one child fewer (never below one)."""
        if self.target > max(1, len(self.shards)):  # each shard keeps a child (queue layout)
            self.target -= 1
            logger.info("master: TTOU: %d children", self.target)
            self.title()
            self.trim_children()

    def on_restart(self, sig: int) -> None:
        """HUP: every child replaced, one at a time (``step_rolling``)."""
        logger.info("master: HUP: replacing every child, one at a time")
        self.rolling = deque(sorted(self.children))
        self.rolling_current = None

    def begin_shutdown(self, why: str) -> None:
        logger.info("master: %s: stopping (running jobs get %.0fs)", why, self.s.timeout)
        self.stopping = True
        self.rolling.clear()
        self.title()
        for child in self.children.values():
            self.stop_child(child, "shutdown")
