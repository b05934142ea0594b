"""examples/fastapi_app: jobs enqueued on the async client (checked in the lifespan, closed
at shutdown), the web UI behind a FastAPI dependency that checks auth, and a real worker
running what the app enqueued."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prefork_harness import wait_for

import cogworker

ROOT = Path(__file__).resolve().parent.parent
ADMIN = ("admin", "s3cret-for-the-test")


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("EXAMPLE_ADMIN_PASSWORD", ADMIN[1])
    for name in [m for m in sys.modules if m.startswith("examples.fastapi_app")]:
        del sys.modules[name]  # registered afresh (conftest resets the registry after each test)
    from examples.fastapi_app import main

    return main


@pytest.fixture
def client(example: Any, config: cogworker.Config) -> Iterator[TestClient]:
    with TestClient(example.app, base_url="http://localhost") as found:  # runs the lifespan
        yield found


def test_signup_enqueues_on_the_async_client(client: TestClient, config: cogworker.Config, example: Any) -> None:
    reply = client.post("/signup", params={"email": "a@example.com"})
    jid = reply.json()["jid"]
    (raw,) = config.redis().lrange(config.keys.queue("default"), 0, -1)
    assert json.loads(raw)["jid"] == jid and json.loads(raw)["args"] == ["a@example.com"]
    assert client.get(f"/jobs/{jid}").json() == {"state": "queued", "attempt": 1}
    assert client.get("/jobs/nope").status_code == 404


def test_the_lifespan_checks_redis_and_closes_the_client(
    example: Any, config: cogworker.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogworker.client import aio as client_async

    before = len(client_async._clients)  # loops of earlier tests may still be alive
    with TestClient(example.app, base_url="http://localhost") as found:
        found.post("/signup", params={"email": "b@example.com"})
        assert len(client_async._clients) == before + 1
    assert len(client_async._clients) == before  # closed at shutdown
    cogworker.configure(redis_url="redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    with pytest.raises(Exception, match="(?i)connect"), TestClient(example.app, base_url="http://localhost"):
        pass  # a Redis that doesn't answer fails the startup


def test_the_web_ui_is_behind_the_auth_dependency(client: TestClient, config: cogworker.Config, example: Any) -> None:
    assert client.get("/cogworker/").status_code == 401
    assert client.get("/cogworker/", auth=("admin", "wrong")).status_code == 401
    assert client.get("/cogworker/static/app.css").status_code == 401
    page = client.get("/cogworker/", auth=ADMIN)
    assert page.status_code == 200 and 'href="/cogworker/static/app.css' in page.text
    assert client.get("/cogworker/static/app.css", auth=ADMIN).status_code == 200
    example.send_welcome.options(queue="mail").enqueue("c@example.com")
    queue_page = client.get("/cogworker/queues/mail", auth=ADMIN).text
    token = re.search(r'name="csrf" value="([^"]+)"', queue_page)
    assert token
    assert client.post("/cogworker/queues/mail/pause", data={"csrf": "forged"}, auth=ADMIN).status_code == 403
    done = client.post(
        "/cogworker/queues/mail/pause", data={"csrf": token.group(1)}, auth=ADMIN, follow_redirects=False
    )
    assert done.status_code == 303
    from cogworker import api

    assert api.queue("mail", config).paused()


def test_a_real_worker_runs_what_the_app_enqueued(example: Any, masters: Any, own_config: cogworker.Config) -> None:
    master = masters(module="examples.fastapi_app.jobs", procs=1, env={"PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}"})
    master.wait_children()
    with TestClient(example.app, base_url="http://localhost") as found:
        jid = found.post("/signup", params={"email": "d@example.com"}).json()["jid"]
        from examples.fastapi_app.jobs import OUTBOX

        outbox = wait_for(lambda: own_config.redis().lrange(OUTBOX, 0, -1), timeout=60, what="the welcome mail")
        assert json.loads(outbox[0])["to"] == "d@example.com"
        wait_for(lambda: found.get(f"/jobs/{jid}").json()["state"] == "succeeded", timeout=30, what="its status")
