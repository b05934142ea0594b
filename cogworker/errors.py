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


class JobFailed(CogworkerError):
    """``result()`` of a job that ended dead (or a chain, group or chord one of whose jobs
    did): ``jid`` (the job that died), ``error_class``, ``error_message``, ``traceback``."""

    def __init__(self, jid: str, error_class: str, error_message: str, traceback: str | None = None,
                 job_class: str | None = None, of: str | None = None) -> None:
        what = f"{job_class} jid={jid}" if job_class else f"jid={jid}"
        where = f" (in {of})" if of and of != jid else ""
        super().__init__(f"{what}{where} ended dead: {error_class}: {error_message}")
        self.jid = jid
        self.error_class = error_class
        self.error_message = error_message
        self.traceback = traceback
        self.job_class = job_class


class ResultTimeout(CogworkerError, TimeoutError):
    """``result()`` found no result within its timeout: not finished yet, or not a job
    that keeps one (``results=True``), or kept so long ago it is gone."""


class ResultExpired(CogworkerError, LookupError):
    """``result()`` of a job whose result was kept but outlived its ``result_ttl``."""
