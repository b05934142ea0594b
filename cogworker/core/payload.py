"""The job payload: building, encoding and parsing the job JSON, jids, job options and
their validation, the failure fields and the default backoff.

A leaf: it imports nothing of cogworker but the errors, the naming rule and the JSON
nesting limit, so the
client, the fate of a job and the cron ticker can all build or read a payload without
importing ``jobs``.
"""

from __future__ import annotations

import inspect
import json
import json.encoder as json_encoder
import math
import os
import random
import sysconfig
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from os import urandom
from types import TracebackType
from typing import Any, Literal, TypedDict

from ..boundedjson import MAX_DEPTH, TooDeep, check_depth, shallow
from ..boundedjson import loads as json_loads
from ..errors import ConfigurationError
from ..names import check_queue_name
from .fields import MAX_SECONDS, UNIQUE_UNTIL, job_problem
from .limits import Limit, check_limits

BackoffFn = Callable[[int, BaseException], float]


def default_backoff(count: int, error: BaseException | None = None) -> float:
    """Sidekiq's: count**4 + 15 + random(10 * (count + 1)) seconds."""
    return count**4 + 15 + random.randrange(10 * (count + 1))


def new_jid() -> str:
    return urandom(12).hex()  # secrets.token_hex(12), without its call


def error_class_name(error: BaseException | type) -> str:
    """Qualified name, without the module for builtins: ``ValueError``, ``app.errors.Declined``."""
    cls = error if isinstance(error, type) else type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    module = cls.__module__
    if module.startswith("cogworker."):
        module = "cogworker"  # the public name: cogworker.ProcessDied, cogworker.JobTimeout
    return f"{module}.{cls.__qualname__}"


# The frames that call a job are no part of its story: cogworker's own source files, and
# the standard library's between them and the job (asyncio running an async job).
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})


def _calls_the_job(filename: str) -> bool:
    if filename.startswith(_OURS):
        return True
    return filename.startswith(_STDLIB) and "-packages" + os.sep not in filename  # an app installed there is not


def from_the_job(tb: TracebackType) -> TracebackType:
    """The traceback from its first frame that isn't cogworker's or the standard
    library's (the job's own, or a server middleware's): the loop, the executor, asyncio
    and the middleware chain that called it are left out. Whole when there is no such
    frame (an error of cogworker's own)."""
    first: TracebackType | None = tb
    while first is not None and _calls_the_job(first.tb_frame.f_code.co_filename):
        first = first.tb_next
    return first if first is not None else tb


def error_traceback(error: BaseException, lines: int = 30) -> str | None:
    """The exception's traceback as text, at most ``lines`` lines: the header, then the
    frames from the job's own on (``from_the_job``) and the exception line (where it went
    wrong), the innermost kept when it is cut. None without one."""
    if error.__traceback__ is None or lines <= 0:
        return None
    try:
        text = "".join(traceback.format_exception(type(error), error, from_the_job(error.__traceback__)))
    except Exception:  # a __str__ or a frame that can't be shown must not break failure handling
        return None
    rows = text.rstrip("\n").split("\n")
    if len(rows) > lines:
        cut = len(rows) - lines + 2
        rows = [rows[0], f"  ... ({cut} lines cut)"] + rows[-(lines - 2) :] if lines > 2 else rows[-lines:]
    return "\n".join(rows)


def error_message(error: BaseException) -> str:
    try:
        return str(error)[:10_000]
    except Exception:  # a __str__ that raises must not break failure handling
        return f"<unprintable {type(error).__name__}>"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class PlainOptionArgs(TypedDict, total=False):
    """The options but ``unique_for``: the job handles' overloads take that one apart, as
    it decides whether ``enqueue`` may return None (``client/jobs.py``)."""

    queue: str
    retry: int | bool
    timeout: float | None
    unique_until: Literal["success", "start"]
    backoff: BackoffFn | None
    results: bool
    result_ttl: int | None
    limits: Sequence[Limit] | None
    priority: int
    expires: float | None
    retry_on: type[BaseException] | Sequence[type[BaseException]]
    no_retry_on: type[BaseException] | Sequence[type[BaseException]]


