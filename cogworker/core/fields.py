"""What each field of a job's payload may hold (docs/architecture.md#payload), checked
where a worker reads the payload (``payload.parse_payload``), before the job's body runs.

A payload is anyone's JSON: another client, an old version, a hand-edited entry, a forged
one. Every field a worker, a script or a hook later reads is checked here, once: a job with
a field it can't read goes to dead with one line saying which field and why, its body never
run, instead of raising later, mid-settlement, where the error would stop the process (and
a prefork master would re-run the job, up to the poison rule, as a ``ProcessDied``).

A leaf: only the naming rule imported. Each check returns why the value is refused, or "".
"""

from __future__ import annotations

import math
from typing import Any

from ..names import QUEUE_NAME_MAX, problem

# The longest time a payload may carry (a timeout, a lock's or a result's TTL), in seconds:
# ten years. Longer is no longer a duration (a timer past this overflows the platform's, and
# a key kept longer is kept forever).
MAX_SECONDS = 10 * 365 * 24 * 3600
# The largest count a payload may carry (a retry count, an index): a double's exact integers,
# as Lua reads them, and small enough that the default backoff (count**4) is still a float.
MAX_COUNT = 2**53
MAX_CHAIN = 10_000
MAX_MOMENT = (
    10**11
)  # epoch seconds: the year 5138  # steps after a job in its chain (a nesting-limited payload can't hold more anyway)
UNIQUE_UNTIL = ("success", "start")


