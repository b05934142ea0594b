"""The rules each setting of ``Config`` must meet, and the settings read from the
environment (docs/architecture.md#modules): each bad value is one line that says why."""

from __future__ import annotations

import os
from typing import Any

from .errors import ConfigurationError
from .store import cluster as cluster_mode

DEFAULT_NAMESPACE = "cogworker"


def validate_namespace(namespace: object) -> str:
    """A namespace is the prefix of every key: empty or with spaces, it is a mistake."""
    if not isinstance(namespace, str) or not namespace:
        raise ConfigurationError(f"invalid namespace {namespace!r}: must be a non-empty name")
    if any(c.isspace() or not c.isprintable() for c in namespace):
        raise ConfigurationError(f"invalid namespace {namespace!r}: no spaces or control characters")
    return namespace


def namespace_from_env() -> str:
    """``COGWORKER_NAMESPACE``, read where the Redis URL is (every process, every command,
    the web UI), so an app's namespace needs no ``--namespace`` on each command."""
    text = os.environ.get("COGWORKER_NAMESPACE") or DEFAULT_NAMESPACE
    try:
        return validate_namespace(text)
    except ConfigurationError as exc:
        raise ConfigurationError(f"COGWORKER_NAMESPACE: {exc}") from None


def import_prefixes_from_env() -> tuple[str, ...]:
    return _split_prefixes(os.environ.get("COGWORKER_IMPORT_PREFIXES", ""))


def _split_prefixes(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def wait_replicas_from_env() -> int:
    text = os.environ.get("COGWORKER_WAIT_REPLICAS") or "0"
    if not text.strip().isdigit():
        raise ConfigurationError(f"COGWORKER_WAIT_REPLICAS must be a whole number, got {text!r}")
    return int(text)


def wait_timeout_from_env() -> float:
    text = os.environ.get("COGWORKER_WAIT_TIMEOUT") or "1.0"
    try:
        return float(text)
    except ValueError:
        raise ConfigurationError(f"COGWORKER_WAIT_TIMEOUT must be a number of seconds, got {text!r}") from None


DURABILITY = ("none", "aof")


def durability_from_env() -> str:
    return (os.environ.get("COGWORKER_DURABILITY") or "none").strip().lower()


def trust_everysec_from_env() -> bool:
    text = (os.environ.get("COGWORKER_DURABILITY_TRUST_EVERYSEC") or "0").strip().lower()
    if text not in ("0", "1", "false", "true", "no", "yes"):
        raise ConfigurationError(f"COGWORKER_DURABILITY_TRUST_EVERYSEC must be 1 or 0, got {text!r}")
    return text in ("1", "true", "yes")


def validate_durability(config: Any) -> None:
    """``durability``: "none" (the default) or "aof" (store/durability.py's ``require_aof``)."""
    if config.durability not in DURABILITY:
        raise ConfigurationError(f"durability must be 'none' or 'aof', got {config.durability!r}")
    if not isinstance(config.durability_trust_everysec, bool):
        raise ConfigurationError(
            f"durability_trust_everysec must be True or False, got {config.durability_trust_everysec!r}"
        )


def validate_wait(config: Any) -> None:
    """``wait_replicas`` replicas must hold each write within ``wait_timeout`` seconds
    (store/replication.py)."""
    replicas, timeout = config.wait_replicas, config.wait_timeout
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ConfigurationError(f"wait_replicas must be a whole number, 0 or more, got {replicas!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigurationError(f"wait_timeout must be more than 0 seconds, got {timeout!r}")


def validate_import_prefixes(value: object) -> tuple[str, ...]:
    """A list of dotted module names (a comma-separated string is split)."""
    prefixes = _split_prefixes(value) if isinstance(value, str) else value
    if not isinstance(prefixes, (list, tuple)) or not all(
        isinstance(p, str) and p and all(part.isidentifier() for part in p.split(".")) for p in prefixes
    ):
        raise ConfigurationError(
            f"import_prefixes must be a list of dotted module names (such as ['app.tasks']), got {value!r}"
        )
    return tuple(prefixes)


def validate_liveness(config: Any) -> None:
    """A live process's beat can lag about two heartbeat intervals (its master's beat, then
    its own), and a Redis stall up to half the threshold can go unseen between two looks:
    a threshold under 5 intervals could take a live process for a dead one."""
    for name in ("orphan_threshold", "heartbeat_interval", "recovery_interval"):
        if not getattr(config, name) > 0:
            raise ConfigurationError(f"{name} must be more than 0, got {getattr(config, name)!r}")
    if config.orphan_threshold < 5 * config.heartbeat_interval:
        raise ConfigurationError(
            f"orphan_threshold ({config.orphan_threshold:g}s) must be at least 5 x "
            f"heartbeat_interval ({config.heartbeat_interval:g}s)"
        )


def validate_retention(config: Any) -> None:
    """Each bound of what is kept per job must be a whole number of at least 1 (a float or a
    string there would reach the scripts as an argument Redis refuses, at every flush)."""
    for name in ("status_max", "status_max_failed", "status_ttl", "history_ttl", "history_max"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be a whole number of at least 1, got {value!r}")


def cluster_from_env() -> bool | None:
    try:
        return cluster_mode.setting(os.environ.get("COGWORKER_REDIS_CLUSTER") or "")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def validate_ttls(config: Any) -> None:
    """A kept result's and a workflow's lifetimes: whole seconds, at least 1."""
    for name in ("result_ttl", "workflow_ttl"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be a whole number of seconds, at least 1; got {value!r}")
