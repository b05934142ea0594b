"""Charts as SVG drawn by the server (no chart library, no script): a line chart of
processed/failed per second from the counters sampled while the dashboard polls, bar
charts of processed/failed per day, and the Metrics tab's runs per step of a window and
histogram of execution times. Colours are SVG attributes, not inline style, so the
Content-Security-Policy (style-src 'self') allows them."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from html import escape

from ..api import DayStats
from ..api.windows import Bar
from ..wording import counted

PROCESSED = "#2f7d4f"
FAILED = "#c0392b"
WINDOW = 300.0  # seconds the live chart shows
# Samples further apart than this (the dashboard polls every 2 s) leave a gap: no page was
# polling (closed, paused). The live chart breaks its lines there, not drawing a rate
# averaged over the gap as if it were measured.
GAP = 10.0
WIDTH, NARROWEST = 720, 300  # a chart's width: as drawn for a wide screen; the least asked for


def width_of(asked: str | None) -> int:
    """The width a page asked a chart for (its box's, ``?w=``: a phone's is under 400
    px), within [NARROWEST, WIDTH]; WIDTH when it asked none or nonsense."""
    try:
        return max(NARROWEST, min(WIDTH, int(asked or WIDTH)))
    except ValueError:
        return WIDTH


class ChartSampler:
    """Counter samples (time, processed, failed), at most one a second, WINDOW long: the
    live chart's data. One per app (per server process); any poller adds to it."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=int(WINDOW) + 10)
        self.lock = threading.Lock()

    def add(self, processed: int, failed: int, at: float | None = None) -> None:
        at = time.time() if at is None else at
        with self.lock:
            if self.samples and at - self.samples[-1][0] < 0.9:
                return
            self.samples.append((at, processed, failed))

    def rates(self) -> list[tuple[float, float, float]]:
        """(time, processed/s, failed/s) between consecutive samples in the window."""
        with self.lock:
            samples = list(self.samples)
        found = []
        for (t0, p0, f0), (t1, p1, f1) in zip(samples, samples[1:], strict=False):
            span = t1 - t0
            if 0 < span <= GAP and time.time() - t1 <= WINDOW:
                found.append((t1, max(0, p1 - p0) / span, max(0, f1 - f0) / span))
        return found


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value``: the axis top."""
    step = 1.0
    while True:
        for m in (1, 2, 5):
            if step * m >= value:
                return step * m
        step *= 10


def _frame(width: int, height: int, top: float, label: str, unit: str) -> list[str]:
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(label)}" font-family="sans-serif" font-size="11">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for i in range(5):
        y = 10 + (height - 40) * i / 4
        parts.append(f'<line x1="44" y1="{y:.1f}" x2="{width - 6}" y2="{y:.1f}" stroke="#e3e6ea"/>')
        value = top * (4 - i) / 4
        parts.append(f'<text x="40" y="{y + 4:.1f}" text-anchor="end" fill="#555">{value:g}</text>')
    parts.append(f'<text x="44" y="{height - 4}" fill="#555">{escape(unit)}</text>')
    return parts


def _legend(width: int) -> str:
    return (
        f'<rect x="{width - 170}" y="{2}" width="10" height="10" fill="{PROCESSED}"/>'
        f'<text x="{width - 156}" y="11" fill="#333">processed</text>'
        f'<rect x="{width - 90}" y="2" width="10" height="10" fill="{FAILED}"/>'
        f'<text x="{width - 76}" y="11" fill="#333">failed</text>'
    )


def live_chart(
    rates: Sequence[tuple[float, float, float]], now: float | None = None, width: int = 720, height: int = 200
) -> str:
    """Processed and failed per second, newest at the right: over the last WINDOW seconds,
    or from the first sample (at least a minute) while there are fewer, so they fill it."""
    now = time.time() if now is None else now
    span = min(WINDOW, max(60.0, now - rates[0][0] + 2)) if rates else WINDOW
    span_text = "5 min" if span >= WINDOW else f"{span:.0f} s"
    top = _nice_max(max([r[1] for r in rates] + [r[2] for r in rates] + [1.0]))
    parts = _frame(width, height, top, f"jobs per second, last {span_text}", f"per second, last {span_text}")
    plot_w, plot_h = width - 50, height - 40

    def point(at: float, value: float) -> str:
        x = 44 + plot_w * (1 - min(span, max(0.0, now - at)) / span)
        y = 10 + plot_h * (1 - value / top)
        return f"{x:.1f},{y:.1f}"

    for index, colour in ((1, PROCESSED), (2, FAILED)):
        for run in runs_of(rates):  # one line per stretch without a gap
            points = " ".join(point(r[0], r[index]) for r in run)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
    if not rates:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">collecting samples…</text>'
        )
    parts.append(_legend(width))
    parts.append("</svg>")
    return "".join(parts)


def runs_of(rates: Sequence[tuple[float, float, float]]) -> list[list[tuple[float, float, float]]]:
    """The rates in stretches: a new one wherever two are more than GAP apart."""
    found: list[list[tuple[float, float, float]]] = []
    for rate in rates:
        if not found or rate[0] - found[-1][-1][0] > GAP:
            found.append([])
        found[-1].append(rate)
    return found


def day_chart(days: Sequence[DayStats], width: int = 720, height: int = 180) -> str:
    """One pair of bars per day, oldest at the left (``days`` comes today first)."""
    ordered = list(reversed(days))
    top = _nice_max(max([d.processed for d in ordered] + [d.failed for d in ordered] + [1]))
    parts = _frame(width, height, top, f"jobs per day, last {len(days)} days", f"per day, last {len(days)} days")
    plot_w, plot_h = width - 50, height - 40
    slot = plot_w / max(1, len(ordered))
    bar = max(1.0, slot * 0.4)
    every = max(1 if len(ordered) <= 10 else 5, math.ceil(36 / slot))  # a date label is 30 px wide
    for i, day in enumerate(ordered):
        x = 46 + i * slot
        for offset, value, colour in ((0.0, day.processed, PROCESSED), (bar, day.failed, FAILED)):
            h = plot_h * value / top
            parts.append(
                f'<rect x="{x + offset:.1f}" y="{10 + plot_h - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>{escape(day.date)}: {value}</title></rect>'
            )
        if i % every == 0:
            parts.append(f'<text x="{x:.1f}" y="{height - 16}" fill="#555">{escape(day.date[5:])}</text>')
    parts.append(_legend(width))
    parts.append("</svg>")
    return "".join(parts)


# -- the Metrics tab: runs per step of a window, and a class's histogram of execution times --

CLASS_COLOURS = ("#245b9e", "#2f7d4f", "#b9770e", "#7d3c98", "#c0392b", "#17808a", "#6b6f1f", "#a04e72")


def _step_label(start: int, step: int, span: int) -> str:
    fmt = "%H:%M" if step == 60 else "%H:00" if span <= 24 else "%m-%d %H:00"
    return time.strftime(fmt, time.gmtime(start))


def _x_labels(starts: Sequence[int], step: int, x_of: Callable[[int], float], height: int) -> list[str]:
    every = max(1, len(starts) // 6)
    last = len(starts) - 1
    return [
        f'<text x="{x_of(i):.1f}" y="{height - 16}" fill="#555" text-anchor="{"end" if i == last else "middle"}">'
        f"{_step_label(start, step, len(starts))}</text>"
        for i, start in enumerate(starts)
        if (last - i) % every == 0
    ]


def series_chart(
    starts: Sequence[int],
    step: int,
    lines: Sequence[tuple[str, str, Sequence[int]]],
    label: str,
    width: int = 720,
    height: int = 220,
) -> str:
    """Counts per step (``starts``, oldest at the left), one line per (name, colour,
    values), with a legend; each point's tooltip says its step and count."""
    top = _nice_max(max([max(values, default=0) for _, _, values in lines] + [1]))
    parts = _frame(width, height, top, label, label)
    plot_w, plot_h = width - 56, height - 40
    slots = max(1, len(starts) - 1)

    def x_of(i: int) -> float:
        return 48 + plot_w * i / slots

    def y_of(value: float) -> float:
        return 10 + plot_h * (1 - value / top)

    parts.extend(_x_labels(starts, step, x_of, height))
    for name, colour, values in lines:
        points = " ".join(f"{x_of(i):.1f},{y_of(v):.1f}" for i, v in enumerate(values))
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
            f"<title>{escape(name)}</title></polyline>"
        )
        for i, v in enumerate(values):
            if v:
                parts.append(
                    f'<circle cx="{x_of(i):.1f}" cy="{y_of(v):.1f}" r="2.5" fill="{colour}"><title>'
                    f"{escape(name)}, {_step_label(starts[i], step, len(starts))}: {v}</title></circle>"
                )
    shown = lines[:5]  # a legend row holds five, each cut to its share of the width
    room = min(130, (width - 50) // max(1, len(shown)))
    for i, (name, colour, _) in enumerate(shown):
        x = 50 + i * room
        parts.append(
            f'<rect x="{x}" y="2" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 14}" y="11" fill="#333">{escape(_short(name, max(4, (room - 18) // 7)))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def ms_text(ms: float) -> str:
    """A bucket edge for an axis: 0.25 ms, 8 ms, 1 s, 2 min."""
    if ms < 1000:
        return f"{ms:g} ms" if ms >= 1 else f"{ms:.3g} ms"
    if ms < 120_000:
        return f"{ms / 1000:g} s"
    return f"{ms / 60_000:.0f} min"


def histogram_chart(bars: Sequence[Bar], width: int = 720, height: int = 220) -> str:
    """Runs per execution time, one bar per doubling, fastest at the left."""
    top = _nice_max(max([b.runs for b in bars] + [1]))
    parts = _frame(width, height, top, "runs by execution time", "runs by execution time")
    plot_w, plot_h = width - 56, height - 40
    slot = plot_w / max(1, len(bars))
    for i, bar in enumerate(bars):
        h = plot_h * bar.runs / top
        x = 48 + i * slot
        parts.append(
            f'<rect x="{x + slot * 0.1:.1f}" y="{10 + plot_h - h:.1f}" width="{slot * 0.8:.1f}" '
            f'height="{h:.1f}" fill="{CLASS_COLOURS[0]}"><title>{ms_text(bar.low_ms)} to '
            f"{ms_text(bar.high_ms)}: {counted(bar.runs, 'run', grouped=True)}</title></rect>"
        )
        if i % max(1, math.ceil(44 / slot)) == 0:  # a label every 44 px at least
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{height - 16}" fill="#555" text-anchor="middle">'
                f"{ms_text(bar.low_ms)}</text>"
            )
    if not bars:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">no run in this window</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
