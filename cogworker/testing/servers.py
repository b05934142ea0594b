"""Real parts for integration tests (``cogworker.testing``, the pytest plugin): a private
``redis-server`` on a free port, in a folder of its own, that can be paused, killed and
restarted empty; and a real ``cogworker-prefork`` master running an app module on it.
Nothing here touches any other Redis, or signals any process it did not start."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from .. import store
from ..store.cluster import tagged
from ..store.connection import connect, is_cluster
from .binaries import server_binary


def _ephemeral_start() -> int:
    """The first port the kernel hands to outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(bus: int = 0) -> int:
    """A free port (and ``port + bus`` free too, for a cluster node's bus), chosen below the
    kernel's ephemeral range: a port from that range can be taken by any outgoing
    connection between this check and the server's bind (a cluster node once failed to
    start that way under a parallel suite)."""
    top = _ephemeral_start() - 1 - bus
    if top - 10000 >= 1000:
        for _ in range(200):
            port = random.randint(10000, top)
            if _bindable(port) and (not bus or _bindable(port + bus)):
                return port
    for _ in range(200):  # a machine with no room below its ephemeral range
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + bus <= 65535 and (not bus or _bindable(port + bus)):
            return port
    raise RuntimeError("no free port found on 127.0.0.1")


def probe(port: int, password: str | None = None) -> store.Client:
    """A client of the server (or sentinel) on ``port`` that asks once and waits 2 s at
    most (cogworker's own options): for the fixtures' waits, where a frozen or dead server
    must cost one short timeout, not redis-py's default ten retries (a minute against a
    frozen server)."""
    auth = f":{password}@" if password else ""
    return connect(f"redis://{auth}127.0.0.1:{port}/0", 2.0, 2.0, cluster=False)


