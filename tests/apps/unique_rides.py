"""Unique jobs for tests/test_unique_rides.py: each run appends "<tag> <pid>" to the file
$COGWORKER_TEST_LOG; ``killer`` SIGKILLs its own process the first time it runs (the file
$COGWORKER_TEST_LOG.killed says it did), in the middle of a look-ahead of many; ``flusher``
flushes Redis's script cache; ``cutter`` closes every other connection."""

from __future__ import annotations

import os
import signal

import cogworker


def _log(tag: str) -> None:
    fd = os.open(os.environ["COGWORKER_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{tag} {os.getpid()}\n".encode())  # one short O_APPEND write: never interleaved
    finally:
        os.close(fd)


@cogworker.job(unique_for=3600)
def mark(tag):
    _log(tag)


@cogworker.job(unique_for=3600)
def killer(tag):
    killed = os.environ["COGWORKER_TEST_LOG"] + ".killed"
    if not os.path.exists(killed):
        open(killed, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    _log(tag)


@cogworker.job
def plain(tag):
    _log(tag)


@cogworker.job
def flusher(tag):
    """Flushes Redis's script cache: the releases held for the next fetch ride on it as
    EVALSHAs of a script Redis no longer has (NOSCRIPT)."""
    cogworker.get_config().redis().script_flush()
    _log(tag)


@cogworker.job
def cutter(tag):
    """Closes every other client's connection (CLIENT KILL): the look-ahead fetch sent as
    this job started, and the releases riding in front of it, lose their replies."""
    cogworker.get_config().redis().execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    _log(tag)
