"""A minimal HTTP/1.0 server for ``GET /metrics``, driven by a selector the owner already
runs (the prefork master's loop; docs/architecture.md#metrics): non-blocking accept,
read and write, no thread. Each connection has a deadline: a scraper that never sends
its request, or never reads the answer, is dropped then and costs the loop nothing
meanwhile (its socket is only written when the selector says it is writable). At most
``MAX_CONNECTIONS`` at once; more are closed on accept."""

from __future__ import annotations

import os
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_CONNECTIONS = 16
MAX_REQUEST = 8192
DEADLINE = 5.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class _Conn:
    sock: socket.socket
    deadline: float
    inbox: bytes = b""
    outbox: bytes = b""
    answered: bool = False


class MetricsServer:
    """Listens on ``host:port``; ``render()`` makes the body of each ``/metrics``
    answer. Register with ``attach(selector)``: the selector's data for each of its
    sockets is a callable, ``handler(mask)``; call ``sweep()`` now and then."""

    def __init__(self, host: str, port: int, render: Callable[[], bytes]) -> None:
        self.render = render
        self.listener = socket.create_server((host, port), backlog=MAX_CONNECTIONS, reuse_port=False)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.conns: dict[int, _Conn] = {}
        self.selector: selectors.BaseSelector | None = None
        self.pid = os.getpid()

    def attach(self, selector: selectors.BaseSelector) -> None:
        self.selector = selector
        selector.register(self.listener, selectors.EVENT_READ, self._on_accept)

    def close_in_child(self) -> None:
        """After a fork (from ``os.register_at_fork``): a child must not keep the port."""
        if os.getpid() == self.pid:
            return
        for conn in list(self.conns.values()):
            conn.sock.close()
        self.conns.clear()
        self.listener.close()

    def close(self) -> None:
        for fd in list(self.conns):
            self._drop(fd)
        if self.selector is not None:
            try:
                self.selector.unregister(self.listener)
            except (KeyError, ValueError):
                pass
        self.listener.close()

    def sweep(self) -> None:
        """Drops connections past their deadline (a scraper that never reads)."""
        now = time.monotonic()
        for fd, conn in list(self.conns.items()):
            if now >= conn.deadline:
                self._drop(fd)

    # -- events ------------------------------------------------------------------------------

    def _on_accept(self, mask: int) -> None:
        for _ in range(MAX_CONNECTIONS):
            try:
                sock, _addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of descriptors, say: the scraper retries
            if len(self.conns) >= MAX_CONNECTIONS:
                sock.close()
                continue
            sock.setblocking(False)
            fd = sock.fileno()
            self.conns[fd] = _Conn(sock, time.monotonic() + DEADLINE)
            assert self.selector is not None
            self.selector.register(sock, selectors.EVENT_READ, lambda mask, fd=fd: self._on_conn(fd, mask))

    def _on_conn(self, fd: int, mask: int) -> None:
        conn = self.conns.get(fd)
        if conn is None:
            return
        try:
            if not conn.answered:
                self._read(fd, conn)
            else:
                self._write(fd, conn)
        except OSError:
            self._drop(fd)

    def _read(self, fd: int, conn: _Conn) -> None:
        data = conn.sock.recv(4096)
        if not data:
            self._drop(fd)
            return
        conn.inbox += data
        if b"\r\n\r\n" not in conn.inbox and b"\n\n" not in conn.inbox:
            if len(conn.inbox) > MAX_REQUEST:
                self._answer(fd, conn, "431 Request Header Fields Too Large", b"request too large\n")
            return
        parts = conn.inbox.split(b"\r\n", 1)[0].split()
        method, path = (parts[0], parts[1]) if len(parts) >= 2 else (b"", b"")
        if method not in (b"GET", b"HEAD"):
            self._answer(fd, conn, "405 Method Not Allowed", b"GET /metrics\n")
        elif path.split(b"?", 1)[0] not in (b"/metrics", b"/"):
            self._answer(fd, conn, "404 Not Found", b"see /metrics\n")
        else:
            self._answer(fd, conn, "200 OK", self.render(), head=method == b"HEAD")

    def _answer(self, fd: int, conn: _Conn, status: str, body: bytes, head: bool = False) -> None:
        header = (f"HTTP/1.0 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\n"
                  "Connection: close\r\n\r\n").encode()
        conn.outbox = header + (b"" if head else body)
        conn.answered = True
        assert self.selector is not None
        self.selector.modify(conn.sock, selectors.EVENT_WRITE, lambda mask, fd=fd: self._on_conn(fd, mask))
        self._write(fd, conn)

    def _write(self, fd: int, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            return  # its buffer is full: the selector tells us when it drains (or the deadline drops it)
        conn.outbox = conn.outbox[sent:]
        if not conn.outbox:
            self._drop(fd)

    def _drop(self, fd: int) -> None:
        conn = self.conns.pop(fd, None)
        if conn is None:
            return
        if self.selector is not None:
            try:
                self.selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()


def serve_forever(server: MetricsServer, stopped: Callable[[], bool]) -> None:
    """The server on a selector of its own (the single-process runner's metrics thread)."""
    selector = selectors.DefaultSelector()
    server.attach(selector)
    while not stopped():
        for key, mask in selector.select(0.5):
            key.data(mask)
        server.sweep()
