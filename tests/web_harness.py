"""The web UI served for real (uvicorn in a thread, on a free port) and a headless
Chromium driven by Playwright: Debian's /usr/bin/chromium, never a downloaded browser,
with the flags that keep it off the network (it hangs on a closed one without them).
``served`` and ``browser_page`` are the set-up the browser tests of a running worker share."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cogworker

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS_ENV = "COGWORKER_SCREENSHOTS"  # a directory to keep the screenshots in (else a temp dir)


def chromium_path() -> str | None:
    return CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")


class ServerThread:
    """An ASGI app under uvicorn, in this process, until ``stop``."""

    def __init__(self, app, port: int) -> None:
        import uvicorn

        self.port = port
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.time() + 15
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def screenshot_dir(tmp: Path) -> Path:
    wanted = os.environ.get(SCREENSHOTS_ENV)
    path = Path(wanted) if wanted else tmp
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def served(module: str, log: Path) -> Iterator[tuple[cogworker.Config, ServerThread]]:
    """A Redis of its own (this process's cogworker configured on it), a prefork master of
    ``module`` with 2 children logging to ``log`` ($PF_LOG), ready, and the web UI on a
    free port: all stopped after."""
    from prefork_harness import Master
    from redis_server import RedisServer, free_port

    from cogworker.web import create_app

    redis = RedisServer().start()
    config = cogworker.Config(redis_url=redis.url)
    cogworker.config._config = None
    cogworker.configure(redis_url=redis.url)
    master = Master(redis.url, module=module, procs=2, env={"PF_LOG": str(log)})
    server = ServerThread(create_app(config=config), free_port()).start()
    try:
        master.wait_children()
        yield config, server
    finally:
        server.stop()
        master.stop()
        redis.cleanup()


@contextlib.contextmanager
def browser_page(url: str, here: str, height: int = 720) -> Iterator[Any]:
    """A headless Chromium page (1280 wide) on ``url``, checked to answer 200 with ``here``
    the navigation's current entry."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": height})
            response = page.goto(url)
            assert response is not None and response.status == 200
            assert page.inner_text("nav a.here") == here
            yield page
        finally:
            browser.close()
