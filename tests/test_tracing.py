"""OpenTelemetry (cogworker/core/tracing.py, the `otel` extra): PRODUCER spans for enqueues,
CONSUMER spans for executions, linked through the payload's W3C traceparent, exported by
the SDK's in-memory exporter, across a real prefork worker; retries link to the failed
attempt, periodic jobs carry their entry. Off with configure(tracing=False), and off
without a tracer provider."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once
from prefork_harness import wait_for

import cogworker
from cogworker import testing
from cogworker.core import tracing


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """This process's tracer provider, for the test only (the API allows one per process:
    its globals are reset after, so no other test traces)."""
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    trace.set_tracer_provider(provider)
    yield found
    provider.shutdown()
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    tracing._set = None


def spans_in(folder: Path) -> list[dict[str, Any]]:
    found = []
    for path in folder.glob("spans-*.jsonl"):
        pid = int(path.stem.split("-")[1])  # the process that exported it
        found += [{**json.loads(line), "pid": pid} for line in path.read_text().splitlines() if line.strip()]
    return found


def hex_id(value: int, width: int) -> str:
    return f"0x{value:0{width}x}"


def test_off_without_a_provider_and_with_tracing_false(config: cogworker.Config) -> None:
    assert tracing.ON  # the extra is installed in the test venv
    assert not tracing.active()  # but no provider is set: nothing is traced
    from apps import otel_app

    with testing.fake() as fake:
        otel_app.hello.enqueue("x")
    assert "traceparent" not in fake.jobs()[0]


def test_enqueue_and_inline_run_are_linked(config: cogworker.Config, exporter: InMemorySpanExporter) -> None:
    from apps import otel_app

    with testing.fake() as fake:
        jid = otel_app.hello.enqueue("a")
        (payload,) = fake.jobs()
        fake.drain()
    producer, inner, consumer = exporter.get_finished_spans()
    ids = producer.context
    assert payload["traceparent"] == f"00-{ids.trace_id:032x}-{ids.span_id:016x}-{int(ids.trace_flags):02x}"
    assert producer.kind == trace.SpanKind.PRODUCER and producer.name == f"enqueue {otel_app.hello.name}"
    assert consumer.kind == trace.SpanKind.CONSUMER and consumer.parent.span_id == producer.context.span_id
    assert inner.parent.span_id == consumer.context.span_id  # the job's own spans nest in its run
    assert dict(consumer.attributes) == {
        "messaging.system": "cogworker",
        "messaging.destination.name": "default",
        "messaging.message.id": jid,
        "cogworker.job.class": otel_app.hello.name,
        "cogworker.job.attempt": 1,
        "cogworker.job.outcome": "succeeded",
    }
    cogworker.configure(tracing=False)
    exporter.clear()
    with testing.inline():
        otel_app.hello.enqueue("b")
    assert [s.name for s in exporter.get_finished_spans()] == ["inside hello"]


def test_a_failure_is_recorded_and_its_retry_links_back(
    config: cogworker.Config, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    from apps import otel_app

    with testing.fake(retries=True) as fake:
        otel_app.flaky.enqueue(str(tmp_path / "marker"))
        fake.drain()
    _, failed, retried = exporter.get_finished_spans()
    assert failed.attributes["cogworker.job.outcome"] == "failed" and failed.status.status_code.name == "ERROR"
    assert failed.attributes["error.type"] == "ValueError"
    assert [e.name for e in failed.events] == ["exception"]
    assert retried.attributes["cogworker.job.attempt"] == 2
    assert [link.context.span_id for link in retried.links] == [failed.context.span_id]
    assert retried.parent.span_id == failed.parent.span_id  # both runs are children of the one enqueue


def test_each_provider_gets_its_own_tracer_even_at_a_freed_ones_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """Providers made and dropped one after another (as this file's tests do): a new one
    may sit at a freed one's address, and must not be handed the freed one's tracer."""
    monkeypatch.setattr(tracing, "_tracer", None)
    current: list[Any] = [None]  # one getter for all: monkeypatch keeps each value it replaced
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: current[0])
    seen: set[int] = set()
    for _ in range(30):
        current[0] = provider = TracerProvider(shutdown_on_exit=False)  # no atexit hook holds it
        seen.add(id(provider))
        found = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(found))
        with tracing.tracer().start_as_current_span("s"):
            pass
        assert [s.name for s in found.get_finished_spans()] == ["s"]
        provider.shutdown()
        current[0] = None
        del provider, found
        gc.collect()
    assert len(seen) < 30  # an address was used again: the case was met


def _check_the_periodic_run(
    worker_spans: list[dict[str, Any]], by_jid: dict[str, list[dict[str, Any]]], master_pid: int, children: Any
) -> None:
    """The periodic entry: its enqueue made by the master's ticker, with the entry and slot;
    the run, in a child, is the child of that enqueue."""
    ran = next(
        s for s in worker_spans if s["kind"] == "SpanKind.CONSUMER" and "cogworker.periodic.name" in s["attributes"]
    )
    (ticked,) = [s for s in by_jid[ran["attributes"]["messaging.message.id"]] if s["kind"] == "SpanKind.PRODUCER"]
    assert ticked["attributes"]["cogworker.periodic.name"] == "otel-every-second"
    assert isinstance(ticked["attributes"]["cogworker.periodic.slot"], int)
    assert ran["parent_id"] == ticked["context"]["span_id"]
    assert ticked["pid"] == master_pid and ran["pid"] in children  # the master's ticker, a child's run


def test_a_real_prefork_worker_exports_linked_spans(
    masters: Any, own_config: cogworker.Config, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    from apps import otel_app

    master = masters(module="apps.otel_app", procs=2, env={"COGWORKER_TEST_SPANS": str(tmp_path)})
    children = master.wait_children()
    jid_hello = otel_app.hello.enqueue("fleet")
    jid_chain = otel_app.chain.enqueue("nested")
    jid_flaky = otel_app.flaky.enqueue(str(tmp_path / "marker"))

    def exported() -> list[dict[str, Any]] | None:
        found = spans_in(tmp_path)
        names = [s["name"] for s in found]
        ticked = any(s["kind"] == "SpanKind.CONSUMER" and "cogworker.periodic.name" in s["attributes"] for s in found)
        done = names.count(f"run {otel_app.flaky.name}") >= 2 and names.count(f"run {otel_app.hello.name}") >= 3
        return found if done and ticked else None

    worker_spans = wait_for(exported, timeout=60, what="the worker's spans")
    local = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans()}
    by_jid: dict[str, list[dict[str, Any]]] = {}
    for span in worker_spans:
        jid = span["attributes"].get("messaging.message.id")
        if jid:
            by_jid.setdefault(jid, []).append(span)
    # hello: the worker's CONSUMER span is the child of this process's PRODUCER span.
    (run,) = [s for s in by_jid[jid_hello] if s["kind"] == "SpanKind.CONSUMER"]
    producer = local[jid_hello]
    assert run["context"]["trace_id"] == hex_id(producer.context.trace_id, 32)
    assert run["parent_id"] == hex_id(producer.context.span_id, 16)
    assert run["attributes"]["cogworker.job.outcome"] == "succeeded"
    # chain: its enqueue of hello, in the worker, is a child of chain's run.
    (chain_run,) = [s for s in by_jid[jid_chain] if s["kind"] == "SpanKind.CONSUMER"]
    child_enqueue = [
        s
        for s in worker_spans
        if s["kind"] == "SpanKind.PRODUCER" and s["parent_id"] == chain_run["context"]["span_id"]
    ]
    assert [s["name"] for s in child_enqueue] == [f"enqueue {otel_app.hello.name}"]
    # flaky: two runs in one trace, the second linked to the first.
    first, second = sorted(by_jid[jid_flaky], key=lambda s: s["attributes"]["cogworker.job.attempt"])
    assert first["attributes"]["cogworker.job.outcome"] == "failed" and first["status"]["status_code"] == "ERROR"
    assert [link["context"]["span_id"] for link in second["links"]] == [first["context"]["span_id"]]
    assert second["context"]["trace_id"] == first["context"]["trace_id"]
    _check_the_periodic_run(worker_spans, by_jid, master.pid, children)
    assert run["pid"] in children and first["pid"] in children
    (tmp_path / "trace.json").write_text(json.dumps(worker_spans, indent=1))
    if os.environ.get("COGWORKER_SHOW_TRACE"):
        print(json.dumps(worker_spans, indent=1))


def test_a_child_flushes_batched_spans_before_it_exits(
    masters: Any, own_config: cogworker.Config, tmp_path: Path
) -> None:
    """A BatchSpanProcessor holds spans (here for a minute); a prefork child leaves by
    os._exit, which runs no atexit, so the child flushes them itself on its way out."""
    import signal

    from apps import otel_app

    master = masters(
        module="apps.otel_app",
        procs=1,
        env={"COGWORKER_TEST_SPANS": str(tmp_path), "COGWORKER_TEST_SPANS_BATCHED": "1"},
    )
    (child,) = master.wait_children()
    cogworker.disable("otel-every-second")  # only the job below
    from cogworker import api

    jid = otel_app.hello.enqueue("batched")
    wait_for(lambda: getattr(api.status(jid), "state", None) == "succeeded", timeout=30, what="the job done")
    assert spans_in(tmp_path) == []  # held by the batching processor
    master.signal(signal.SIGTERM)
    assert master.wait_exit(60) == 0
    runs = [
        s
        for s in spans_in(tmp_path)
        if s["name"] == f"run {otel_app.hello.name}"
        and s["pid"] == child
        and s["attributes"]["cogworker.job.outcome"] == "succeeded"
    ]
    assert runs, master.output()[-2000:]
