"""Charts as SVG drawn by the server (no chart library, no script): a line chart of
processed/failed per second from the counters sampled while the dashboard polls, and bar
charts of processed/failed per day. Colours are SVG attributes, not inline style, so the
Content-Security-Policy (style-src 'self') allows them."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from html import escape

from ..api import DayStats

PROCESSED = "#2f7d4f"
FAILED = "#c0392b"
WINDOW = 300.0  # seconds the live chart shows


class Sampler:
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
            if span > 0 and time.time() - t1 <= WINDOW:
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
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" aria-label="{escape(label)}" font-family="sans-serif" font-size="11">',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    for i in range(5):
        y = 10 + (height - 40) * i / 4
        parts.append(f'<line x1="44" y1="{y:.1f}" x2="{width - 6}" y2="{y:.1f}" stroke="#e3e6ea"/>')
        value = top * (4 - i) / 4
        parts.append(f'<text x="40" y="{y + 4:.1f}" text-anchor="end" fill="#555">{value:g}</text>')
    parts.append(f'<text x="44" y="{height - 4}" fill="#555">{escape(unit)}</text>')
    return parts


def _legend(width: int) -> str:
    return (f'<rect x="{width - 170}" y="{2}" width="10" height="10" fill="{PROCESSED}"/>'
            f'<text x="{width - 156}" y="11" fill="#333">processed</text>'
            f'<rect x="{width - 90}" y="2" width="10" height="10" fill="{FAILED}"/>'
            f'<text x="{width - 76}" y="11" fill="#333">failed</text>')


def live_chart(rates: Sequence[tuple[float, float, float]], now: float | None = None,
               width: int = 720, height: int = 200) -> str:
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
        if rates:
            points = " ".join(point(r[0], r[index]) for r in rates)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
    if not rates:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">'
                     'collecting samples…</text>')
    parts.append(_legend(width))
    parts.append("</svg>")
    return "".join(parts)


def day_chart(days: Sequence[DayStats], width: int = 720, height: int = 180) -> str:
    """One pair of bars per day, oldest at the left (``days`` comes today first)."""
    ordered = list(reversed(days))
    top = _nice_max(max([d.processed for d in ordered] + [d.failed for d in ordered] + [1]))
    parts = _frame(width, height, top, f"jobs per day, last {len(days)} days", f"per day, last {len(days)} days")
    plot_w, plot_h = width - 50, height - 40
    slot = plot_w / max(1, len(ordered))
    bar = max(1.0, slot * 0.4)
    for i, day in enumerate(ordered):
        x = 46 + i * slot
        for offset, value, colour in ((0.0, day.processed, PROCESSED), (bar, day.failed, FAILED)):
            h = plot_h * value / top
            parts.append(f'<rect x="{x + offset:.1f}" y="{10 + plot_h - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                         f'fill="{colour}"><title>{escape(day.date)}: {value}</title></rect>')
        if len(ordered) <= 10 or i % 5 == 0:
            parts.append(f'<text x="{x:.1f}" y="{height - 16}" fill="#555">{escape(day.date[5:])}</text>')
    parts.append(_legend(width))
    parts.append("</svg>")
    return "".join(parts)
