"""The ports the fixtures give their servers (cogworker/testing/servers.py): chosen below
the kernel's ephemeral range, so no outgoing connection takes one between the choice and
the server's bind; and a server whose chosen port was taken anyway starts on another."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cogworker.testing.cluster import cluster_port
from cogworker.testing.servers import RedisServer, free_port

RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE.exists(), reason="the ephemeral range is read from Linux's /proc")
def test_ports_are_chosen_below_the_ephemeral_range() -> None:
    first = int(RANGE.read_text().split()[0])
    assert all(free_port() < first for _ in range(50))
    assert all(cluster_port() + 10000 < first for _ in range(50))  # the bus port too


def test_a_server_whose_chosen_port_was_taken_starts_on_another() -> None:
    server = RedisServer()
    with socket.socket() as taken:
        # bound, not listening: as an outgoing connection holds its local port
        taken.bind(("127.0.0.1", server.port))  # someone took it between the choice and the start
        lost = server.port
        try:
            server.start(timeout=5)
            assert server.port != lost
            assert server.client().ping()
            server.restart()  # a restart keeps the port it started on
            assert server.client().ping()
        finally:
            server.cleanup()


def test_a_port_given_and_taken_fails_in_one_line_without_waiting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        server = RedisServer(port=taken.getsockname()[1])
        try:
            with pytest.raises(RuntimeError, match="exited at start"):
                server.start(timeout=30)
        finally:
            server.cleanup()
