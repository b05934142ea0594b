"""``cogworker periodic list|disable|enable|run-now``: the entries as the workers published
them (``api.periodic_entries()``: this command never imports the app), and the fleet-wide
disabled set."""

from __future__ import annotations

import argparse
from typing import Any

from .. import api
from .output import not_found, print_json, relative, table


def run(args: argparse.Namespace) -> int:
    entries = {e.name: e for e in api.periodic_entries()}
    if args.action == "list":
        return show(list(entries.values()), args.json)
    name = args.name
    entry = entries.get(name)
    if entry is None:
        # A name no worker published may be a typo: disabling it would change nothing.
        raise not_found(
            f"no periodic entry named {name!r} (known: {', '.join(sorted(entries)) or 'none'}; "
            "a worker publishes its entries at boot)"
        )
    jid = None
    if args.action == "disable":
        changed = api.disable_periodic(name)
        result: dict[str, Any] = {"pjid": name, "enabled": False}
    elif args.action == "enable":
        changed = api.enable_periodic(name)
        result = {"pjid": name, "enabled": True}
    else:
        changed = True
        jid = api.run_periodic_now(name)
        result = {"pjid": name, "jid": jid, "queue": entry.queue}
        if jid is None:
            result["dropped"] = "by a client middleware"
    if not changed:
        raise not_found(f"no periodic entry named {name!r} (unpublished meanwhile)")
    if args.json:
        print_json(result)
    elif args.action == "run-now":
        if jid is None:
            print(f"periodic {name}: its job was dropped on enqueue (a client middleware)")
        else:
            print(f"periodic {name}: enqueued {jid} on {result['queue']} (schedule unchanged)")
    else:
        print(f"periodic {name}: {'enabled' if result['enabled'] else 'disabled'} (fleet-wide, from its next slot)")
    return 0


def show(entries: list[api.PeriodicEntry], as_json: bool) -> int:
    if as_json:
        print_json({"entries": [{**e.record, "enabled": not e.disabled} for e in entries]})
        return 0
    if not entries:
        print("no periodic entries published (a worker publishes the entries its app registers, at boot)")
        return 0
    rows = [
        [
            e.name,
            e.cron or "-",
            e.job_class or "-",
            e.queue,
            relative(e.next_fire),
            relative(e.last_fired_at),
            "no" if e.disabled else "yes",
        ]
        for e in entries
    ]
    print(table(["NAME", "CRON", "JOB", "QUEUE", "NEXT", "LAST FIRED", "ENABLED"], rows))
    return 0
