"""How many CPUs this process may use: the default of ``--procs``.

``os.cpu_count()`` is the machine's. A process pinned with ``taskset`` (its affinity) or
in a container with a CPU quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``) gets a
share of them, and one child per CPU of the machine would only make them wait on each
other. The quota is rounded up (1.5 CPUs: 2 children) and read where it can be: a file
that can't be read means no quota.
"""

from __future__ import annotations

import math
import os
from pathlib import Path


def available_cpus(cgroup_root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int:
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        count = os.cpu_count() or 1
    quota = cgroup_cpu_quota(Path(cgroup_root), Path(proc_cgroup))
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, count)


def cgroup_cpu_quota(root: Path, proc_cgroup: Path) -> float | None:
    """The CPUs this process's cgroup allows (quota / period), or None: no quota, or none
    readable. Its own group's file first, then the mount's root (a container's cgroup
    namespace shows its group as ``/``)."""
    for line in _read(proc_cgroup).splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        group = path.lstrip("/")
        if hierarchy == "0" and controllers == "":  # cgroup v2: one unified tree
            for folder in (root / group, root):
                quota = _v2(_read(folder / "cpu.max"))
                if quota is not None:
                    return quota
        elif "cpu" in controllers.split(","):  # cgroup v1: the cpu controller's own tree
            for mount in (root / controllers, root / "cpu"):
                for folder in (mount / group, mount):
                    quota = _v1(_read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us"))
                    if quota is not None:
                        return quota
    return None


def _v2(text: str) -> float | None:
    """``cpu.max``: "QUOTA PERIOD", QUOTA "max" when there is none."""
    fields = text.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    return _ratio(fields[0], fields[1])


def _v1(quota: str, period: str) -> float | None:
    """``cpu.cfs_quota_us`` (-1: none) over ``cpu.cfs_period_us``."""
    return _ratio(quota.strip(), period.strip())


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""
