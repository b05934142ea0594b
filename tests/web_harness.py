"""The web UI served for real (uvicorn in a thread, on a free port) and a headless
Chromium driven by Playwright: Debian's /usr/bin/chromium, never a downloaded browser,
with the flags that keep it off the network (it hangs on a closed one without them)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS_ENV = "COGWORKER_SCREENSHOTS"  # a directory to keep the screenshots in (else a temp dir)


def chromium_path() -> str | None:
    return CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")


class ServerThread:
    """An ASGI app under uvicorn, in this process, until ``stop``."""

    def __init__(self, app, port: int) -> None:
        import uvicorn

        self.port = port
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                                    lifespan="off"))
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
