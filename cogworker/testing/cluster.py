"""A Redis Cluster on loopback for tests and benchmarks: 3 masters and 3 replicas, each a
``redis-server --cluster-enabled yes`` of ours on a free port, joined by ``redis-cli
--cluster create --cluster-replicas 1`` with a short ``cluster-node-timeout`` so that a
killed master's replica takes over in a few seconds. ``url`` names any node (cogworker
finds the rest); ``owner(key)`` is the master that serves the key's slot; ``kill``/
``pause`` act on one node by its pid; ``cleanup()`` stops them all. Never touches any
other Redis."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .. import store
from .binaries import NoServer, server_binary
from .servers import RedisServer, free_port, wait_until


def cluster_support() -> str | None:
    """Why a cluster can't be started here (None: it can)."""
    try:
        server_binary()
    except NoServer as exc:
        return str(exc)
    if not shutil.which("redis-cli"):
        return "redis-cli is not on PATH (apt-get install redis-tools)"
    return None


def cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too."""
    return free_port(bus=10000)


def key_slot(key: str | bytes) -> int:
    """The cluster slot of ``key`` (CRC16 of its hash tag, as Redis computes it)."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    crc = 0
    for byte in raw:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc % 16384


@dataclass
class Node:
    """One node as the cluster sees it now."""

    server: RedisServer
    node_id: str
    role: str  # "master" or "replica"
    master_id: str | None  # a replica's master
    slots: list[tuple[int, int]]  # a master's slot ranges

    @property
    def port(self) -> int:
        return self.server.port


