"""Exceptions that are part of the public API."""


class CogworkerError(Exception):
    """Base class of cogworker's own errors."""


class ConfigurationError(CogworkerError, ValueError):
    """A setting, option or command-line value is invalid."""


class RedisVersionError(CogworkerError):
    """The Redis server is too old for reliable fetch (LMOVE/BLMOVE, LPOS need 6.2)."""


class JobTimeout(CogworkerError):
    """Raised inside a job that ran past its ``timeout``."""


class ProcessDied(CogworkerError):
    """Recorded for a job whose process died under it too often (``max_orphanings``)."""


class UnknownJob(CogworkerError):
    """The payload names a job that is not registered (nor under ``import_prefixes``)."""


class BadPayload(CogworkerError):
    """A queue entry that is not a job object (not JSON, not an object, no ``class``)."""
