"""The one way to read and change the system's state (job status and history here)."""

from __future__ import annotations

from .status import Attempt, JobStatus, history, status

__all__ = ["Attempt", "JobStatus", "history", "status"]
