"""Cron expressions: which shapes are accepted, and how they are read (seconds first)."""

from __future__ import annotations

from datetime import UTC, datetime

from croniter import CroniterBadDateError, croniter

from ..errors import ConfigurationError


def check_cron(label: str, cron: object) -> None:
    """Five fields, or six (seven with a year) with seconds first.

    Until 0.5 a six-field expression had its seconds *last*. Such an expression, read
    seconds-first, mostly still parses, with its seconds taken as the day of the week:
    ``"* * * * * */10"`` would fire every second on Sundays. So a six-field expression
    whose last field could be a seconds field (a number, a list, a range or a step; not
    ``*`` or ``?``) is refused: name the days (``MON-FRI``) instead of numbering them.
    """
    if not isinstance(cron, str):
        raise ConfigurationError(f"periodic entry {label!r}: the cron expression must be a string, got {cron!r}")
    fields = cron.split()
    if len(fields) >= 6:
        weekday = fields[5]
        if weekday not in ("*", "?") and croniter.is_valid(f"{weekday} * * * * *", second_at_beginning=True):
            moved = " ".join([weekday, *fields[:5], *fields[6:]])
            raise ConfigurationError(
                f"periodic entry {label!r}: {cron!r}: seconds come first (second minute hour day month "
                f"weekday); the last field, {weekday!r}, reads like seconds in the old order (seconds last). "
                f"For those seconds write {moved!r}; for days of the week use names (MON-FRI)"
            )
    if not croniter.is_valid(cron, second_at_beginning=True):
        shape = "" if len(fields) < 6 else " (six fields: second minute hour day month weekday; seconds come first)"
        raise ConfigurationError(f"periodic entry {label!r}: invalid cron expression {cron!r}{shape}")
    _check_fires(label, cron)


def _check_fires(label: str, cron: str) -> None:
    """Valid fields can still name no date ("0 0 30 2 *", 30 February; a year gone by):
    croniter only finds out when asked for the next one, which the ticker would ask
    on every tick, backing off forever."""
    try:
        cron_iter(cron, datetime.now(UTC)).get_next(float)
    except CroniterBadDateError:
        raise ConfigurationError(
            f"periodic entry {label!r}: cron expression {cron!r} never fires (no date matches it from now on)"
        ) from None


def cron_iter(cron: str, start: datetime) -> croniter:
    """croniter reading a six-field expression seconds first."""
    return croniter(cron, start, second_at_beginning=True)
