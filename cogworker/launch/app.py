"""Loading the user's app module (shared by the single-process runner and the prefork CLI),
and refusing one that registers no job."""

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


class NoJobs(ConfigurationError):
    """The app module registered no job: a worker would only take jobs it can't run (each
    failed as unknown, a retry spent), so the command is a usage error (exit 2)."""

    exit_code = 2


def require_jobs(module: str) -> None:
    """After ``import_app``: at least one ``@job`` registered, by the module or what it
    imported (a Django worker's module registers every installed app's)."""
    from ..core.registry import registry

    if not registry:
        raise NoJobs(
            f"{module!r} registers no job (no @cogworker.job in it or in what it imports): "
            "is it the app's jobs module? A worker on it would take jobs it can't run"
        )


def exit_code(exc: ConfigurationError) -> int:
    """A worker command's exit status for a setting it refused: 2 for a usage error, else 1."""
    return getattr(exc, "exit_code", 1)