class Cluster:
    """``Cluster().start()``: 3 masters + 3 replicas (``masters``/``replicas`` to change)."""

    def __init__(
        self, masters: int = 3, replicas: int = 1, node_timeout: int = 1000, password: str | None = None
    ) -> None:
        why = cluster_support()
        if why:
            raise RuntimeError(why)
        self.masters_wanted, self.replicas_per_master = masters, replicas
        self.node_timeout, self.password = node_timeout, password
        self.dir = ""
        self.servers: list[RedisServer] = []
        self._new_servers()

    def _new_servers(self) -> None:
        """A folder and ``masters * (1 + replicas)`` servers on free ports, not started."""
        self.dir = tempfile.mkdtemp(prefix="cogworker-cluster-")
        self.servers = []
        for _ in range(self.masters_wanted * (1 + self.replicas_per_master)):
            port = cluster_port()
            self.servers.append(
                RedisServer(
                    port=port,
                    password=self.password,
                    args=(
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        f"{self.dir}/nodes-{port}.conf",
                        "--cluster-node-timeout",
                        str(self.node_timeout),
                        "--cluster-require-full-coverage",
                        "yes",
                        "--repl-diskless-sync-delay",
                        "0",
                    ),
                )
            )

    @property
    def url(self) -> str:
        """A ``redis://`` URL naming one live node (any node will do for cogworker)."""
        server = next((s for s in self.servers if s.proc and not s.paused), self.servers[0])
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{server.port}/0"

    def start(self, timeout: float = 60.0, tries: int = 2) -> Cluster:
        """Starts every node, creates the cluster and waits until every node says
        ``cluster_state:ok``; a failure stops them all. A cluster whose nodes don't come to
        agree within ``timeout`` is said on stderr (what each node sees) and created again
        on other ports, up to ``tries`` times: once under a parallel suite's load, one never
        did in 60 s, and every test of that worker failed with it."""
        for attempt in range(1, tries + 1):
            try:
                for server in self.servers:
                    server.start()
                self._create()
                self.wait_ok(timeout)
                return self
            except AssertionError as exc:  # only the wait for agreement is tried again
                self.cleanup()
                if attempt == tries:
                    raise
                print(f"cogworker.testing: {exc}; creating the cluster again on other ports", file=sys.stderr)
                self._new_servers()
            except BaseException:
                self.cleanup()
                raise
        raise AssertionError("Cluster.start: tries must be 1 or more")

    def _create(self) -> None:
        addresses = [f"127.0.0.1:{server.port}" for server in self.servers]
        auth = ["-a", self.password, "--no-auth-warning"] if self.password else []
        done = subprocess.run(
            [
                "redis-cli",
                *auth,
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                str(self.replicas_per_master),
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def live(self) -> list[RedisServer]:
        return [server for server in self.servers if server.proc is not None and not server.paused]

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Until every live node says ``cluster_state:ok`` and agrees on one master per
        slot range, each with its replicas online."""

        def ok() -> bool:
            for server in self.live():
                if server.said():
                    return False  # it exited on its own: only a new cluster will do
                try:
                    info = server.probe().execute_command("CLUSTER", "INFO")
                except store.RedisError:
                    return False
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" not in text or not self._synced(server):
                    return False
            with contextlib.suppress(AssertionError, store.RedisError):
                return len(self.masters()) == self.masters_wanted and all(self._sees_all(s) for s in self.live())
            return False

        self.wait_for(ok, "the cluster did not come to cluster_state:ok", timeout, said=self._seen)

    def _seen(self) -> str:
        """What each live node says of the cluster (for a failed wait): its state, its
        replication link, and the nodes it does not place as a master of slots or its replica."""
        said = []
        for server in self.live():
            exited = server.said()
            if exited:
                said.append(f"{server.port}: {exited}")
                continue
            try:
                client = server.probe()
                info = client.execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                state = next((line for line in text.splitlines() if line.startswith("cluster_state:")), "?")
                replication = client.info("replication")
                link = replication.get("master_link_status", "-")
                raw = client.execute_command("CLUSTER", "NODES")
                view = " | ".join(
                    " ".join(line.split()[1:4])
                    for line in (raw.decode() if isinstance(raw, bytes) else str(raw)).splitlines()
                )
                said.append(f"{server.port}: {state.strip()} {replication['role']} link={link} sees [{view}]")
            except Exception as exc:  # a diagnostic only: whatever it is, it is said
                said.append(f"{server.port}: {type(exc).__name__}: {exc}")
        return "; ".join(said)

    @staticmethod
    def _synced(server: RedisServer) -> bool:
        """A replica's link to its master is up (it can take over); a master is."""
        with contextlib.suppress(store.RedisError):
            replication = server.probe().info("replication")
            return replication["role"] == "master" or replication.get("master_link_status") == "up"
        return False

    def _sees_all(self, server: RedisServer) -> bool:
        """``server`` knows every live node as up (no fail flag), each a master of slots or
        a replica of one: gossip has settled. (Just after ``create`` a node could still see
        a replica as a master without slots, and ``replica_of`` found none.)"""
        raw = server.probe().execute_command("CLUSTER", "NODES")
        view = self._parse_nodes(raw.decode() if isinstance(raw, bytes) else str(raw))
        live = {node.port for node in self.live()}
        if not live <= {node.port for node in view}:
            return False
        masters = {node.node_id for node in view if node.role == "master" and node.slots}
        placed = [n for n in view if n.node_id in masters or (n.role == "replica" and n.master_id in masters)]
        return live <= {node.port for node in placed}

    def nodes(self) -> list[Node]:
        """Every node as a live node says now (CLUSTER NODES), roles and slots."""
        for server in self.live():
            with contextlib.suppress(store.RedisError):
                raw = server.probe().execute_command("CLUSTER", "NODES")
                text = raw.decode() if isinstance(raw, bytes) else str(raw)
                return self._parse_nodes(text)
        raise AssertionError("no live node answers CLUSTER NODES")

    def _parse_nodes(self, text: str) -> list[Node]:
        by_port = {server.port: server for server in self.servers}
        found: list[Node] = []
        for line in text.splitlines():
            fields = line.split()
            if len(fields) < 8:
                continue
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1] or 0)
            flags = fields[2].split(",")
            if port not in by_port or "fail" in flags or "noaddr" in flags:
                continue
            slots = []
            for part in fields[8:]:
                if part.startswith("["):
                    continue  # a slot being migrated
                low, _, high = part.partition("-")
                slots.append((int(low), int(high or low)))
            role = "master" if "master" in flags else "replica"
            found.append(Node(by_port[port], fields[0], role, None if fields[3] == "-" else fields[3], slots))
        return found

    def masters(self) -> list[Node]:
        return [node for node in self.nodes() if node.role == "master" and node.slots]

    def replicas(self) -> list[Node]:
        return [node for node in self.nodes() if node.role == "replica"]

    def owner(self, key: str | bytes) -> Node:
        """The master that serves the slot of ``key`` now."""
        return self.owner_of_slot(key_slot(key))

    def replica_of(self, master: Node) -> Node:
        return next(node for node in self.replicas() if node.master_id == master.node_id)

    def server(self, port: int) -> RedisServer:
        return next(server for server in self.servers if server.port == port)

    def kill(self, port: int) -> RedisServer:
        """SIGKILLs the node on ``port`` (its pid); returns it (to ``rejoin`` later)."""
        server = self.server(port)
        server.kill()
        return server

    def pause(self, port: int) -> RedisServer:
        server = self.server(port)
        server.pause()
        return server

    def resume(self, port: int) -> RedisServer:
        server = self.server(port)
        server.resume()
        return server

    def wait_failover(self, old_master: Node, timeout: float = 30.0) -> Node:
        """Until another node serves ``old_master``'s slots and the cluster is ok again."""
        low = old_master.slots[0][0]

        def promoted() -> bool:
            with contextlib.suppress(AssertionError, StopIteration, store.RedisError):
                return self.owner_of_slot(low).node_id != old_master.node_id
            return False

        self.wait_for(promoted, "no replica took over", timeout)
        self.wait_ok(timeout)
        return self.owner_of_slot(low)

    def rejoin(self, server: RedisServer, timeout: float = 30.0) -> None:
        """Restarts a killed node with its nodes.conf: it comes back as a replica of the
        master that replaced it."""
        server.start()
        self.wait_for(lambda: any(n.port == server.port for n in self.nodes()), "the node did not rejoin", timeout)
        self.wait_ok(timeout)

    def move_slot(self, slot: int, target: Node, chunk: int = 100, *, batch: int | None = None) -> None:
        """Moves ``slot`` (its keys) from its master to ``target`` as ``redis-cli --cluster
        reshard`` does: SETSLOT IMPORTING/MIGRATING, MIGRATE in chunks of ``chunk`` keys,
        SETSLOT NODE on every master. Clients see ASK while it runs and MOVED after.
        ``batch=`` is the old spelling of ``chunk=``, kept for one release ("batch" names
        only batches with callbacks now)."""
        if batch is not None:
            warnings.warn("move_slot(batch=) is now move_slot(chunk=)", DeprecationWarning, stacklevel=2)
            chunk = batch
        source = self.owner_of_slot(slot)
        if source.node_id == target.node_id:
            return
        dst, src = target.server.client(), source.server.client()
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.node_id)
        auth = ["AUTH", self.password] if self.password else []
        while True:
            keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, chunk)
            if not keys:
                break
            src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, *auth, "KEYS", *keys)
        for node in self.masters() + [target, source]:
            with contextlib.suppress(store.RedisError):
                node.server.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", target.node_id)
        self.wait_for(lambda: self.owner_of_slot(slot).node_id == target.node_id, "the slot did not move")

    def owner_of_slot(self, slot: int) -> Node:
        """The master that serves ``slot`` now (AssertionError: none does)."""
        for node in self.masters():
            if any(low <= slot <= high for low, high in node.slots):
                return node
        raise AssertionError(f"no master serves slot {slot}")

    def wait_for(
        self, done: Callable[[], bool], what: str, timeout: float = 30.0, said: Callable[[], str] | None = None
    ) -> None:
        """``said``: what a timeout's error adds (what was seen)."""
        wait_until(done, what, timeout, said)

    def cleanup(self) -> None:
        for server in self.servers:
            server.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)
