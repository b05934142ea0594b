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
import random
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from os import urandom
from typing import Any, Literal, TypedDict

from ..boundedjson import MAX_DEPTH, TooDeep, check_depth, shallow
from ..boundedjson import loads as json_loads
from ..errors import ConfigurationError
from ..names import check_queue_name
from .limits import Limit, check_limits

UNIQUE_UNTIL = ("success", "start")
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


def error_traceback(error: BaseException, lines: int = 30) -> str | None:
    """The exception's traceback as text, at most ``lines`` lines: the header, then the
    innermost frames and the exception line (where it went wrong). None without one."""
    if error.__traceback__ is None or lines <= 0:
        return None
    try:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except Exception:  # a __str__ or a frame that can't be shown must not break failure handling
        return None
    rows = text.rstrip("\n").split("\n")
    if len(rows) > lines:
        cut = len(rows) - lines + 2
        rows = [rows[0], f"  ... ({cut} lines cut)"] + rows[-(lines - 2):] if lines > 2 else rows[-lines:]
    return "\n".join(rows)


def error_message(error: BaseException) -> str:
    try:
        return str(error)[:10_000]
    except Exception:  # a __str__ that raises must not break failure handling
        return f"<unprintable {type(error).__name__}>"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class OptionArgs(TypedDict, total=False):
    """The options as keyword arguments (``@job(...)``, ``.options(...)``), for type
    checkers: a misspelt or mistyped option is an error there as well as at run time."""

    queue: str
    retry: int | bool
    timeout: float | None
    unique_for: float | None
    unique_until: Literal["success", "start"]
    backoff: BackoffFn | None
    results: bool
    result_ttl: int | None
    limits: Sequence[Limit] | None


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
        opts = replace(base or cls(), **given)
        opts.validate()
        return opts

    def validate(self) -> None:
        check_queue_name(self.queue)
        if self.timeout is not None and not (is_number(self.timeout) and self.timeout > 0):
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if self.unique_for is not None and not (is_number(self.unique_for) and self.unique_for >= 1):
            raise ConfigurationError(f"unique_for must be at least 1 second, got {self.unique_for!r}")
        if self.unique_until not in UNIQUE_UNTIL:
            raise ConfigurationError(f"unique_until must be one of {UNIQUE_UNTIL}, got {self.unique_until!r}")
        if not isinstance(self.results, bool):
            raise ConfigurationError(f"results must be True or False, got {self.results!r}")
        if self.result_ttl is not None and (isinstance(self.result_ttl, bool) or not isinstance(self.result_ttl, int)
                                            or self.result_ttl < 1):
            raise ConfigurationError(f"result_ttl must be a whole number of seconds, at least 1; "
                                     f"got {self.result_ttl!r}")
        if self.backoff is not None and not callable(self.backoff):
            raise ConfigurationError("backoff must be a callable (count, error) -> seconds")


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


_TOO_DEEP = (f"job arguments are nested too deep: a payload nests at most {MAX_DEPTH} levels of lists and "
             "objects (the job and its args list are two of them)")


def signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):  # some builtins have none: their arguments go unchecked
        return None


def bind_arguments(name: str, signature: inspect.Signature | None, args: Sequence[Any],
                   kwargs: dict[str, Any]) -> None:
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


def build_payload(name: str, args: Sequence[Any], kwargs: dict[str, Any], opts: JobOptions,
                  now: float | None = None) -> dict[str, Any]:
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
    if opts.unique_for is not None:
        payload["unique_for"] = opts.unique_for
        payload["unique_until"] = opts.unique_until
    if opts.results:
        payload["wf"] = {"ttl": result_ttl(opts)}
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
    """The job object, or None and why it isn't one."""
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
