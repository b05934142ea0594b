"""The clean-stop tests' app (tests/test_clean_stop.py): apps.pf's jobs, and an atexit
handler that records which process ran it (a file named after its pid, in
$COGWORKER_TEST_EXIT_DIR), or hangs there with $COGWORKER_TEST_EXIT_HANG (a child that
truly won't leave). With $COGWORKER_TEST_MASTER_THREAD, the master runs a non-daemon thread
that writes ``thread-<pid>`` once the main thread has finished, as an app's flusher might."""

from __future__ import annotations

import atexit
import os
import threading
import time
from pathlib import Path

from apps import pf  # noqa: F401  (its jobs: registered for the children)


def _exited() -> None:
    if os.environ.get("COGWORKER_TEST_EXIT_HANG") and "child" in Path(f"/proc/{os.getpid()}/cmdline").read_text():
        time.sleep(60)
    folder = os.environ.get("COGWORKER_TEST_EXIT_DIR")
    if folder:
        Path(folder, str(os.getpid())).write_text("exit handlers ran")


def _after_main() -> None:
    while threading.main_thread().is_alive():
        time.sleep(0.01)
    time.sleep(0.2)  # still work to do after the main thread: the exit must wait for it
    Path(os.environ["COGWORKER_TEST_EXIT_DIR"], f"thread-{os.getpid()}").write_text("joined")


atexit.register(_exited)
if os.environ.get("COGWORKER_TEST_MASTER_THREAD"):
    threading.Thread(target=_after_main, name="app-flusher").start()
