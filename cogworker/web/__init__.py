"""The web UI (``pip install 'cogworker[web]'``): ``create_app()`` returns an ASGI app to
serve with ``cogworker web`` or to mount under a prefix in another app."""

from __future__ import annotations

from .app import create_app
from .security import BasicAuth

__all__ = ["BasicAuth", "create_app"]
