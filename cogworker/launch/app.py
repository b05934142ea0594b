"""Loading the user's app module (shared by the single-process runner and the prefork CLI)."""

from __future__ import annotations

import importlib
import os
import sys

from ..errors import ConfigurationError


def import_app(module: str) -> object:
    """Import MODULE (``app.jobs``), with the working directory importable, as a worker
    started from a project's root expects. A failure is a ConfigurationError that says
    which module and why, for a one-line message instead of a traceback."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            raise ConfigurationError(f"can't import {module!r}: no module named {exc.name!r}") from None
        raise ConfigurationError(f"can't import {module!r}: {exc}") from exc
    except Exception as exc:
        raise ConfigurationError(f"can't import {module!r}: {type(exc).__name__}: {exc}") from exc
