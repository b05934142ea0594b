"""One settle: every decision type has exactly one transition in ``settlement.TABLE``;
nothing but the fate module and the settle table tests the type of an outcome or a
decision; and the one rule for the hooks: a hook fires after its decision's transition
(the write went through, or, for a ride-along ack, the ack is handed to the next fetch),
never before (docs/architecture.md#hooks)."""

from __future__ import annotations

import ast
import json
import time
import typing
from pathlib import Path

import pytest
from apps import core_jobs, wf

import cogworker
from cogworker.core import fate, hooks, settlement
from cogworker.engine.loop import Worker

PACKAGE = Path(fate.__file__).resolve().parents[1]
ALLOWED = {"core/fate.py", "core/settlement.py"}
TYPES = {cls.__name__ for cls in typing.get_args(fate.Outcome) + typing.get_args(fate.Decision)}


# -- the table ------------------------------------------------------------------------------


def test_every_decision_type_has_exactly_one_transition():
    assert set(fate.DECISIONS) == set(typing.get_args(fate.Decision))
    assert set(settlement.TABLE) == set(fate.DECISIONS)
    # A dict literal keeps the last of two equal keys silently: the source has each once.
    tree = ast.parse((PACKAGE / "core/settlement.py").read_text())
    [table] = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "TABLE"
    ]
    assert isinstance(table, ast.Dict)
    keys = [key.id for key in table.keys if isinstance(key, ast.Name)]
    assert sorted(keys) == sorted(cls.__name__ for cls in fate.DECISIONS)


def test_each_transition_is_what_applies_its_decision(monkeypatch):
    """``apply`` goes through the table (not a chain of its own): swapping an entry
    swaps what ``apply`` does."""
    calls: list[object] = []
    monkeypatch.setitem(settlement.TABLE, fate.GiveBack, lambda *args: calls.append(args[2]) or True)
    assert settlement.apply(object(), b"raw", fate.GIVE_BACK) is True  # type: ignore[arg-type]
    assert calls == [fate.GIVE_BACK]


# -- isinstance on outcomes and decisions: the fate module and the settle table only ---------


def _type_tests(path: Path) -> list[str]:
    """Each ``isinstance``/``issubclass``/``type(x) is``/``match`` test of ``path`` that
    names an outcome or decision type (``fate.X``, or ``X`` imported from the fate module)."""
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("fate")
        for alias in node.names
        if alias.name in TYPES
    }

    def names(node: ast.AST) -> list[str]:
        found = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr in TYPES and isinstance(sub.value, ast.Name):
                if sub.value.id == "fate":
                    found.append(sub.attr)
            elif isinstance(sub, ast.Name) and sub.id in imported:
                found.append(sub.id)
        return found

    hits = []
    for node in ast.walk(tree):
        tested: list[str] = []
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
        ):
            tested = names(node.args[1]) if len(node.args) > 1 else []
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot, ast.Eq)) for op in node.ops):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Call) and getattr(s.func, "id", None) == "type" for s in sides):
                tested = [n for s in sides for n in names(s)]
        elif isinstance(node, ast.MatchClass):
            tested = names(node.cls)
        if tested:
            hits.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {', '.join(tested)}")
    return hits


def test_only_the_fate_module_and_the_settle_table_test_outcome_or_decision_types():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100  # the walk found the package
    found = [hit for path in modules if str(path.relative_to(PACKAGE)) not in ALLOWED for hit in _type_tests(path)]
    assert found == []


def test_the_checker_finds_each_form_of_type_test(tmp_path):
    sample = PACKAGE / "_sample_for_test.py"
    sample.write_text(
        "from .core import fate\n"
        "from .core.fate import Succeeded as S\n"
        "def f(o, d):\n"
        "    a = isinstance(o, fate.Raised)\n"
        "    b = isinstance(o, (S, int))\n"
        "    c = type(d) is fate.File\n"
        "    match d:\n"
        "        case fate.Ack():\n"
        "            pass\n"
        "    return isinstance(o, int), d.ran\n"
    )
    try:
        hits = _type_tests(sample)
    finally:
        sample.unlink()
    assert [hit.split(": ")[1] for hit in hits] == ["Raised", "S", "File", "Ack"]