class OptionArgs(PlainOptionArgs, total=False):
    """The options as keyword arguments (``@job(...)``, ``.options(...)``), for type
    checkers: a misspelt or mistyped option is an error there as well as at run time."""

    unique_for: float | None


@dataclass(frozen=True)
class JobOptions:
    queue: str = "default"
    retry: int = 25
    timeout: float | None = None
    unique_for: float | None = None
    unique_until: str = "success"
    backoff: BackoffFn | None = None
    results: bool = False  # keep the return value (docs/architecture.md#workflows)
    result_ttl: int | None = None  # seconds; None: Config.result_ttl
    # Fleet-wide rate limits, checked by the worker before the job starts (core/limits.py);
    # not in the payload.
    limits: tuple[Limit, ...] = ()
    # Higher is fetched sooner among the jobs waiting on its queue (keys.level).
    priority: int = 0
    # Which errors are retried (the rest go straight to dead): with ``retry_on``, only those
    # (and subclasses); ``no_retry_on`` never. Held by the worker's definition, not in the payload.
    retry_on: tuple[type[BaseException], ...] = ()
    no_retry_on: tuple[type[BaseException], ...] = ()
    # Seconds from its enqueue (a scheduled job's too) after which a job still waiting is
    # not run but recorded as expired; the payload carries the moment (``expires_at``).
    expires: float | None = None

    @classmethod
    def build(cls, base: JobOptions | None = None, **given: Any) -> JobOptions:
        fields = set(cls.__dataclass_fields__)
        unknown = set(given) - fields
        if unknown:
            raise ConfigurationError(f"unknown job option(s) {sorted(unknown)}; known: {sorted(fields)}")
        if "retry" in given:
            given["retry"] = normalize_retry(given["retry"])
        if "limits" in given:
            given["limits"] = check_limits(given["limits"])
        for name in ("retry_on", "no_retry_on"):
            if name in given:
                given[name] = error_classes(name, given[name])
        opts = replace(base or cls(), **given)
        opts.validate()
        return opts

    def validate(self) -> None:
        check_queue_name(self.queue)
        check_priority(self.priority)
        # At most MAX_SECONDS, as a worker reads them (fields.py): else refused there, in dead.
        if self.timeout is not None and not (is_number(self.timeout) and 0 < self.timeout <= MAX_SECONDS):
            raise ConfigurationError(
                f"timeout must be a positive number of seconds, at most {MAX_SECONDS}; got {self.timeout!r}"
            )
        if self.unique_for is not None and not (is_number(self.unique_for) and 1 <= self.unique_for <= MAX_SECONDS):
            raise ConfigurationError(
                f"unique_for must be at least 1 second and at most {MAX_SECONDS}; got {self.unique_for!r}"
            )
        if self.expires is not None and not (is_number(self.expires) and 0 < self.expires <= MAX_SECONDS):
            raise ConfigurationError(
                f"expires must be a positive number of seconds, at most {MAX_SECONDS}; got {self.expires!r}"
            )
        if self.unique_until not in UNIQUE_UNTIL:
            raise ConfigurationError(f"unique_until must be one of {UNIQUE_UNTIL}, got {self.unique_until!r}")
        if not isinstance(self.results, bool):
            raise ConfigurationError(f"results must be True or False, got {self.results!r}")
        if self.result_ttl is not None and (
            isinstance(self.result_ttl, bool)
            or not isinstance(self.result_ttl, int)
            or not 1 <= self.result_ttl <= MAX_SECONDS
        ):
            raise ConfigurationError(
                f"result_ttl must be a whole number of seconds, at least 1 and at most {MAX_SECONDS}; "
                f"got {self.result_ttl!r}"
            )
        if self.backoff is not None and not callable(self.backoff):
            raise ConfigurationError("backoff must be a callable (count, error) -> seconds")


