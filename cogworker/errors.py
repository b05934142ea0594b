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


class Fenced(CogworkerError):
    """This process was declared dead: its beat stopped changing for ``orphan_threshold``
    (a freeze, a partition) and its in-progress list was requeued elsewhere. Redis refuses
    everything it asks from then on; it must drop what it owes and leave."""

    def __init__(self, identity: str) -> None:
        super().__init__(f"process {identity} was declared dead and its jobs requeued elsewhere (fenced)")
        self.identity = identity


class NotFound(CogworkerError, LookupError):
    """An operator asked for a job, queue or process that isn't there."""


class WrongType(CogworkerError):
    """A key cogworker reads holds another Redis type than the one it should (written by
    something else): nothing was changed."""