def _shown(value: Any) -> str:
    """The value in an error line: a number or a short string as it is, else its type (an
    argument's value never: it may be a secret)."""
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)[:40]
    if isinstance(value, str) and len(value) <= 40:
        return repr(value)
    return f"a {type(value).__name__}"


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    """A number a float can hold (an int of 400 digits can't: ``float()`` overflows)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else abs(value) <= MAX_MOMENT


def count(name: str, value: Any) -> str:
    """A counter (``retry_count``, ``wf.i``): a whole number, 0 to MAX_COUNT."""
    if _whole(value) and 0 <= value <= MAX_COUNT:
        return ""
    return f"'{name}' must be a whole number >= 0 and at most 2**53, got {_shown(value)}"


def seconds(name: str, value: Any) -> str:
    """A duration (``timeout``, ``unique_for``, ``wf.ttl``): more than 0, at most MAX_SECONDS."""
    if _finite(value) and 0 < value <= MAX_SECONDS:
        return ""
    return f"'{name}' must be a number of seconds above 0 and at most {MAX_SECONDS}, got {_shown(value)}"


def moment(name: str, value: Any) -> str:
    """An epoch time (``created_at``, ``enqueued_at``, ``at``): a number, at most MAX_MOMENT either way."""
    if _finite(value) and abs(value) <= MAX_MOMENT:
        return ""
    return f"'{name}' must be a time (epoch seconds), got {_shown(value)}"


def text(name: str, value: Any) -> str:
    """An id (``wf.g``, ``wf.b``, ``unique_digest``): a non-empty string."""
    return "" if isinstance(value, str) and value else f"'{name}' must be a non-empty string, got {_shown(value)}"


def retry(name: str, value: Any) -> str:
    """How many retries: true, false or a whole number up to MAX_COUNT (below 0: none)."""
    if isinstance(value, int) and value <= MAX_COUNT:
        return ""
    return f"'{name}' must be a whole number (at most 2**53) or true/false, got {_shown(value)}"


def args_kwargs(where: str, job: dict[str, Any]) -> str:
    """``args`` a list and ``kwargs`` an object, or absent (none)."""
    args, kwargs = job.get("args"), job.get("kwargs")
    if args is not None and not isinstance(args, list):
        return f"'{where}args' must be a list, got {_shown(args)}"
    if kwargs is not None and not isinstance(kwargs, dict):
        return f"'{where}kwargs' must be an object, got {_shown(kwargs)}"
    return ""


# The optional fields of a job, each with its check (absent or null: not checked).
_OPTIONAL = (
    ("retry", retry),
    ("retry_count", count),
    ("interrupted_count", count),
    ("iter_done", count),
    ("timeout", seconds),
    ("unique_for", seconds),
    ("unique_digest", text),
    ("periodic_pjid", text),
    ("periodic_slot", moment),
    ("created_at", moment),
    ("enqueued_at", moment),
    ("at", moment),
    ("expires_at", moment),
    ("retries_requested", count),
)


# The fields of a payload as ``payload.build_payload`` makes one without options: the
# common case, checked inline (half the time of the general walk below, per job).
_PLAIN = frozenset(("class", "args", "kwargs", "jid", "queue", "retry", "created_at", "enqueued_at"))
_PLAIN_SIZE = len(_PLAIN)
# The bounds of a moment as floats, made once: a float compared with an int takes C's long way.
_EARLIEST, _LATEST = -float(MAX_MOMENT), float(MAX_MOMENT)


def job_problem(payload: dict[str, Any]) -> str:
    """Why a job object (its ``class`` and ``jid`` already checked) can't be run, or "".
    Per job: a plain payload costs six look-ups and type checks, no call."""
    get = payload.get
    retries, created, enqueued = get("retry"), get("created_at"), get("enqueued_at")
    if (
        # Its fields are ``_PLAIN``, no other: ``class`` and ``jid`` are there (the caller
        # checked them) and so are the six below (none is None), so the count says the rest.
        len(payload) == _PLAIN_SIZE
        and type(get("args")) is list
        and type(get("kwargs")) is dict
        and type(get("queue")) is str
        and type(retries) is int
        and 0 <= retries <= MAX_COUNT
        # A float compared with the bounds: False for NaN and the infinities too.
        and type(created) is float
        and _EARLIEST <= created <= _LATEST
        and type(enqueued) is float
        and _EARLIEST <= enqueued <= _LATEST
    ):
        return ""
    return _walk(payload)


def _walk(payload: dict[str, Any]) -> str:
    """``job_problem`` for any payload: each field a worker reads, checked in turn."""
    why = args_kwargs("", payload)
    if why:
        return why
    queue = payload.get("queue")
    if queue is not None and not isinstance(queue, str):
        return f"'queue' must be a string, got {_shown(queue)}"
    for name, check in _OPTIONAL:
        value = payload.get(name)
        if value is not None:
            why = check(name, value)
            if why:
                return why
    until = payload.get("unique_until")
    if until is not None and until not in UNIQUE_UNTIL:
        return f"'unique_until' must be one of {UNIQUE_UNTIL}, got {_shown(until)}"
    wf = payload.get("wf")
    return "" if wf is None else wf_problem(wf)


def wf_problem(wf: Any) -> str:
    """Why a job's ``wf`` (docs/architecture.md#workflows) can't be settled, or ""."""
    if not isinstance(wf, dict):
        return f"'wf' must be an object, got {_shown(wf)}"
    for name, check in (("ttl", seconds), ("lttl", seconds), ("g", text), ("b", text), ("last", text)):
        value = wf.get(name)
        if value is not None:
            why = check(f"wf.{name}", value)
            if why:
                return why
    if wf.get("g") is not None or wf.get("i") is not None:
        why = count("wf.i", wf.get("i"))  # a member's index: required with its group
        if why:
            return why
    chain = wf.get("chain")
    if chain is None:
        return ""
    if not isinstance(chain, list) or len(chain) > MAX_CHAIN:
        return f"'wf.chain' must be a list of at most {MAX_CHAIN} steps, got {_shown(chain)}"
    for n, step in enumerate(chain):
        why = step_problem(f"wf.chain[{n}].", step)
        if why:
            return why
    return ""


def step_problem(where: str, step: Any) -> str:
    """Why a chain's step can't be pushed as a job (``workflow.job_payload``), or ""."""
    if not isinstance(step, dict):
        return f"'{where[:-1]}' must be an object (a step), got {_shown(step)}"
    for name in ("class", "jid"):
        if not isinstance(step.get(name), str) or not step[name]:
            return f"'{where}{name}' must be a non-empty string, got {_shown(step.get(name))}"
    queue = step.get("queue")
    if queue is not None and queue != "" and problem(queue, QUEUE_NAME_MAX):
        return f"'{where}queue' {problem(queue, QUEUE_NAME_MAX)}"
    why = args_kwargs(where, step)
    for name, check in (("retry", retry), ("timeout", seconds), ("ttl", seconds)):
        value = step.get(name)
        if not why and value is not None:
            why = check(where + name, value)
    return why
