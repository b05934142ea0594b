"""cogworker: Redis-backed background jobs with a prefork worker that never loses a job.

Public API only; see DESIGN §1 and the README.
"""

from __future__ import annotations

from .client import enqueue, enqueue_at
from .config import Config, configure, get_config
from .cron import disable, enable, periodic
from .errors import (
    BadPayload,
    CogworkerError,
    ConfigurationError,
    JobTimeout,
    ProcessDied,
    RedisVersionError,
    UnknownJob,
)
from .jobs import BoundJob, Job, JobOptions, job
from .middleware import client_middleware, server_middleware

__version__ = "0.5.0"

__all__ = [
    "BadPayload",
    "BoundJob",
    "CogworkerError",
    "Config",
    "ConfigurationError",
    "Job",
    "JobOptions",
    "JobTimeout",
    "ProcessDied",
    "RedisVersionError",
    "UnknownJob",
    "client_middleware",
    "configure",
    "disable",
    "enable",
    "enqueue",
    "enqueue_at",
    "get_config",
    "job",
    "periodic",
    "server_middleware",
]