def error_classes(name: str, value: Any) -> tuple[type[BaseException], ...]:
    """``retry_on``/``no_retry_on`` as a tuple of exception classes: one class, or a
    tuple or list of them; anything else is a one-line ``ConfigurationError``."""
    given = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    for cls in given:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise ConfigurationError(
                f"{name} must be an exception class or a tuple of them (e.g. (ValueError, KeyError)); got {cls!r}"
            )
    return given


PRIORITY_MIN, PRIORITY_MAX = -100, 100


def check_priority(priority: Any) -> int:
    """A job's priority: a whole number from -100 to 100 (Django's range)."""
    if isinstance(priority, bool) or not isinstance(priority, int) or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ConfigurationError(
            f"priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}, got {priority!r}"
        )
    return priority


def priority_of(payload: dict[str, Any]) -> int:
    """The priority a payload carries: 0 when none, or one that breaks the rule (written
    by another client: it waits on the queue itself rather than nowhere)."""
    p = payload.get("priority", 0)
    return p if type(p) is int and PRIORITY_MIN <= p <= PRIORITY_MAX else 0


def normalize_retry(retry: Any) -> int:
    if retry is False:
        return 0
    if retry is True:
        return 25
    if isinstance(retry, int) and retry >= 0:
        return retry
    raise ConfigurationError(f"retry must be an int >= 0 or False, got {retry!r}")


# Built once: json.dumps with options builds an encoder per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _c_encoder() -> Callable[[Any], str] | None:
    """The C encoder under ``_ENCODER``, made once: ``encode`` makes one per call (with a
    dict to catch circular references), a third of a small payload's encoding time. None
    where there is no C encoder or it doesn't encode as ``_ENCODER`` does (checked here)."""
    make = getattr(json_encoder, "c_make_encoder", None)
    strings = getattr(json_encoder, "c_encode_basestring", None)
    if make is None or strings is None:
        return None
    sample = {"a": [1, 2.5, "é\n", None, True, {"b": -0.0}], "c": {}}
    try:
        # markers=None: no circular-reference check (a cycle raises RecursionError instead).
        chunks = make(None, _ENCODER.default, strings, None, ":", ",", False, False, False)

        def encode(value: Any) -> str:
            return "".join(chunks(value, 0))

        same = encode(sample) == _ENCODER.encode(sample)
    except Exception:  # another Python's C encoder, made or called differently
        return None
    try:
        encode(float("nan"))
    except ValueError:
        return encode if same else None  # and it refuses NaN, as allow_nan=False does
    return None


_encode = _c_encoder() or _ENCODER.encode


def dumps(value: Any) -> str:
    """Compact JSON; refuses anything JSON can't carry, or nested deeper than a worker
    reads (``boundedjson.MAX_DEPTH``), with a TypeError (nothing written)."""
    try:
        text = _encode(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"job arguments must be JSON-serializable: {exc}") from None
    except RecursionError:
        raise TypeError(f"{_TOO_DEEP} (or they are circular)") from None
    try:
        check_depth(text)
    except TooDeep:
        raise TypeError(_TOO_DEEP) from None
    return text


_TOO_DEEP = (
    f"job arguments are nested too deep: a payload nests at most {MAX_DEPTH} levels of lists and "
    "objects (the job and its args list are two of them)"
)


def signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):  # some builtins have none: their arguments go unchecked
        return None


