"""Quiet or stop a whole master (or a single-process worker) through Redis: a request in
``control:<identity>``, which the process takes on its next heartbeat and acts on as on
TSTP or TERM (docs/architecture.md#operator-api)."""

from __future__ import annotations

from ..config import Config, get_config
from ..core.heartbeat import process_ttl
from ..transitions import operator
from .records import checked

CONTROL_TTL_MIN = 60  # seconds; longer than any beat interval a live process keeps


def _request(identity: str, command: str, config: Config | None) -> bool:
    if not isinstance(identity, str) or not identity:
        return False
    config = (config or get_config()).fleet  # masters beat and take requests in the fleet
    client, keys = config.redis(), config.keys
    ttl = max(CONTROL_TTL_MIN, process_ttl(config))
    with checked(client, keys.process(identity), "hash"):
        return operator.api_control(
            client, process=keys.process(identity), control=keys.control(identity), command=command, ttl=ttl
        )


def quiet_process(identity: str, config: Config | None = None) -> bool:
    """Ask a live master or single-process worker to go quiet (as on TSTP): it takes no new
    jobs, running ones finish, looked-ahead ones go back. Acted on within one heartbeat.
    False if ``identity`` is no live master or worker (a prefork child included)."""
    return _request(identity, "quiet", config)


def stop_process(identity: str, config: Config | None = None) -> bool:
    """Ask a live master or single-process worker to stop gracefully (as on the first
    TERM): running jobs finish within its --timeout, the rest stays queued. Acted on within
    one heartbeat; a second request while it stops changes nothing (no stop-now from
    here). False if ``identity`` is no live master or worker."""
    return _request(identity, "stop", config)