def wait_until(done: Callable[[], bool], what: str, timeout: float, said: Callable[[], str] | None = None) -> None:
    """Polls ``done`` every 50 ms; past ``timeout``, an AssertionError saying ``what`` and,
    from ``said``, what was seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout}s" + (f" ({said()})" if said is not None else ""))


class RedisServer:
    """``RedisServer().start()``; ``url``, ``client()``, ``stop()``, ``kill()``,
    ``restart()`` (empty, same port), ``pause()``/``resume()`` (SIGSTOP/SIGCONT),
    ``cleanup()`` (stops it and removes its folder)."""

    def __init__(self, port: int | None = None, args: tuple[str, ...] = (), password: str | None = None) -> None:
        self.server = server_binary()  # redis-server, or the embedded Valkey (binaries.py)
        self.binary = self.server.path
        self.chosen = port is None  # a port chosen here is chosen again if it is taken at start
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="cogworker-redis-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.args = args  # more redis-server options (--replicaof, ...)
        self.password = password  # requirepass and masterauth, when given

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        for _ in range(3 if self.chosen else 1):
            if self._launch(timeout):
                self.chosen = False  # a restart keeps its port: its clients know it
                return self
            self.port = free_port()  # it exited at once: someone took the port since it was chosen
        raise RuntimeError(f"{self.server.version} on port {self.port} exited at start (port in use?)")

    def _launch(self, timeout: float) -> bool:
        """True once it answers PING; False if it exited first; raises past ``timeout``."""
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                "--loglevel",
                "warning",
                "--logfile",
                self.log_path,
                *self._auth(),
                *self.args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                return False
            try:
                # a bare connect first: the client's own retries would wait seconds on a refusal
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                if self.client().ping():
                    return True
            except (OSError, store.ConnectionError, store.TimeoutError):
                time.sleep(0.02)
        raise RuntimeError(f"{self.server.version} on port {self.port} did not start")

    def _auth(self) -> list[str]:
        return ["--requirepass", self.password, "--masterauth", self.password] if self.password else []

    def client(self) -> store.Client:
        return store.Client(host="127.0.0.1", port=self.port, socket_timeout=5, password=self.password)

    def probe(self) -> store.Client:
        """``probe(port)`` for this server."""
        return probe(self.port, self.password)

    @property
    def log_path(self) -> str:
        """Its own log (warnings and worse: why it exited, if it did)."""
        return os.path.join(self.dir, "server.log")

    def said(self, lines: int = 5) -> str:
        """Its exit status and the last ``lines`` of its log, if it exited on its own; "" if not."""
        if self.proc is None or self.proc.poll() is None:
            return ""
        try:
            with open(self.log_path, errors="replace") as log:
                tail = " / ".join(line.strip() for line in log.readlines()[-lines:])
        except OSError:
            tail = "no log"
        return f"exited with status {self.proc.returncode}: {tail}"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            if self.paused:
                self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        """Stopped and started again on the same port: empty, with an empty script cache."""
        self.stop()
        self.start()

    def pause(self) -> None:
        assert self.proc
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.proc
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PreforkWorker:
    """``cogworker-prefork --procs N MODULE`` on ``redis_url``, in a session of its own,
    with this process's ``sys.path`` (so it imports what the test imports). ``wait_idle()``
    waits until its queues and in-progress lists are empty; ``stop()`` sends SIGTERM
    (a clean stop) and, past ``grace``, SIGKILLs its process group; ``output()`` is its log."""

    def __init__(
        self,
        redis_url: str,
        module: str,
        procs: int = 1,
        args: tuple[str, ...] = (),
        namespace: str = "cogworker",
        env: dict[str, str] | None = None,
    ) -> None:
        self.redis_url, self.namespace, self.procs = redis_url, namespace, procs
        self.stopped: int | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="cogworker-worker-", suffix=".log", delete=False)
        path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
        full_env.pop("COGWORKER_REDIS_URL", None)
        cmd = [
            sys.executable,
            "-m",
            "cogworker.prefork.cli",
            "--procs",
            str(procs),
            "--redis-url",
            redis_url,
            "--namespace",
            namespace,
            *args,
            module,
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> PreforkWorker:
        """Until ``procs`` children have booted (their process titles say so: idle or busy).
        AssertionError on timeout or exit, with the log."""
        self._wait(lambda conn: self._booted() >= self.procs, timeout, "not ready")
        return self

    def _booted(self) -> int:
        try:
            children = psutil.Process(self.pid).children()
        except psutil.NoSuchProcess:
            return 0
        booted = 0
        for child in children:  # one may exit while looked at
            with contextlib.suppress(psutil.Error, IndexError):
                title = child.cmdline()[0]
                booted += title.startswith("cogworker: child") and ("idle" in title or "busy" in title)
        return booted

    def _wait(self, done: Any, timeout: float, what: str) -> None:
        conn = connect(self.redis_url, 5, 2, namespace=self.namespace)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise AssertionError(f"the worker exited ({self.proc.returncode}):\n{self.output()}")
                if done(conn):
                    return
                time.sleep(0.02)
        finally:
            conn.close()
        raise AssertionError(f"the worker was still {what} after {timeout}s:\n{self.output()[-4000:]}")

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until no job waits on a queue or sits on an in-progress list (scheduled and
        retrying jobs aren't waited for). AssertionError on timeout, with the log."""
        prefix = tagged(self.namespace) if is_cluster(self.redis_url) else self.namespace
        self._wait(lambda conn: not self._busy(conn, prefix), timeout, "busy")

    @staticmethod
    def _busy(conn: Any, prefix: str) -> bool:
        for pattern in (f"{prefix}:queue:*", f"{prefix}:in_progress:*"):
            for key in conn.scan_iter(match=pattern):
                if conn.type(key) == b"list" and conn.llen(key):
                    return True
        return False

    def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM, then after ``grace`` SIGKILL to its group; its exit status (once
        stopped, again the same)."""
        if self.stopped is not None:
            return self.stopped
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        try:  # anything of its session left behind (a child still stopping)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.stopped = self.proc.wait(10)
        self.log.close()
        os.unlink(self.log.name)
        return self.stopped
