"""The clean-stop tests' app (tests/test_clean_stop.py): apps.pf's jobs, and an atexit
handler that records which process ran it (a file named after its pid, in
$COGWORKER_TEST_EXIT_DIR), or hangs there with $COGWORKER_TEST_EXIT_HANG (a child that
truly won't leave)."""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path

from apps import pf  # noqa: F401  (its jobs: registered for the children)


def _exited() -> None:
    if os.environ.get("COGWORKER_TEST_EXIT_HANG") and "child" in Path(f"/proc/{os.getpid()}/cmdline").read_text():
        time.sleep(60)
    folder = os.environ.get("COGWORKER_TEST_EXIT_DIR")
    if folder:
        Path(folder, str(os.getpid())).write_text("exit handlers ran")


atexit.register(_exited)
