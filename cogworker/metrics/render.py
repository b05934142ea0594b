"""A /metrics answer rendered and sent by a short-lived forked process, so neither ever
runs on the prefork master's loop (docs/architecture.md#metrics).

Rendering 500 job classes takes prometheus-client 0.15-0.7 s, and sending a few MB to a
slow client takes as long as the client likes: on the loop, either delayed a reap and the
requeue of a SIGKILLed child's job. The master forks (as it forks its children: it has no
thread, and a fork is a copy of the numbers as they are at that instant) a renderer that
writes the answer with a blocking send under the connection's deadline and exits. The
master closes its copy of the socket at once and learns that the renderer is done from a
pipe only the renderer holds open: EOF. It never waits for its pid (the master's reap
collects it with the other children, as a pid it doesn't know)."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from typing import NoReturn

from setproctitle import setproctitle

MAX_RENDERERS = 4  # at once; a scrape that finds them all busy waits its turn (within its deadline)
TITLE = "cogworker: metrics renderer"
KILL_GRACE = 5.0
NICENESS = 10  # past its connection's deadline, a renderer still alive is killed
# The master's signals: a renderer must neither act on them nor write to its wakeup pipe.
_IGNORED = ("SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGQUIT")
_DEFAULT = ("SIGTERM", "SIGINT", "SIGCHLD")


def header(status: str, length: int, content_type: str) -> bytes:
    return (
        f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode()


class Renderer:
    """One forked renderer: its pid, the read end of its pipe, and when to give up on it."""

    def __init__(
        self, sock: socket.socket, render: Callable[[], bytes], head: bool, deadline: float, content_type: str
    ) -> None:
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:
            os.close(read_end)
            _run(sock, render, head, deadline, content_type)
        os.close(write_end)
        os.set_blocking(read_end, False)
        self.pid, self.fd, self.kill_at = pid, read_end, deadline + KILL_GRACE

    def done(self) -> bool:
        """It has exited (its pipe is at EOF): then its pid may already be another's."""
        try:
            return os.read(self.fd, 1) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def close(self, kill: bool = False) -> None:
        """Forget it; ``kill``: first SIGKILL it if it is still running (never a pid it
        no longer holds: alive, it holds the pipe open)."""
        if kill and not self.done():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.close(self.fd)


def _run(sock: socket.socket, render: Callable[[], bytes], head: bool, deadline: float, content_type: str) -> NoReturn:
    code = 1
    try:
        setproctitle(f"{TITLE} (for pid {os.getppid()})")  # not to be taken for the master in `ps`
        # Its CPU is the scraper's want, not the jobs': on a busy host the master and the
        # children (a requeued job's re-run among them) go first.
        os.nice(NICENESS)
        for name in _IGNORED:
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        for name in _DEFAULT:
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        try:
            body, status = render(), "200 OK"
        except Exception as exc:  # a bug: the scraper gets one line, the master goes on
            body, status = f"rendering failed: {type(exc).__name__}\n".encode(), "500 Internal Server Error"
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        sock.sendall(header(status, len(body), content_type))
        if not head:
            sock.sendall(body)
        code = 0
    except BaseException:  # a client gone or too slow: nothing to tell anyone
        pass
    finally:
        os._exit(code)  # never the master's atexit handlers or finally blocks
