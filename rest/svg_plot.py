"""Line charts as inline SVG, drawn on the server for the ``/ui`` dashboard.

A pure function of numbers to markup: no clock, no I/O, no JavaScript, so the
dashboard needs no chart library and no network. The only text in the SVG is
what this module formats (numbers and the caller's labels, escaped); colours
come from CSS classes the caller names from a fixed set.

Invariants of :func:`line_chart`:

* ``t_ms`` and every line's values are parallel lists, oldest first; a value
  that is None, not a number, or not finite is a gap (the polyline breaks).
* The x axis is ``x_range`` (ms); samples before its start are left out,
  samples after its end sit on its right edge.
* The y axis runs from 0 to a "nice" ceiling (1, 2 or 5 times a power of ten)
  at least 10 % above the largest value, so a flat line never runs along the
  frame, and is labelled with it and its half.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Line", "fmt_number", "line_chart", "number"]

# The chart's coordinate system (the SVG scales to its container's width).
_WIDTH, _HEIGHT = 360, 104
_LEFT, _RIGHT, _TOP, _BOTTOM = 46, 10, 10, 20
_PLOT_W = _WIDTH - _LEFT - _RIGHT
_PLOT_H = _HEIGHT - _TOP - _BOTTOM


@dataclass(frozen=True, slots=True)
class Line:
    """One series: ``css_class`` picks its colour (a fixed name, never view data)."""

    label: str
    css_class: str
    values: Sequence[object]


def number(value: object) -> float | None:
    """``value`` as a finite float, or None (bools, strings, NaN and nulls are gaps)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def fmt_number(value: float) -> str:
    """A short human figure: ``0.25``, ``12.5``, ``950``, ``9999``, ``12.3k``, ``4.5M``."""
    magnitude = abs(value)
    # Below 10,000 every digit fits; above, three significant ones tell enough.
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if magnitude >= scale:
            divisor = 1e3 if suffix == "k" else scale
            return f"{_trim(value / divisor, 1)}{suffix}"
    return _trim(value, 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2)


def _trim(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _nice_ceiling(value: float) -> float:
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for multiple in (1, 2, 5):
        if value <= multiple * power * (1 + 1e-9):  # 0.3 must not round up to 0.5
            return multiple * power
    return 10 * power


def _segments(t_ms: Sequence[object], values: Sequence[object], x0: float, x1: float,
              y_max: float) -> list[list[tuple[float, float]]]:
    """Screen points of one line, split where a sample is missing."""
    segments: list[list[tuple[float, float]]] = [[]]
    span = max(x1 - x0, 1.0)
    for raw_t, raw_v in zip(t_ms, values, strict=False):
        t, v = number(raw_t), number(raw_v)
        if t is None or t < x0:
            continue
        if v is None:
            if segments[-1]:
                segments.append([])
            continue
        x = _LEFT + min(t - x0, span) / span * _PLOT_W
        y = _TOP + _PLOT_H - max(v, 0.0) / y_max * _PLOT_H
        segments[-1].append((x, y))
    return [s for s in segments if s]


def _points(segment: list[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in segment)


def line_chart(title: str, t_ms: Sequence[object], lines: Sequence[Line],
               x_range: tuple[float, float], x_label: str) -> str | None:
    """An ``<svg class="plot">`` of ``lines`` over ``t_ms``; None when no line has a sample.

    ``title`` names the chart for screen readers; ``x_label`` is the left end of
    the x axis (the right end is "now").
    """
    x0, x1 = x_range
    visible = [number(v) for line in lines
               for t, v in zip(t_ms, line.values, strict=False)
               if (tn := number(t)) is not None and tn >= x0]
    present = [v for v in visible if v is not None]
    if not present:
        return None
    y_max = _nice_ceiling(max(present) * 1.1)
    parts = [
        f'<svg class="plot" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" preserveAspectRatio="xMidYMid meet">',
        f"<title>{escape(title)}</title>",
        f'<rect class="frame" x="{_LEFT}" y="{_TOP}" width="{_PLOT_W}" height="{_PLOT_H}"/>',
        f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + _PLOT_W}" '
        f'y1="{_TOP + _PLOT_H / 2}" y2="{_TOP + _PLOT_H / 2}"/>',
        f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end">'
        f"{escape(fmt_number(y_max))}</text>",
        f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + _PLOT_H / 2 + 4}" text-anchor="end">'
        f"{escape(fmt_number(y_max / 2))}</text>",
        f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + _PLOT_H}" text-anchor="end">0</text>',
        f'<text class="axis" x="{_LEFT}" y="{_HEIGHT - 4}">{escape(x_label)}</text>',
        f'<text class="axis" x="{_LEFT + _PLOT_W}" y="{_HEIGHT - 4}" text-anchor="end">now</text>',
    ]
    for line in lines:
        segments = _segments(t_ms, line.values, x0, x1, y_max)
        for segment in segments:
            if len(segment) > 1:
                parts.append(f'<polyline class="{line.css_class}" points="{_points(segment)}"/>')
        if segments:  # the newest sample, marked so that a lone sample still shows
            x, y = segments[-1][-1]
            parts.append(f'<circle class="{line.css_class}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>')
    parts.append("</svg>")
    return "".join(parts)
