"""A FastAPI app with cogworker: jobs enqueued on the async client (redis.asyncio), which
the lifespan checks at startup and closes at shutdown; the web UI mounted at /cogworker
behind a dependency that checks auth.

    uvicorn examples.fastapi_app.main:app            # COGWORKER_REDIS_URL names the Redis
    cogworker-prefork --procs 2 examples.fastapi_app.jobs
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.security import HTTPBasic, HTTPBasicCredentials

from cogworker import api
from cogworker.client import aio as client_async
from cogworker.web import create_app

from .jobs import send_welcome


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    await client_async.async_redis().ping()  # fail at startup, not on the first request
    yield
    await client_async.aclose()


app = FastAPI(lifespan=lifespan)
basic = HTTPBasic(realm="cogworker")


def require_admin(credentials: HTTPBasicCredentials = Depends(basic)) -> str:
    """The admin's HTTP basic credentials (EXAMPLE_ADMIN_USER / EXAMPLE_ADMIN_PASSWORD),
    compared in constant time; 401 otherwise. Any dependency works: a session, a token."""
    user = os.environ.get("EXAMPLE_ADMIN_USER", "admin").encode()
    password = os.environ.get("EXAMPLE_ADMIN_PASSWORD", "")
    good = secrets.compare_digest(credentials.username.encode(), user)
    good &= bool(password) and secrets.compare_digest(credentials.password.encode(), password.encode())
    if not good:
        raise HTTPException(401, "admins only", headers={"WWW-Authenticate": 'Basic realm="cogworker"'})
    return credentials.username


@app.post("/signup")
async def signup(email: str) -> dict[str, Any]:
    jid = await send_welcome.enqueue_async(email)
    return {"jid": jid}


@app.get("/jobs/{jid}")
def job_status(jid: str) -> dict[str, Any]:
    found = api.status(jid)
    if found is None:
        raise HTTPException(404, "no such job")
    return {"state": found.state, "attempt": found.attempt}


class Mounted(Response):
    """Hands the request to an ASGI app mounted at ``prefix`` (what ``app.mount`` does,
    which would skip the route's dependencies)."""

    def __init__(self, asgi: Any, prefix: str) -> None:
        self.asgi, self.prefix, self.background = asgi, prefix, None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.asgi({**scope, "root_path": scope.get("root_path", "") + self.prefix}, receive, send)


# The web UI answers only the names it is served under (DNS rebinding): localhost, 127.0.0.1,
# ::1, and the app's public host names from ALLOWED_HOSTS (comma-separated).
ui = create_app(allowed_hosts=[h for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h])


@app.api_route(
    "/cogworker{path:path}",
    methods=["GET", "HEAD", "POST"],
    include_in_schema=False,
    dependencies=[Depends(require_admin)],
)
async def cogworker_ui(request: Request) -> Response:
    return Mounted(ui, "/cogworker")
