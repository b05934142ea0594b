"""A private, throw-away redis-server on a free loopback port.

Every measurement gets its own: nothing is shared with the machine's Redis on 6379,
nothing is persisted, and no state (scripts, keys, client lists) leaks from one run
into the next.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_version():
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    for part in out.split():
        if part.startswith("v="):
            return part[2:]
    return out.strip()


LIVE = set()  # every server not yet stopped, so an interrupted run can stop them all


def stop_all():
    for server in list(LIVE):
        server.stop()


class RedisServer:
    def __init__(self):
        self.port = None
        self.proc = None
        self.dir = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        # A port can be taken between free_port() and bind(): retry a few times.
        for _ in range(5):
            self.port = free_port()
            self.dir = tempfile.mkdtemp(prefix="cogbench-redis-")
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", self.dir,
                 "--maxclients", "1000", "--loglevel", "warning"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            LIVE.add(self)
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError("could not start a private redis-server")

    def _wait_ready(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.01)
        return False

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        LIVE.discard(self)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    with RedisServer() as r:
        print(r.url, os.getpid(), redis_version())
