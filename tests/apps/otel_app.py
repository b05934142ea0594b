"""An app that sets an OpenTelemetry tracer provider at import, as an app would, with the
SDK's in-memory exporter. Each span exported is also appended, as JSON, to a file of its
process in $COGWORKER_TEST_SPANS, so a test sees the spans of a real prefork master and
its children (forked after this import: the simple processor exports synchronously, so
nothing of it needs a thread across the fork)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cogworker


class MirroredInMemoryExporter(InMemorySpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        folder = os.environ.get("COGWORKER_TEST_SPANS")
        if folder:
            with open(os.path.join(folder, f"spans-{os.getpid()}.jsonl"), "a") as out:
                for span in spans:
                    out.write(json.dumps(json.loads(span.to_json())) + "\n")
        return result


exporter = MirroredInMemoryExporter()
if os.environ.get("COGWORKER_TEST_SPANS"):  # only in the worker: the test sets its own provider
    provider = TracerProvider()
    if os.environ.get("COGWORKER_TEST_SPANS_BATCHED"):  # held for a minute: exported only by a flush
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

failed_once: set[str] = set()


@cogworker.job
def hello(name: str) -> str:
    with trace.get_tracer("otel_app").start_as_current_span("inside hello"):
        return f"hello {name}"


@cogworker.job
def chain(name: str) -> None:
    hello.enqueue(name)  # a child enqueue: its PRODUCER span is a child of this job's CONSUMER span


@cogworker.job(retry=2, backoff=lambda count, error: 0)
def flaky(marker: str) -> None:
    """Fails on its first run (the marker file doesn't exist yet), succeeds on the retry."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise ValueError("first try fails")


cogworker.periodic("* * * * * *", hello, args=("cron",), name="otel-every-second")
