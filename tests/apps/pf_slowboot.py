"""An app module that is slow to import (``$PF_BOOT_SLEEP`` seconds), to widen the
master's boot window. ``$PF_BOOT_MARK``: a file written when its import begins.
``$PF_FORK_MARK``: a file every fork of the master (a child) appends its pid to."""

import os
import time

from apps.pf_faults import logged  # noqa: F401  (a job for its children)

if os.environ.get("PF_BOOT_MARK"):
    with open(os.environ["PF_BOOT_MARK"], "w") as f:
        f.write(str(time.time()))


def _forked() -> None:
    path = os.environ.get("PF_FORK_MARK")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)


os.register_at_fork(after_in_child=_forked)
time.sleep(float(os.environ.get("PF_BOOT_SLEEP", "1.5")))
