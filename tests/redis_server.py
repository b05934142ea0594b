"""A private redis-server for tests: free port, own dir, can be stopped, paused
(SIGSTOP), resumed and restarted empty. Never touches any other Redis."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        self.binary = shutil.which("redis-server")
        if not self.binary:
            raise RuntimeError("redis-server not on PATH (.ci/run installs it)")
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="cogworker-redis-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if self.client().ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

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
