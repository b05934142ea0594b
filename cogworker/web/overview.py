"""The dashboard (counters, the live and daily charts, Redis), ``/stats.json``,
``/live.svg`` and ``/days.svg`` that its script polls, ``/busy`` (processes, quiet/stop a
master) and ``/unsettled``. The Metrics tab: ``metrics.py``."""

from __future__ import annotations

import time

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import api
from .charts import ChartSampler, day_chart, live_chart, width_of
from .views import PER_PAGE, Page, Templates, action, config_of, duration, page_number, redirect


def counters(stats: api.Stats) -> dict[str, int]:
    return {
        "processed": stats.processed,
        "failed": stats.failed,
        "busy": stats.busy,
        "enqueued": stats.enqueued,
        "scheduled": stats.scheduled_size,
        "retries": stats.retry_size,
        "dead": stats.dead_size,
        "unsettled": stats.unsettled_size,
        "processes": stats.processes,
    }


def routes(templates: Templates, sampler: ChartSampler) -> list[Route]:
    return dashboard_routes(templates, sampler) + process_routes(templates)


def dashboard_routes(templates: Templates, sampler: ChartSampler) -> list[Route]:
    def dashboard(request: Request) -> Response:
        config = config_of(request)
        stats = api.stats(config)
        sampler.add(stats.processed, stats.failed)
        days = api.history_stats(30, config)
        return templates.render(
            request,
            "dashboard.html",
            counters=counters(stats),
            redis=api.redis_info(config),
            week=day_chart(days[:7]),
            month=day_chart(days),
            latency=stats.default_latency,
        )

    def stats_json(request: Request) -> Response:
        config = config_of(request)
        stats = api.stats(config)
        sampler.add(stats.processed, stats.failed)
        info = api.redis_info(config)
        # Everything the dashboard shows, so its script refreshes all of it with the live chart.
        return JSONResponse(
            {
                **counters(stats),
                "latency": stats.default_latency,
                "latency_text": duration(stats.default_latency),
                "redis_version": info.version,
                "redis_memory": info.used_memory_human,
                "redis_clients": info.connected_clients,
                "redis_uptime": duration(info.uptime_seconds),
                "at": time.time(),
            },
            headers={"cache-control": "no-store"},
        )

    def days_svg(request: Request) -> Response:
        count = 7 if request.query_params.get("days") == "7" else 30
        return Response(
            day_chart(api.history_stats(count, config_of(request)), width_of(request.query_params.get("w"))),
            media_type="image/svg+xml",
            headers={"cache-control": "no-store"},
        )

    def live_svg(request: Request) -> Response:
        chart = live_chart(sampler.rates(), width=width_of(request.query_params.get("w")))
        return Response(chart, media_type="image/svg+xml", headers={"cache-control": "no-store"})

    return [
        Route("/", dashboard, methods=["GET"]),
        Route("/stats.json", stats_json, methods=["GET"]),
        Route("/live.svg", live_svg, methods=["GET"]),
        Route("/days.svg", days_svg, methods=["GET"]),
    ]


def process_routes(templates: Templates) -> list[Route]:
    def busy(request: Request) -> Response:
        found = api.processes(config_of(request))  # each master followed by its children
        return templates.render(request, "busy.html", processes=found)

    def control(request: Request, form: FormData) -> Response:
        identity, verb = str(form.get("identity", "")), str(form.get("action", ""))
        config = config_of(request)
        if verb == "quiet":
            done = api.quiet_process(identity, config)
        elif verb == "stop":
            done = api.stop_process(identity, config)
        else:
            return redirect(request, "/busy", f"unknown action {verb!r}")
        note = (
            f"{verb} sent to {identity}: it acts on its next heartbeat"
            if done
            else f"{identity} is no live master or worker: nothing sent"
        )
        return redirect(request, "/busy", note)

    def unsettled(request: Request) -> Response:
        config = config_of(request)
        page = Page(page_number(request), PER_PAGE, api.stats(config).unsettled_size, False)
        page.has_next = page.offset + PER_PAGE < (page.total or 0)
        rows = api.unsettled(page.offset, PER_PAGE, config)
        return templates.render(request, "unsettled.html", rows=rows, page=page)

    return [
        Route("/busy", busy, methods=["GET"]),
        Route("/busy/control", action(control), methods=["POST"]),
        Route("/unsettled", unsettled, methods=["GET"]),
    ]
