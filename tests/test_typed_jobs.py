"""Typed jobs: ``@cogworker.job`` keeps the function's signature for type checkers.

mypy and pyright run on tests/typing_cases/job_calls.py, a file of right and wrong calls:
each line marked ``# E`` must be an error, and no other line. The package ships ``py.typed``
(without it, a type checker treats an installed cogworker as untyped and checks nothing).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mypy import api as mypy_api

import cogworker

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "typing_cases" / "job_calls.py"


def marked_lines() -> set[int]:
    lines = CASES.read_text().splitlines()
    return {n for n, line in enumerate(lines, 1) if line.rstrip().endswith("# E")}


def test_the_case_file_has_wrong_calls_for_every_handle() -> None:
    text = CASES.read_text()
    for call in (
        "enqueue(",
        "enqueue_in(",
        "enqueue_at(",
        ".options(",
        ".s(",
        "enqueue_async(",
        "enqueue_in_async(",
        "enqueue_at_async(",
    ):
        assert any(call in line and line.endswith("# E") for line in text.splitlines()), call


def test_mypy_flags_exactly_the_wrong_calls(tmp_path: Path) -> None:
    (tmp_path / "none.ini").write_text("[mypy]\n")  # not pyproject's: it names packages to check
    out, err, status = mypy_api.run(
        [
            str(CASES),
            "--python-version",
            "3.11",
            "--check-untyped-defs",
            "--follow-imports=silent",
            "--no-error-summary",
            "--show-error-codes",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--config-file",
            str(tmp_path / "none.ini"),
        ]
    )
    assert status == 1, (out, err)
    errors = [line for line in out.splitlines() if ": error:" in line]
    flagged = {int(line.split(":")[1]) for line in errors}
    assert all(line.startswith(str(CASES)) or line.startswith("tests/") for line in errors), errors
    assert flagged == marked_lines(), "\n".join(errors)
    print("\n".join(errors))  # the errors, shown with -s


@pytest.mark.skipif(
    shutil.which("pyright", path=str(Path(sys.executable).parent)) is None,
    reason="pyright is not installed (it is in the 'test' extra)",
)
def test_pyright_flags_exactly_the_wrong_calls() -> None:
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert pyright is not None
    run = subprocess.run(
        [pyright, "--outputjson", "--pythonpath", sys.executable, str(CASES)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    report = json.loads(run.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    flagged = {d["range"]["start"]["line"] + 1 for d in errors}
    assert flagged == marked_lines(), json.dumps(errors, indent=1)


def test_the_package_ships_py_typed() -> None:
    assert (Path(cogworker.__file__).parent / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject  # in package-data: the wheel carries it


def test_signature_keeps_the_call_and_checks_it_now() -> None:
    @cogworker.job(queue="typed-sig")
    def mul(x: int, y: int) -> int:
        return x * y

    sig = mul.s(2, y=3)
    assert (sig.name, sig.args, sig.kwargs) == (mul.name, (2,), {"y": 3})
    assert sig.options(queue="other").bound.opts.queue == "other"
    assert sig.bound.opts.queue == "typed-sig"
    with pytest.raises(TypeError, match="can't take these arguments"):
        mul.s(1, 2, 3)  # not even with a previous result first
    assert mul.s(1).args == (1,)  # a chain's step: the previous result comes first (#27)
    with pytest.raises(TypeError, match="can't take these arguments"):
        mul.si(1)  # immutable: no previous result to complete it
    with pytest.raises(cogworker.ConfigurationError, match="unknown job option"):
        mul.options(**{"queu": "x"})  # type: ignore[arg-type]


def test_enqueue_gives_a_job_id_a_str_at_run_time(config) -> None:
    @cogworker.job(queue="typed-id", results=True)
    def mul(x: int, y: int) -> int:
        return x * y

    jid = mul.enqueue(2, 3)
    assert isinstance(jid, cogworker.JobId) and isinstance(jid, str)
    assert json.loads(json.dumps({"jid": jid})) == {"jid": str(jid)} and {jid: 1}[str(jid)] == 1
    stored = json.loads(config.redis().lrange(config.keys.queue("typed-id"), 0, 0)[0])
    assert stored["jid"] == jid
    assert isinstance(mul.enqueue_in(30, 1, 2), cogworker.JobId)
    assert isinstance(cogworker.enqueue_in(mul.name, 30, 1, 2), cogworker.JobId)  # beside enqueue_at
    assert all(isinstance(j, cogworker.JobId) for j in mul.enqueue_many([(1, 1), (2, 2)]))


def test_enqueue_in_by_name_schedules_it_seconds_from_now(config) -> None:
    before = time.time()
    jid = cogworker.enqueue_in("app.jobs.elsewhere", 30, "a", n=1)
    assert jid is not None
    [(raw, at)] = config.redis().zrange(config.keys.schedule, 0, -1, withscores=True)
    job = json.loads(raw)
    assert (job["jid"], job["class"], job["args"], job["kwargs"]) == (jid, "app.jobs.elsewhere", ["a"], {"n": 1})
    assert before + 30 <= at <= time.time() + 30
