"""``/periodic``: every published entry with its schedule, last run and disabled state;
disable/enable and run-now, through ``cogworker.api``."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from .views import Templates, action, config_of, redirect


def routes(templates: Templates) -> list[Route]:
    def listing(request: Request) -> Response:
        entries = sorted(api.periodic_entries(config_of(request)), key=lambda e: e.name)
        return templates.render(request, "periodic.html", entries=entries)

    def change(request: Request, form: FormData) -> Response:
        name, verb = str(form.get("name", "")), str(form.get("action", ""))
        config = config_of(request)
        if verb == "disable":
            note = f"{name} disabled (fleet-wide, from its next slot)" if api.disable_periodic(name, config) else ""
        elif verb == "enable":
            note = f"{name} enabled" if api.enable_periodic(name, config) else ""
        elif verb == "run":
            jid = api.run_periodic_now(name, config)
            note = f"{name}: enqueued {jid} (schedule unchanged)" if jid else f"{name}: nothing enqueued"
        else:
            return redirect(request, "/periodic", f"unknown action {verb!r}")
        return redirect(request, "/periodic", note or f"no periodic entry named {name!r}")

    return [
        Route("/periodic", listing, methods=["GET"]),
        Route("/periodic/act", action(change), methods=["POST"]),
    ]