def bind_arguments(name: str, signature: inspect.Signature | None, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """TypeError now, in the caller, for arguments the function can't take: a job
    enqueued with them would only fail later, in a worker, and retry for weeks."""
    if signature is None:
        return
    # Whether arguments bind depends only on how many are positional and the keywords'
    # names, never on their values: checked once per shape (a failure is not kept).
    shape = (id(signature), len(args), tuple(kwargs))
    if _bound.get(shape) is signature:
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{name}{signature} can't take these arguments: {exc}") from None
    if len(_bound) < 4096:
        _bound[shape] = signature  # kept alive with it, so its id is never reused meanwhile


_bound: dict[tuple[int, int, tuple[str, ...]], inspect.Signature] = {}


def build_payload(
    name: str, args: Sequence[Any], kwargs: dict[str, Any], opts: JobOptions, now: float | None = None
) -> dict[str, Any]:
    now = time.time() if now is None else now
    payload: dict[str, Any] = {
        "class": name,
        "args": list(args),
        "kwargs": dict(kwargs),
        "jid": new_jid(),
        "queue": opts.queue,
        "retry": opts.retry,
        "created_at": now,
        "enqueued_at": now,
    }
    if opts.timeout is not None:
        payload["timeout"] = opts.timeout
    if opts.expires is not None:
        payload["expires_at"] = now + opts.expires  # from the enqueue, even of a scheduled job
    if opts.unique_for is not None:
        payload["unique_for"] = opts.unique_for
        payload["unique_until"] = opts.unique_until
    if opts.results:
        payload["wf"] = {"ttl": result_ttl(opts)}
    if opts.priority:  # absent at 0: a plain job's payload is as it was
        payload["priority"] = opts.priority
    return payload


def result_ttl(opts: JobOptions) -> int:
    """How long a result of a job of these options is kept: its own, or the config's."""
    if opts.result_ttl is not None:
        return opts.result_ttl
    from ..config import get_config  # the config of the enqueuing process

    return get_config().result_ttl


def to_epoch(when: datetime | float | int) -> float:
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise ValueError("enqueue_at needs a timezone-aware datetime (or epoch seconds)")
        return when.timestamp()
    if is_number(when):
        return float(when)
    raise TypeError(f"enqueue_at takes a datetime or epoch seconds, got {type(when).__name__}")


_decoder = json.JSONDecoder()  # json.loads's own decoder, with its defaults
_decode = _decoder.decode
# What decode runs, minus its whitespace regexes and two Python frames (an instance
# attribute, made by JSONDecoder.__init__, that typeshed doesn't declare).
_scan: Callable[[str, int], tuple[Any, int]] = vars(_decoder)["scan_once"]


def _object(text: str) -> Any:
    """``_decode(text)`` for text starting with "{": the scanner alone when it reads the
    whole text; else (trailing whitespace, extra data, an error) the decoder's own answer."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        end = -1
    return value if end == len(text) else _decode(text)


def parse_payload(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """The job object, or None and why it isn't one: not a JSON object, no class or jid,
    or a field a worker reads that it can't read (``fields.job_problem``)."""
    try:
        check_depth(raw)
        if raw[:1] == b"{" and raw[1:2] != b"\x00":
            # What json.loads does with these bytes (UTF-8 detected, surrogatepass), minus
            # its encoding detection in Python: a payload is parsed per job.
            payload = _object(raw.decode("utf-8", "surrogatepass"))
        else:
            payload = json.loads(raw)
    except UnicodeDecodeError:
        return None, "payload is not UTF-8 text"
    except TooDeep as exc:
        return None, f"payload is {exc}"
    except RecursionError:  # within the limit, but this process's stack is nearly used up
        return None, "payload is nested too deep for this process's stack"
    except ValueError as exc:
        return None, f"payload is not JSON: {exc}"
    if not isinstance(payload, dict):
        return None, f"payload is JSON but not an object (a {type(payload).__name__})"
    if not isinstance(payload.get("class"), str) or not payload["class"]:
        return None, "payload has no 'class' naming the job"
    if not isinstance(payload.get("jid"), str):
        return None, "payload has no 'jid'"
    why = job_problem(payload)
    if why:
        return None, f"bad payload: {why}"
    return payload, ""


def jid_in(raw: bytes | str) -> str | None:
    """The entry's jid if it is readable (a JSON object with a string ``jid``), else None.
    An object nested too deep to decode still names its jid at its top level."""
    try:
        value = json_loads(raw)
    except TooDeep:
        value = shallow(raw)
    except ValueError:
        return None
    return value.get("jid") if isinstance(value, dict) and isinstance(value.get("jid"), str) else None
