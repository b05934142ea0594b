"""OpenTelemetry spans (the ``otel`` extra): one PRODUCER span per enqueue, one CONSUMER
span per execution, linked through a W3C ``traceparent`` that the enqueue writes into the
payload. A retry's execution links to the failed attempt that filed it (the attempt's
``traceparent`` rides in the payload as ``trace_attempt``); a periodic job's enqueue is
made by the ticker that claimed its slot, and carries the entry and slot.

On by itself: when ``opentelemetry`` is importable and the app has set a tracer provider,
with ``Config.tracing`` on (``configure(tracing=False)`` turns it off). Without the
package, ``ON`` is False, and the enqueue and the job pay one check of it each.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..config import Config, get_config
from .payload import error_class_name

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the extra isn't installed: nothing here is used
    ON = False
else:
    ON = True
    _propagator = TraceContextTextMapPropagator()  # W3C, whatever the app's global propagator

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

# Payload fields: the enqueue's context (W3C trace context), and the last failed attempt's.
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
ATTEMPT = "trace_attempt"
# A provider named in the environment, which the API's getter makes on first use.
_NAMED_IN_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ

# The provider the tracer came from, and the tracer: the provider itself is the key, held
# here (an id alone could name a new provider made at a freed one's address, and hand out
# the old one's tracer, whose spans go nowhere).
_tracer: tuple[Any, Tracer] | None = None


def active(config: Config | None = None) -> bool:
    """Whether to trace now: the package, ``Config.tracing``, and a real tracer provider
    set by the app (the API's default proxy and no-op providers record nothing)."""
    if not ON:
        return False
    if _set is None and not _NAMED_IN_ENV and getattr(trace, "_TRACER_PROVIDER", False) is None:
        return False  # no provider set yet (``_provider``'s first test): no config read, asked per job
    if not (config or get_config()).tracing:
        return False
    return _provider() is not None


_set: Any = None  # the app's provider once seen: the API lets it be set only once


def _provider() -> Any:
    global _set
    if _set is None:
        # Until the app sets one: the API's global, read directly when it has it (its
        # getter reads os.environ per call, a microsecond per job); else the getter.
        if getattr(trace, "_TRACER_PROVIDER", False) is None and not _NAMED_IN_ENV:
            return None
        found = trace.get_tracer_provider()
        if not isinstance(found, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            _set = found
    return _set


def tracer() -> Tracer:
    global _tracer
    provider = trace.get_tracer_provider()
    if _tracer is None or _tracer[0] is not provider:
        from ..version import __version__

        _tracer = (provider, provider.get_tracer("cogworker", __version__))
    return _tracer[1]


def job_attributes(payload: dict[str, Any], queue: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": "cogworker",
        "messaging.destination.name": str(queue or payload.get("queue") or ""),
        "messaging.message.id": str(payload.get("jid", "")),
        "cogworker.job.class": str(payload.get("class", "")),
    }
    if "periodic_pjid" in payload:
        attributes["cogworker.periodic.name"] = str(payload["periodic_pjid"])
    if "periodic_slot" in payload:
        attributes["cogworker.periodic.slot"] = int(payload["periodic_slot"])
    return attributes


@contextlib.contextmanager
def producing(payload: dict[str, Any], at: float | None) -> Iterator[Span]:
    """A PRODUCER span around an enqueue, current inside; its context goes into the payload."""
    with tracer().start_as_current_span(
        f"enqueue {payload.get('class')}", kind=trace.SpanKind.PRODUCER, attributes=job_attributes(payload, None)
    ) as span:
        if at is not None:
            span.set_attribute("cogworker.job.at", float(at))
        carrier: dict[str, str] = {}
        _propagator.inject(carrier)
        payload.update(carrier)  # traceparent (and tracestate when there is one)
        yield span


def written(span: Span, jid: str | None) -> str | None:
    span.set_attribute("cogworker.enqueue.outcome", "written" if jid is not None else "dropped")
    return jid


def _links(payload: dict[str, Any]) -> list[Any]:
    previous = payload.get(ATTEMPT)
    if not isinstance(previous, str):
        return []
    found = trace.get_current_span(_propagator.extract({TRACEPARENT: previous})).get_span_context()
    return [trace.Link(found, {"cogworker.link": "previous_attempt"})] if found.is_valid else []


def consume(payload: dict[str, Any], queue: str, run: Callable[[], BaseException | None]) -> BaseException | None:
    """``run()`` (one execution; returns the job's error or None) in a CONSUMER span, a
    child of the enqueue's context, linked to the failed attempt before it."""
    carrier = {k: payload[k] for k in (TRACEPARENT, TRACESTATE) if isinstance(payload.get(k), str)}
    parent = _propagator.extract(carrier) if carrier else otel_context.Context()  # a new trace without one
    attributes = job_attributes(payload, queue)
    attributes["cogworker.job.attempt"] = int(payload.get("retry_count") or 0) + 1
    with tracer().start_as_current_span(
        f"run {payload.get('class')}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=_links(payload),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            error = run()
        except BaseException as stop:  # a stop-now abandoning the job: handed back, not failed
            span.set_attribute("cogworker.job.outcome", "interrupted")
            span.record_exception(stop)
            raise
        _outcome(span, payload, error)
        return error


def _outcome(span: Span, payload: dict[str, Any], error: BaseException | None) -> None:
    if error is None:
        span.set_attribute("cogworker.job.outcome", "succeeded")
        return
    span.set_attribute("cogworker.job.outcome", "failed")
    span.set_attribute("error.type", error_class_name(error))
    span.record_exception(error)
    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{error_class_name(error)}: {error}"[:500]))
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, trace.set_span_in_context(span))
    if TRACEPARENT in carrier:  # the retry that this failure files links back to this attempt
        payload[ATTEMPT] = carrier[TRACEPARENT]


def flush(timeout: float = 5.0) -> None:
    """Export what the app's span processors still hold (a prefork child, before its
    ``os._exit``, which runs no atexit); at most ``timeout`` seconds, never raising."""
    provider = _set if ON else None
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is None:
        return
    try:
        force_flush(int(timeout * 1000))
    except Exception:  # an exporter's failure must not change how the process exits
        pass
