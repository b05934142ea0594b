"""Property: every path that decodes an entry survives any bytes at all (issue #25, point
1). Hypothesis throws arbitrary bytes, arbitrary JSON, and JSON deep and wide, at each
reader: as pure functions first, then through a real poller, orphan recovery, the API,
the web UI, the command's renderers and a real worker, on a real redis-server, where
the entries beside the bad one must go on."""

from __future__ import annotations

import importlib
import json
import time
from typing import Any

import pytest
from apps import core_jobs
from core_util import RunningWorker, ran, wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogworker import api, boundedjson
from cogworker.api.records import JobRecord
from cogworker.boundedjson import MAX_DEPTH
from cogworker.cli.jobs import error_of, job_class, raw_text, record_json
from cogworker.cli.output import jsonable, table
from cogworker.core import inprogress, payload, settlement
from cogworker.cron import ticker as cron
from cogworker.fleet import recovery
from cogworker.metrics import exporter as metrics

api_status = importlib.import_module("cogworker.api.status")  # the module (api.status is its function)

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(), inner, max_size=6), max_leaves=40
)


@st.composite
def deep(draw: Any) -> bytes:
    """Arrays and objects nested 1 to 3,000 levels, a mix of both, maybe cut short."""
    levels = draw(st.integers(1, 3000))
    opens = draw(st.lists(st.sampled_from(["[", '{"k":']), min_size=levels, max_size=levels))
    leaf = json.dumps(draw(SCALARS))
    closes = "".join("]" if o == "[" else "}" for o in reversed(opens))
    text = "".join(opens) + leaf + closes
    return text[: draw(st.integers(0, len(text)))].encode() if draw(st.booleans()) else text.encode()


@st.composite
def wide(draw: Any) -> bytes:
    width = draw(st.integers(0, 5000))
    item = draw(SCALARS)
    return json.dumps([item] * width).encode()


@st.composite
def job_like(draw: Any) -> bytes:
    """A job object whose args are anything above, or one with fields of the wrong types."""
    args = draw(deep() | wide() | st.builds(lambda v: json.dumps(v).encode(), JSON))
    jid = draw(st.text(max_size=30) | st.integers() | st.none())
    head = json.dumps(
        {
            "class": draw(st.sampled_from(["apps.core_jobs.record", "", 12, None])),
            "jid": jid,
            "queue": draw(st.sampled_from(["default", "", None, ["x"]])),
            "kwargs": {},
        }
    )
    return head[:-1].encode() + b', "args": ' + args + b"}"


ENTRIES = st.binary(max_size=300) | st.builds(lambda v: json.dumps(v).encode(), JSON) | deep() | wide() | job_like()


def readers(raw: bytes) -> None:
    """Every pure decoding path, each with its own promise."""
    got, why = payload.parse_payload(raw)
    assert (got is None) == bool(why) and (got is None or isinstance(got.get("jid"), str))
    assert payload.jid_in(raw) is None or isinstance(payload.jid_in(raw), str)
    assert isinstance(inprogress.jid_of(raw), str)
    assert recovery._parse(raw) is None or isinstance(recovery._parse(raw), dict)
    assert isinstance(settlement._parsed(raw), dict)
    assert isinstance(cron._loads(raw), dict)
    assert metrics._waited(raw, time.time()) >= 0.0
    assert api_status._entry(raw) is None or api_status._entry(raw).ended_at is not None
    for done in (True, False):
        api_status._from_record("j", done, raw)
    api_status._done_entry(raw)
    shown = boundedjson.shallow(raw)
    assert shown is None or isinstance(shown, dict)
    try:
        value = boundedjson.loads(raw)
    except ValueError:
        pass
    else:
        assert boundedjson.depth(json.dumps(value)) <= MAX_DEPTH
    rendered(JobRecord.parse(raw, "dead", time.time()))


def rendered(record: JobRecord) -> None:
    """What the command and the web UI show of a record."""
    from cogworker.web.views import pretty, short
    from cogworker.web.views import raw_text as web_raw

    json.dumps(jsonable(record_json(record)))
    row = [
        record.jid or "-",
        job_class(record),
        record.queue or "-",
        "1m ago",
        "-",
        error_of(record) if record.readable else raw_text(record),
    ]
    lines = table(["JID", "CLASS", "QUEUE", "DUE", "RETRIES", "ERROR"], [row]).splitlines()
    assert max(len(line) for line in lines) <= 100
    web_raw(record.raw)
    if record.readable:
        pretty(record.args)
        short(record.kwargs)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ENTRIES)
