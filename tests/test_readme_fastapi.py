"""The FastAPI guide's snippet (docs/guides/fastapi.md), run as written: taken out of the
page into a module of its own, served (its lifespan on a real Redis), a signup enqueued on the async client, the
web UI behind its auth dependency, and a real worker running the job from the same module."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

import pytest
from core_util import wait_for
from worker_process import TESTS_DIR, Process

from cogworker import api

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "readme-s3cret"


def snippet() -> str:
    page = (ROOT / "docs" / "guides" / "fastapi.md").read_text()
    found = re.search(r"```python\n(.*?)```", page, re.S)
    assert found, "the FastAPI guide's snippet"
    return found.group(1)


def test_the_readmes_fastapi_snippet_runs_as_written(config, tmp_path, monkeypatch):
    (tmp_path / "readme_fastapi.py").write_text(snippet())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ADMIN_PASSWORD", PASSWORD)
    sys.modules.pop("readme_fastapi", None)
    module = importlib.import_module("readme_fastapi")  # before: ImportError (cogworker.client_async)
    with TestClient(module.app, base_url="http://localhost") as client:  # runs the lifespan: a PING
        jid = client.post("/signup", params={"email": "ada@example.com"}).json()["jid"]
        assert api.queue("default", config).size() == 1 and api.status(jid, config).state == "queued"
        assert client.get("/cogworker/").status_code == 401  # the dependency, before the UI
        assert client.get("/cogworker/", auth=("admin", "wrong")).status_code == 401
        page = client.get("/cogworker/queues", auth=("admin", PASSWORD))
        assert page.status_code == 200 and 'href="/cogworker/queues/default"' in page.text
        css = client.get("/cogworker/static/app.css", auth=("admin", PASSWORD))
        assert css.content == (ROOT / "cogworker" / "web" / "static" / "app.css").read_bytes()
    # The comment's worker: the same module, its job run.
    worker = Process(
        "cogworker.worker",
        "readme_fastapi",
        url=config.redis_url,
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path), TESTS_DIR]), "COGWORKER_NAMESPACE": config.namespace},
    )
    try:
        done = lambda: getattr(api.status(jid, config), "state", None) == "succeeded"  # noqa: E731
        assert wait_for(done, 30), worker.output()
        assert "welcome mail to ada@example.com" in worker.output()  # the job's own INFO line
    finally:
        assert worker.stop() == 0
