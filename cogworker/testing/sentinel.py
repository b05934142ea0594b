"""A Sentinel deployment on loopback for tests and benchmarks: a master, a replica and 3
sentinels (``redis-sentinel``, else ``redis-server --sentinel``), each a process of ours
on a free port, with short failure detection (``down_after`` ms) so a failover takes a
few seconds. ``kill_master()`` SIGKILLs the current master; ``wait_failover()`` waits
until the sentinels name another; ``rejoin()`` restarts a killed node as a replica of the
new master, so the next round has a replica again. Never touches any other Redis."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import store
from .binaries import NoServer, server_binary
from .servers import RedisServer, free_port, probe, wait_until

SERVICE = "cogworker"


def sentinel_command() -> list[str] | None:
    """How to start a sentinel here (``binaries.server_binary``), or None without a server.
    A server's ``--sentinel`` goes after the config file (``Sentinels._start_sentinel``)."""
    try:
        return server_binary().sentinel_command()
    except NoServer:
        return None


class Sentinels:
    """``Sentinels(password=...).start()``; ``url`` is its ``redis+sentinel://`` URL."""

    def __init__(
        self, password: str | None = None, down_after: int = 600, failover_timeout: int = 3000, sentinels: int = 3
    ) -> None:
        command = sentinel_command()
        if command is None:
            raise RuntimeError(
                "no server to run sentinels with: apt-get install redis-sentinel, or pip install 'cogworker[server]'"
            )
        self.command = command
        self.password = password
        self.down_after, self.failover_timeout = down_after, failover_timeout
        self.nodes: list[RedisServer] = [RedisServer(password=password), RedisServer(password=password)]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.sentinel_procs: list[subprocess.Popen[bytes]] = []
        self.dir = tempfile.mkdtemp(prefix="cogworker-sentinel-")

    def url(self, db: int = 0, scheme: str = "redis+sentinel") -> str:
        auth = f":{self.password}@" if self.password else ""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"{scheme}://{auth}{hosts}/{SERVICE}/{db}"

    def start(self) -> Sentinels:
        """Starts every process, waiting until the sentinels agree; a failure stops them all."""
        try:
            return self._start()
        except BaseException:
            self.cleanup()
            raise

    def _start(self) -> Sentinels:
        master, replica = self.nodes
        master.start()
        replica.args = ("--replicaof", "127.0.0.1", str(master.port))
        replica.start()
        self.wait_replicas(master, 1)
        for index in range(len(self.sentinel_ports)):
            self.sentinel_procs.append(self._started_sentinel(index, master.port))
        self.wait_for(lambda: self.master_port() == master.port, "the sentinels did not name the master")
        self.wait_for(lambda: self._sentinels_known(), "the sentinels did not find each other", said=self._seen)
        return self

    def _started_sentinel(self, index: int, master_port: int) -> subprocess.Popen[bytes]:
        """Sentinel ``index``, answering; one whose port was taken since it was chosen
        exits at once, and starts again on another (as ``RedisServer`` does)."""
        for _ in range(3):
            proc = self._start_sentinel(self.sentinel_ports[index], master_port)
            deadline = time.monotonic() + 10
            while proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(store.RedisError):
                    if self._probe(index).ping():
                        return proc
                time.sleep(0.05)
            if proc.poll() is None:
                return proc  # running but slow to answer: the waits after it decide
            self.sentinel_ports[index] = free_port()
        raise AssertionError(f"sentinel {index} exited at start three times (ports taken?)")

    def _seen(self) -> str:
        """What each sentinel says of the others and the replicas (for a failed wait)."""
        said = []
        for index, port in enumerate(self.sentinel_ports):
            try:
                state = self._probe(index).sentinel_masters()[SERVICE]  # type: ignore[call-overload]
                said.append(f"{port}: {state.get('num-other-sentinels')} others, {state.get('num-slaves')} replicas")
            except Exception as exc:  # a diagnostic only: whatever it is, it is said
                said.append(f"{port}: {type(exc).__name__}: {exc}")
        return "; ".join(said)

    def _start_sentinel(self, port: int, master_port: int) -> subprocess.Popen[bytes]:
        conf = Path(self.dir) / f"sentinel-{port}.conf"
        lines = [
            f"port {port}",
            "bind 127.0.0.1",
            f"dir {self.dir}",
            f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} 2",
            f"sentinel down-after-milliseconds {SERVICE} {self.down_after}",
            f"sentinel failover-timeout {SERVICE} {self.failover_timeout}",
            f"sentinel parallel-syncs {SERVICE} 1",
        ]
        if self.password:
            lines.append(f"sentinel auth-pass {SERVICE} {self.password}")
        conf.write_text("\n".join(lines) + "\n")
        # redis-server reads its config file only as its first argument: `redis-server FILE
        # --sentinel` (with `--sentinel FILE` it takes the file's name for a directive).
        binary, *flags = self.command
        return subprocess.Popen(
            [binary, str(conf), *flags, "--loglevel", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def sentinel_client(self, index: int = 0) -> store.Client:
        return store.Client(host="127.0.0.1", port=self.sentinel_ports[index], socket_timeout=2)

    def _probe(self, index: int) -> store.Client:
        """Sentinel ``index``, asked once (``servers.probe``): for the waits."""
        return probe(self.sentinel_ports[index])

    def master_port(self) -> int | None:
        """The master's port as most sentinels say (None: no majority, or none answers)."""
        said: dict[int, int] = {}
        for index in range(len(self.sentinel_ports)):
            with contextlib.suppress(store.RedisError):
                reply = self._probe(index).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
                if reply:
                    port = int(reply[1])
                    said[port] = said.get(port, 0) + 1
        best = max(said.items(), key=lambda item: item[1], default=None)
        return best[0] if best and best[1] * 2 > len(self.sentinel_ports) else None

    def _sentinels_known(self) -> bool:
        with contextlib.suppress(store.RedisError):
            state: dict[str, Any] = self._probe(0).sentinel_masters()[SERVICE]  # type: ignore[call-overload]
            return int(state["num-other-sentinels"]) >= len(self.sentinel_ports) - 1 and int(state["num-slaves"]) >= 1
        return False

    def node(self, port: int) -> RedisServer:
        return next(node for node in self.nodes if node.port == port)

    @property
    def master(self) -> RedisServer:
        port = self.master_port()
        assert port is not None, "no master now"
        return self.node(port)

    @property
    def replica(self) -> RedisServer:
        master = self.master
        return next(node for node in self.nodes if node is not master)

    def kill_master(self) -> RedisServer:
        """SIGKILLs the current master; returns it (to ``rejoin`` later)."""
        master = self.master
        master.kill()
        return master

    def wait_failover(self, old_port: int, timeout: float = 30.0) -> int:
        """Until the sentinels name a master other than ``old_port``, and it answers as one."""

        def promoted() -> bool:
            port = self.master_port()
            if port is None or port == old_port:
                return False
            with contextlib.suppress(store.RedisError):
                return self.node(port).probe().info("replication")["role"] == "master"
            return False

        self.wait_for(promoted, "no failover", timeout)
        port = self.master_port()
        assert port is not None
        return port

    def rejoin(self, node: RedisServer, timeout: float = 30.0) -> None:
        """Restarts a killed node (empty) as a replica of the current master, and waits
        until the master counts it as an online replica."""
        master = self.master
        node.args = ("--replicaof", "127.0.0.1", str(master.port))
        node.start()
        self.wait_replicas(master, 1, timeout)

    def wait_replicas(self, master: RedisServer, count: int, timeout: float = 30.0) -> None:
        def online() -> bool:
            with contextlib.suppress(store.RedisError):
                info = master.probe().info("replication")
                return (
                    sum(
                        1
                        for key, value in info.items()
                        if key.startswith("slave") and isinstance(value, dict) and value.get("state") == "online"
                    )
                    >= count
                )
            return False

        self.wait_for(online, f"fewer than {count} replica(s) online", timeout)

    def wait_for(
        self, done: Callable[[], bool], what: str, timeout: float = 30.0, said: Callable[[], str] | None = None
    ) -> None:
        """``said``: what a timeout's error adds (what was seen)."""
        wait_until(done, what, timeout, said)

    def cleanup(self) -> None:
        for proc in self.sentinel_procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.sentinel_procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        for node in self.nodes:
            node.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)
