"""A minimal HTTP/1.0 server for ``GET /metrics``, driven by a selector the owner already
runs (the prefork master's loop; docs/architecture.md#metrics): non-blocking accept,
read and write, no thread. Each connection has a deadline: a scraper that never sends
its request, or never reads the answer, is dropped then and costs the loop nothing
meanwhile (its socket is only written when the selector says it is writable). At most
``MAX_CONNECTIONS`` at once; more are closed on accept. With ``forked`` (the master), a
``/metrics`` answer is rendered and sent by a forked process (``metrics_render``), never
on the loop."""

from __future__ import annotations

import os
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from .render import MAX_RENDERERS, Renderer, header

MAX_CONNECTIONS = 16
MAX_REQUEST = 8192
DEADLINE = 5.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class _Conn:
    sock: socket.socket
    deadline: float
    inbox: bytes = b""
    outbox: bytes | memoryview = b""  # a memoryview once sending: what is left, never copied
    answered: bool = False
    head: bool = False


class MetricsServer:
    """Listens on ``host:port``; ``render()`` makes the body of each ``/metrics``
    answer. Register with ``attach(selector)``: the selector's data for each of its
    sockets is a callable, ``handler(mask)``; call ``sweep()`` now and then."""

    def __init__(
        self,
        host: str,
        port: int,
        render: Callable[[], bytes],
        forked: bool = False,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        self.render = render
        self.forked = forked
        self.prepare = prepare  # on the loop, before each fork: what must change here, not in the copy
        self.renderers: dict[int, Renderer] = {}  # by the read end of its pipe
        # Requests read, waiting for a renderer, in arrival order (the connection itself: its fd
        # may be another's by then, if it was dropped at its deadline meanwhile).
        self.waiting: list[tuple[int, _Conn]] = []
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
        for fd in self.renderers:
            os.close(fd)
        self.renderers.clear()
        self.waiting.clear()
        self.listener.close()

    def close(self) -> None:
        for fd in list(self.conns):
            self._drop(fd)
        for fd in list(self.renderers):
            self._renderer_done(fd, kill=True)
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
        for fd, renderer in list(self.renderers.items()):
            if now >= renderer.kill_at:
                self._renderer_done(fd, kill=True)
        self._start_waiting()

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
        elif self.forked:
            conn.head = method == b"HEAD"
            self._unwatch(conn)  # nothing more to read; the renderer writes
            self.waiting.append((fd, conn))
            self._start_waiting()
        else:
            self._answer(fd, conn, "200 OK", self.render(), head=method == b"HEAD")

    def _answer(self, fd: int, conn: _Conn, status: str, body: bytes, head: bool = False) -> None:
        conn.outbox = memoryview(header(status, len(body), CONTENT_TYPE) + (b"" if head else body))
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
        self._unwatch(conn)
        conn.sock.close()

    def _unwatch(self, conn: _Conn) -> None:
        if self.selector is not None:
            try:
                self.selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass

    # -- forked renderers (the master) --------------------------------------------------------

    def _start_waiting(self) -> None:
        while self.waiting and len(self.renderers) < MAX_RENDERERS:
            fd, conn = self.waiting.pop(0)
            if self.conns.get(fd) is not conn:  # dropped at its deadline meanwhile
                continue
            del self.conns[fd]
            if self.prepare is not None:
                self.prepare()
            try:
                renderer = Renderer(conn.sock, self.render, conn.head, conn.deadline, CONTENT_TYPE)
            except OSError:  # no fork possible now (EAGAIN, ENOMEM): this scrape fails, the next may not
                conn.sock.close()
                continue
            conn.sock.close()  # the renderer has its own copy
            self.renderers[renderer.fd] = renderer
            assert self.selector is not None
            self.selector.register(
                renderer.fd, selectors.EVENT_READ, lambda mask, fd=renderer.fd: self._renderer_done(fd)
            )

    def _renderer_done(self, fd: int, kill: bool = False) -> None:
        renderer = self.renderers.pop(fd, None)
        if renderer is None:
            return
        if self.selector is not None:
            try:
                self.selector.unregister(fd)
            except (KeyError, ValueError):
                pass
        renderer.close(kill=kill)
        self._start_waiting()


def serve_forever(server: MetricsServer, stopped: Callable[[], bool]) -> None:
    """The server on a selector of its own (the single-process runner's metrics thread)."""
    selector = selectors.DefaultSelector()
    server.attach(selector)
    while not stopped():
        for key, mask in selector.select(0.5):
            key.data(mask)
        server.sweep()