# -- the hooks' one rule: after the transition ---------------------------------------------


@pytest.fixture
def at_hook():
    """What Redis and the worker hold at the moment each hook fires."""
    seen: list[dict[str, object]] = []
    state: dict[str, object] = {}

    def record(event: hooks.JobEvent) -> None:
        config, worker = state["config"], state["worker"]
        r = config.redis()  # type: ignore[attr-defined]
        seen.append(
            {
                "name": event.name,
                "listed": r.lrange(config.keys.in_progress(worker.identity), 0, -1),  # type: ignore[attr-defined]
                "ack_due": worker.ack_due,  # type: ignore[attr-defined]
                "retry": r.zcard(config.keys.retry),  # type: ignore[attr-defined]
                "result": r.exists(config.keys.result(event.payload["jid"])),  # type: ignore[attr-defined]
            }
        )

    names = ("succeeded", "retrying", "given_back")
    hooks.subscribe(names, record)
    yield seen, state
    hooks.unsubscribe(names, record)


def _worker(config, state, identity: str) -> Worker:
    w = Worker([("default", None)], identity=identity, block_timeout=0)
    state.update(config=config, worker=w)
    return w


def test_succeeded_fires_once_its_ack_rides_on_the_next_fetch_which_writes_it(config, at_hook):
    """The ride-along: the ack is handed to the next fetch (the transition), then the
    hook fires; the entry is still listed then, and that fetch removes it."""
    seen, state = at_hook
    core_jobs.record.enqueue("a")
    w = _worker(config, state, "ride")
    work = w.fetch()
    assert work is not None
    w.process(work)
    [event] = seen
    assert event["name"] == "succeeded"
    assert event["ack_due"] == work.raw and event["listed"] == [work.raw]
    assert w.fetch() is None  # the next fetch, the ack riding on it
    assert config.redis().llen(config.keys.in_progress("ride")) == 0 and w.ack_due is None


def test_succeeded_fires_after_its_ack_is_written_when_no_fetch_follows(config, at_hook):
    """Quiet (or stopping): no next fetch to ride on, the ack is written now; the hook
    fires after it (before, it fired with the entry still listed)."""
    seen, state = at_hook
    core_jobs.record.enqueue("b")
    w = _worker(config, state, "now")
    work = w.fetch()
    assert work is not None
    w.quiet()
    w.settle(work, json.loads(work.raw), fate.Succeeded(0.0))
    [event] = seen
    assert event["name"] == "succeeded" and event["listed"] == [] and event["ack_due"] is None


def test_succeeded_of_a_workflow_job_fires_after_its_completion_is_written(config, at_hook):
    seen, state = at_hook
    jid = wf.add.enqueue(1, 2)
    w = _worker(config, state, "wf")
    work = w.fetch()
    assert work is not None
    w.process(work)
    [event] = seen
    assert event["name"] == "succeeded" and event["listed"] == [] and event["result"] == 1
    assert cogworker.result(jid, timeout=5) == 3


def test_a_successs_settlement_is_left_out_of_the_runs_measure_for_lookahead(config, at_hook):
    """A ride-along success's hooks (a unique job's lock release, where no look-ahead
    fetch carries it: a round trip of its own) are its settlement, not its run: timed into
    ``completing``, which look-ahead's depth leaves out (a settlement's round trip must not
    keep K at 1), as a completion's is."""
    seen, state = at_hook
    slow = 0.05

    def settling(event: hooks.JobEvent) -> None:
        time.sleep(slow)  # a settlement round trip, made long enough to measure

    hooks.subscribe(("succeeded",), settling)
    try:
        core_jobs.charge.enqueue("o-1", amount=1)
        w = Worker([("critical", None)], identity="settling", block_timeout=0)
        state.update(config=config, worker=w)
        work = w.fetch()
        assert work is not None
        w.process(work)
    finally:
        hooks.unsubscribe(("succeeded",), settling)
    assert [e["name"] for e in seen] == ["succeeded"] and w.ack_due == work.raw  # riding
    assert w.completing >= slow
    # The lock was released by the success, as before: a duplicate is taken now (no
    # look-ahead may go out here, so nothing would carry the release: written at once).
    assert core_jobs.charge.enqueue("o-1", amount=1) is not None


