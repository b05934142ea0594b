"""The idle wait on the wake stream, cut short by a stop (docs/architecture.md#signals).

An idle worker blocks in ``XREAD BLOCK`` for up to ``block_timeout`` (1 s). A stop must
not wait that out: an idle process leaves at once, on its own, with its exit handlers run.
Whoever stops it (a signal handler in the same thread, another thread) shuts down the
socket the wait reads: the read returns at once (end of stream), that connection is
dropped, and every later wait returns at once. Nothing is lost by cutting it: the read
only says that a queue may have a job, it takes none.
"""

from __future__ import annotations

import socket
from typing import Any

import redis


class WakeWait:
    def __init__(self) -> None:
        self.stopped = False
        self._sock: socket.socket | None = None  # the socket a wait reads now

    def stop(self) -> None:
        """Signal- and thread-safe: a flag, and a ``shutdown`` of the socket being read."""
        self.stopped = True
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed meanwhile: that wait is over anyway

    def wait(self, client: redis.Redis, key: str, since: Any, block_ms: int) -> None:
        """Until a push XADDs to ``key`` after ``since``, ``block_ms`` pass, or ``stop``.
        Raises what the read raises (a wrong type: ``ResponseError``), unless stopped."""
        if self.stopped:
            return
        pool = client.connection_pool
        conn = pool.get_connection()
        try:
            # Retried as the client's own commands are; a stop meanwhile ends it (``_read``).
            conn.retry.call_with_retry(lambda: self._read(conn, key, since, block_ms), lambda _error: conn.disconnect())
        except redis.ConnectionError:
            conn.disconnect()
            if not self.stopped:
                raise
        except BaseException:
            conn.disconnect()  # its reply may be unread: never reused as it is
            raise
        finally:
            self._sock = None
            if self.stopped:
                conn.disconnect()  # shut, or its reply unread
            pool.release(conn)

    def _read(self, conn: Any, key: str, since: Any, block_ms: int) -> None:
        if self.stopped:
            return
        conn.send_command("XREAD", "COUNT", 1, "BLOCK", block_ms, "STREAMS", key, since)
        # Set before the flag is read again, as ``stop`` sets the flag before it reads
        # this: either the stop sees the socket and shuts it, or this sees the stop.
        self._sock = getattr(conn, "_sock", None)
        if self.stopped:
            return
        conn.read_response()
