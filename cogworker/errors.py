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

    def __init__(
        self,
        jid: str,
        error_class: str,
        error_message: str,
        traceback: str | None = None,
        job_class: str | None = None,
        of: str | None = None,
    ) -> None:
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


class BatchNotClosed(CogworkerError, ConnectionError):
    """The end of a ``with cogworker.batch(...)`` block could not close batch ``bid``:
    Redis did not answer for the whole retry budget. Its jobs run; its callbacks fire
    once it is closed, by ``cogworker.api.close_batch(bid)`` or ``cogworker batch BID
    --close``."""

    def __init__(self, bid: str, seconds: float, cause: BaseException) -> None:
        super().__init__(
            f"batch {bid} was not closed: Redis did not answer for {seconds:.0f} s "
            f"({type(cause).__name__}: {cause}); its jobs run, but its callbacks fire only once it is "
            f"closed: cogworker.api.close_batch({bid!r}) or `cogworker batch {bid} --close`"
        )
        self.bid = bid


class EnqueueDropped(CogworkerError):
    """A client middleware dropped the push of a job that isn't unique: its ``enqueue``
    returns a jid or raises this (only a unique job's enqueue returns None)."""


class RedisUnavailable(CogworkerError, ConnectionError):
    """An enqueue found Redis unreachable: one line naming the job and the server (its
    password hidden). A ``ConnectionError`` (the built-in; the one raised is also
    redis-py's), so code that caught the bare redis-py error keeps catching it."""


class Retry(CogworkerError):
    """Raised inside a job to run it again later: ``in_`` seconds from now. Not counted
    as a failure (``retry_count`` unchanged, no failure stats) unless ``count=True``; a
    job may ask this way at most ``MAX_REQUESTED`` times, then it is dead."""

    MAX_REQUESTED = 1000

    def __init__(self, in_: float = 0, count: bool = False) -> None:
        if isinstance(in_, bool) or not isinstance(in_, (int, float)) or not 0 <= in_ <= 100 * 365 * 86400:
            raise ConfigurationError(f"Retry(in_=...) must be a number of seconds, at least 0; got {in_!r}")
        super().__init__(f"retry requested in {in_:g}s")
        self.in_ = float(in_)
        self.count = bool(count)


class Shutdown(CogworkerError):
    """Raised inside a job still running at its process's shutdown deadline, a short grace
    before the process is killed: its ``finally:`` blocks run; the job runs again (an
    interruption, not a failure)."""
