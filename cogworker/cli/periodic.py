"""``cogworker periodic list|disable|enable|run-now``: the entries as the workers published
them (``cron.schedule()``: this command never imports the app), and the fleet-wide
disabled set."""

from __future__ import annotations

import argparse
from typing import Any

from .. import cron
from .output import field, not_found, print_json, relative, table


def run(args: argparse.Namespace) -> int:
    published = cron.schedule()
    disabled = cron.disabled()
    if args.action == "list":
        return show(published, disabled, args.json)
    name = args.name
    if name not in published:
        # A name no worker published may be a typo: disabling it would change nothing.
        raise not_found(f"no periodic entry named {name!r} (known: {', '.join(sorted(published)) or 'none'}; "
                        "a worker publishes its entries at boot)")
    if args.action == "disable":
        cron.disable(name)
        result: dict[str, Any] = {"pjid": name, "enabled": False}
    elif args.action == "enable":
        cron.enable(name)
        result = {"pjid": name, "enabled": True}
    else:
        jid = cron.run_now(name)
        result = {"pjid": name, "jid": jid, "queue": published[name].get("queue")}
        if jid is None:
            result["dropped"] = "by a client middleware"
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


def show(published: dict[str, dict[str, Any]], disabled: set[str], as_json: bool) -> int:
    names = sorted(published)
    if as_json:
        print_json({"entries": [{**published[n], "enabled": n not in disabled} for n in names]})
        return 0
    if not names:
        print("no periodic entries published (a worker publishes the entries its app registers, at boot)")
        return 0
    rows = []
    for name in names:
        record = published[name]
        rows.append([name, field(record, "cron", "-"), field(record, "job", "-"), field(record, "queue", "-"),
                     relative(field(record, "next_fire")), relative(field(record, "last_fired_at")),
                     "no" if name in disabled else "yes"])
    print(table(["NAME", "CRON", "JOB", "QUEUE", "NEXT", "LAST FIRED", "ENABLED"], rows))
    return 0