def test_every_reader_survives_any_entry(raw):
    readers(raw)


def _decoded(text: str) -> tuple[Any, ...]:
    try:
        return ("value", json.JSONDecoder().decode(text))
    except ValueError as exc:  # JSONDecodeError's message and position
        return ("error", type(exc), str(exc))


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.text(), JSON, max_size=4).map(json.dumps),
    st.text(max_size=8),
    st.sampled_from(["", " ", "\n", "x", "{}", '"', "]"]),
)
def test_the_payload_scanner_answers_as_the_decoder_does(text, cut, tail):
    """``payload._object`` (the scanner alone when it reads the whole text): what
    ``JSONDecoder.decode`` returns or raises, for objects, cut short or followed by more."""
    for candidate in (text + tail, text[: len(text) // 2] + cut, "{" + cut):
        if candidate.startswith("{"):
            try:
                got: tuple[Any, ...] = ("value", payload._object(candidate))
            except ValueError as exc:
                got = ("error", type(exc), str(exc))
            assert got == _decoded(candidate)


@settings(max_examples=200, deadline=None)
@given(JSON, st.integers(0, 150))
def test_enqueue_accepts_exactly_what_a_worker_reads(value, levels):
    """One limit on both sides: whatever enqueue's encoding accepts, the worker's parse
    reads back; whatever it refuses is past the limit."""
    wrapped: Any = value
    for _ in range(levels):
        wrapped = [wrapped]
    job = {"class": "apps.x.y", "jid": "j", "args": [wrapped], "kwargs": {}}
    try:
        encoded = payload.dumps(job)
    except TypeError as exc:
        assert "nested too deep" in str(exc)
        assert boundedjson.depth(json.dumps(job)) > MAX_DEPTH
        return
    got, why = payload.parse_payload(encoded.encode())
    assert got == json.loads(encoded) and why == ""


FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


def good(jid: str, tag: str) -> bytes:
    return json.dumps(
        {"class": "apps.core_jobs.record", "args": [tag], "kwargs": {}, "jid": jid, "queue": "default", "retry": 25}
    ).encode()


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE)
@given(ENTRIES)
def test_the_poller_recovery_and_the_api_go_on_beside_any_entry(config, raw):
    r = config.redis()
    r.flushall()
    k = config.keys
    # The poller: the good entry is pushed, the bad one is a job (pushed) or goes to dead.
    r.zadd(k.schedule, {raw: 0, good("g1", "due"): 0})
    from cogworker.fleet.poller import Poller

    Poller(config).poll()
    assert r.zcard(k.schedule) == 0
    assert good("g1", "due") in r.lrange(k.queue("default"), 0, -1)
    # Orphan recovery: the whole list leaves, the bad entry with the good one.
    for queue in r.keys(k.queue("*")):
        r.delete(queue)
    r.rpush(k.in_progress("gone:1:p"), raw, good("g2", "listed"))
    assert recovery.requeue_dead(config, "gone:1:p", "none")[0] == 2
    assert r.llen(k.in_progress("gone:1:p")) == 0
    assert sum(r.llen(q) for q in r.keys(k.queue("*"))) == 2  # its queue may be the one it names
    # The API (what the web UI and the command read): every set lists both.
    r.zadd(k.dead, {raw: 1, good("g3", "dead"): 2})
    listed = api.DeadSet().jobs()
    assert len(listed) >= 2 and "g3" in {rec.jid for rec in listed}
    for rec in listed:
        rendered(rec)
    for jid in {rec.jid for rec in listed if rec.jid} | {"g3"}:
        api.status(jid)
        api.history(jid)


@settings(max_examples=3, deadline=None, suppress_health_check=FIXTURE)
@given(st.lists(ENTRIES, min_size=12, max_size=12))
def test_a_worker_fetches_any_entries_and_runs_the_good_ones_beside_them(config, raws):
    r = config.redis()
    r.flushall()
    k = config.keys
    for i, raw in enumerate(raws):
        r.lpush(k.queue("default"), raw)
        core_jobs.record.enqueue(f"good{i}")
    running = RunningWorker()
    with running as w:
        assert wait_for(lambda: {f"record:good{i}" for i in range(12)} <= set(ran(r)), 30)
        assert wait_for(lambda: r.llen(k.queue("default")) == 0 and r.llen(k.in_progress(w.identity)) == 0, 30)
    assert running.error is None


@pytest.mark.parametrize("raw", [b"[" * 1100 + b"]" * 1100, b'{"a":' * 985 + b"1" + b"}" * 985])
def test_a_rendered_page_of_the_web_ui_shows_a_deep_entry_raw(config, raw):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from cogworker.web import create_app

    r = config.redis()
    r.zadd(config.keys.dead, {raw: time.time(), good("g1", "beside"): time.time()})
    with TestClient(create_app(), base_url="http://localhost") as client:
        page = client.get("/dead")
    assert page.status_code == 200 and "g1" in page.text


# Every field a worker reads after the fetch, with values of every kind, the non-finite
# numbers among them (Python's decoder reads Infinity, NaN and 1e400 as floats).
ODD = (
    SCALARS
    | st.sampled_from([float("inf"), float("-inf"), float("nan"), 10**400, -1, 0, 2**53 + 1, "", "x"])
    | st.lists(SCALARS, max_size=3)
    | st.dictionaries(st.sampled_from(["class", "jid", "args", "x"]), SCALARS, max_size=3)
)
JOB_FIELDS = [
    "args", "kwargs", "queue", "retry", "retry_count", "interrupted_count", "timeout", "unique_for",
    "unique_until", "unique_digest", "periodic_pjid", "periodic_slot", "created_at", "enqueued_at", "at",
    "iter_done",
]  # fmt: skip
WF_FIELDS = ["ttl", "lttl", "g", "i", "b", "last", "chain"]
STEP = st.dictionaries(
    st.sampled_from(["class", "jid", "args", "kwargs", "queue", "retry", "timeout", "imm", "ttl"]), ODD, max_size=9
) | st.fixed_dictionaries({"class": st.just("a.b"), "jid": st.just("j2")}, optional={"queue": ODD, "ttl": ODD})


@st.composite
def odd_job(draw: Any) -> bytes:
    job: dict[str, Any] = {"class": "apps.core_jobs.record", "jid": "j1"}
    job.update(draw(st.dictionaries(st.sampled_from(JOB_FIELDS), ODD, max_size=5)))
    if draw(st.booleans()):
        wf = draw(st.dictionaries(st.sampled_from(WF_FIELDS), ODD, max_size=4))
        if draw(st.booleans()):
            wf["chain"] = draw(st.lists(STEP, max_size=3))
        job["wf"] = wf if draw(st.integers(0, 9)) else draw(ODD)
    return json.dumps(job, allow_nan=True).encode()


@settings(max_examples=600, deadline=None)
@given(odd_job())
def test_a_payload_the_worker_admits_is_one_every_later_reader_can_settle(raw):
    """parse_payload refuses a job with one line, or every step after the body can read it:
    the success's settlement (a workflow's completion, its chain's next step), a failure's
    filing (retry count, backoff, retry or dead), an interruption, the soft timeout's
    deadline, the status bucket, the unique lock's TTL, the trace's attempt."""
    from cogworker.config import Config
    from cogworker.core import fate
    from cogworker.engine.execute import deadline_of
    from cogworker.lifecycle import donering, unique

    got, why = payload.parse_payload(raw)
    if got is None:
        assert why.startswith("bad payload: ") and "\n" not in why
        return
    config = Config()
    fate.decide(config, json.loads(raw), fate.Succeeded(0.0, [1, "x"]))
    filed = fate.decide(config, json.loads(raw), fate.Raised(ValueError("x"), fate.default_backoff))
    assert isinstance(filed, fate.File) and json.loads(filed.entry)["retry_count"] >= 1
    fate.decide(config, raw, fate.FilingFailed(ValueError("x")))
    deadline_of(got)
    donering.enq_buckets(donering.enq_spec(got.get("enqueued_at")))
    if unique.holds(got):
        unique.lock_ttl(got, 10.0)
    int(got.get("retry_count") or 0) + 1
