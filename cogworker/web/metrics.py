"""The Metrics tab, as Sidekiq 7's: ``/metrics`` shows, over a chosen window (1 h, 8 h,
24 h, 72 h), a chart of the busiest classes' executions and a table per job class
(executions, failures, total and average time, p50/p95/p99); ``/metrics/<class>`` one
class's executions and failures per step and the histogram of its execution times.
Everything through ``api.window_metrics`` / ``api.class_window``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from .charts import CLASS_COLOURS, FAILED, PROCESSED, histogram_chart, series_chart, width_of
from .views import Templates, config_of

CHARTED = 5  # classes drawn on the tab's chart (the busiest); the table has them all
WINDOW_TITLES = {"1h": "last hour", "8h": "last 8 hours", "24h": "last 24 hours", "72h": "last 72 hours"}


def window_of(request: Request) -> str:
    """The window asked for; an unknown one is the last hour (a hand-edited link)."""
    name = request.query_params.get("window", "1h")
    return name if name in api.WINDOWS else "1h"


def svg(chart: str) -> Response:
    return Response(chart, media_type="image/svg+xml", headers={"cache-control": "no-store"})


def routes(templates: Templates) -> list[Route]:
    def overview(request: Request) -> Response:
        name = window_of(request)
        found = api.window_metrics(name, config_of(request))
        win = found.window
        busiest = [s.job_class for s in found.classes[:CHARTED]]
        lines = [
            (c, CLASS_COLOURS[i], [p + f for p, f in zip(found.processed[c], found.failed[c], strict=True)])
            for i, c in enumerate(busiest)
        ]
        per = "minute" if win.step == 60 else "hour"
        width = width_of(request.query_params.get("w"))  # ?chart=classes&w=: the chart alone, that wide
        chart = series_chart(win.starts, win.step, lines, f"executions per {per} (UTC), busiest classes", width)
        if request.query_params.get("chart") == "classes":
            return svg(chart)
        return templates.render(
            request,
            "metrics.html",
            rows=found.classes,
            window=name,
            chart=chart,
            windows=WINDOW_TITLES,
            title_of_window=WINDOW_TITLES[name],
        )

    def detail(request: Request) -> Response:
        name, job_class = window_of(request), request.path_params["job_class"]
        found = api.class_window(job_class, name, config_of(request))
        win = found.window
        per = "minute" if win.step == 60 else "hour"
        width, alone = width_of(request.query_params.get("w")), request.query_params.get("chart")
        runs = series_chart(
            win.starts,
            win.step,
            [
                ("executions", PROCESSED, [p + f for p, f in zip(found.processed, found.failed, strict=True)]),
                ("failures", FAILED, found.failed),
            ],
            f"executions and failures per {per} (UTC)",
            width,
        )
        histogram = histogram_chart(found.histogram, width)
        if alone in ("runs", "histogram"):  # ?chart=...&w=: that chart alone, that wide
            return svg(runs if alone == "runs" else histogram)
        return templates.render(
            request,
            "metrics_class.html",
            job_class=job_class,
            window=name,
            found=found,
            runs_chart=runs,
            histogram=histogram,
            windows=WINDOW_TITLES,
            title_of_window=WINDOW_TITLES[name],
        )

    return [
        Route("/metrics", overview, methods=["GET"]),
        Route("/metrics/{job_class}", detail, methods=["GET"]),
    ]