def test_retrying_and_given_back_fire_after_their_write(config, at_hook):
    seen, state = at_hook
    core_jobs.fail_always.enqueue("c")
    w = _worker(config, state, "fail")
    work = w.fetch()
    assert work is not None
    w.process(work)
    core_jobs.record.enqueue("d")
    given = w.fetch()
    assert given is not None
    w.stop()
    w.process(given)  # stopping: handed back unrun
    assert [(e["name"], e["listed"], e["retry"]) for e in seen] == [("retrying", [], 1), ("given_back", [], 1)]


# -- the worker's state, declared once ------------------------------------------------------


def _declared(path: Path) -> list[tuple[str, str]]:
    """(class, attribute) for each attribute a class of ``path`` declares: annotated in its
    body (a Protocol's or a mixin's), or assigned to ``self`` in its ``__init__``."""
    found = []
    for cls in ast.walk(ast.parse(path.read_text())):
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found.append((cls.name, node.target.id))
            elif isinstance(node, ast.FunctionDef) and node.name == "__init__":
                for sub in ast.walk(node):
                    targets = (
                        sub.targets
                        if isinstance(sub, ast.Assign)
                        else [sub.target]
                        if isinstance(sub, ast.AnnAssign)
                        else []
                    )
                    for t in targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            found.append((cls.name, t.attr))
    return found


def test_the_worker_state_is_declared_once():
    """The loop (``Worker``), its settlement (``Settling``) and what its fetch strategies
    see of it: each attribute declared in one place only (no protocol re-declaring them)."""
    engine = PACKAGE / "engine"
    declared = [
        *(d for d in _declared(engine / "ledger.py") if d[0] == "Settling"),
        *(d for d in _declared(engine / "loop.py") if d[0] == "Worker"),
        *(d for d in _declared(engine / "lookahead.py") if d[0] not in ("Plain", "LookAhead", "Depth")),
    ]
    names = [name for _, name in declared]
    assert {"fetcher", "ack_due", "pending", "jobs_done", "fetching"} <= set(names)
    assert sorted({(cls, n) for cls, n in declared if names.count(n) > 1}) == []


# -- the reporters record the decision they are given ---------------------------------------


@pytest.mark.parametrize(
    ("decision", "state", "counts"),
    [
        (fate.RIDE, "ACK_DUE", (1, 0)),  # a success: its ack due (dropped, never requeued, if the child dies)
        (fate.ACK, "ACK_DUE", (1, 0)),
        (fate.CANCEL_RIDE, "ACK_DUE", (0, 0)),  # ran, cancelled: its no-op drop due, neither counted
        (fate.GIVE_BACK, "IDLE", (0, 0)),
        (fate.File("retry", 1.0, "{}", True), "IDLE", (0, 1)),  # a failure, counted
        (fate.Suspend("{}", "1", 1), "IDLE", (0, 0)),
    ],
)
def test_a_childs_reporter_records_the_decision_it_is_given(decision, state, counts):
    from multiprocessing import Pipe

    from cogworker.engine.fetch.fetcher import Work
    from cogworker.prefork import slots as slot_module
    from cogworker.prefork.pipe import PipeReporter

    slots = slot_module.Slots(1)
    reader, writer = Pipe(duplex=False)
    reporter = PipeReporter(None, writer, slots.writer(0))
    reporter.started(Work(b"{}", "default"), {"jid": "j" * 24, "class": "c", "queue": "default"})
    reporter.finished(Work(b"{}", "default"), decision)
    read = slots.read(0)
    assert read is not None and read.state == getattr(slot_module, state)
    assert slots.counts(0) == counts
