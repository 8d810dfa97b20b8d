"""The ops page's charts as inline SVG, drawn on the server: no script, no external asset,
nothing a Content-Security-Policy without 'unsafe-inline' refuses (colours come from
classes in ops/static/ops/ops.css, never a style attribute).

Each chart carries its own words for those who cannot see it: a `<title>` and a `<desc>`
that says what each line did, and the figures as a table."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 10, 24  # room for the axes' labels
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
COLOURS = 6  # .series-0 ... .series-5


@dataclass(frozen=True)
class Line:
    name: str
    css: str
    segments: list[str]  # polyline points, one string per run of known values
    dots: list[tuple[float, float]]  # runs of one value, which no polyline can draw
    total: str  # what the legend says beside the name


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    description: str
    unit: str
    lines: list[Line]
    y_ticks: list[tuple[float, str]]
    x_ticks: list[tuple[float, str, str]]  # x, label, text-anchor (the ends kept inside)
    objective: tuple[float, str] | None
    headers: list[str]
    rows: list[list[str]]
    # The frame, for the template (ops/templates/ops/ops_chart.html).
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    label_x: int = LEFT - 6  # the y axis' labels end here
    label_y: int = HEIGHT - 6  # the x axis' labels' baseline


def line_chart(
    chart_id: str,
    title: str,
    unit: str,
    starts: list[datetime],
    series: Mapping[str, Sequence[float | None]],
    *,
    objective: float | None = None,
    summed: bool = True,
) -> Chart:
    """`series` over `starts`, one line each; `summed` says the legend gives a series'
    total over the window (counts), else its highest value (levels, percentiles)."""
    known = [v for values in series.values() for v in values if v is not None]
    top = _nice_ceiling(max([*known, objective or 0.0, 0.0]))
    lines = [
        Line(name, f"series-{i % COLOURS}", *_runs(values, top), _legend(values, summed))
        for i, (name, values) in enumerate(series.items())
    ]
    return Chart(
        id=chart_id,
        title=title,
        description=_describe(title, unit, series, summed),
        unit=unit,
        lines=lines,
        y_ticks=[(_y(top * f, top), _figure(top * f)) for f in (0, 0.5, 1)],
        x_ticks=[
            (_x(i, len(starts)), f"{starts[i]:%H:%M}", _anchor(i, len(starts)))
            for i in _tick_indices(len(starts))
        ],
        objective=(_y(objective, top), _figure(objective)) if objective is not None else None,
        headers=["Start (UTC)", *series],
        rows=[
            [f"{start:%H:%M}", *(_figure(values[i]) for values in series.values())]
            for i, start in enumerate(starts)
            if any(values[i] for values in series.values())
        ],
    )


def _runs(
    values: Sequence[float | None], top: float
) -> tuple[list[str], list[tuple[float, float]]]:
    """Polylines of the runs of known values, and dots for the runs of one."""
    runs: list[list[tuple[float, float]]] = [[]]
    for i, value in enumerate(values):
        if value is None:
            runs.append([])
        else:
            runs[-1].append((round(_x(i, len(values)), 1), round(_y(value, top), 1)))
    segments = [" ".join(f"{x},{y}" for x, y in run) for run in runs if len(run) > 1]
    return segments, [run[0] for run in runs if len(run) == 1]


def _anchor(i: int, n: int) -> str:
    return "start" if i == 0 else "end" if i == n - 1 else "middle"


def _x(i: int, n: int) -> float:
    return LEFT + (PLOT_W * i / (n - 1) if n > 1 else 0)


def _y(value: float, top: float) -> float:
    return TOP + PLOT_H * (1 - value / top)


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def _tick_indices(n: int) -> list[int]:
    return sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})


def _figure(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.0f}" if value == int(value) or abs(value) >= 100 else f"{value:.3g}"


def _legend(values: Sequence[float | None], summed: bool) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "none"
    return f"{_figure(sum(known))} in all" if summed else f"highest {_figure(max(known))}"


def _describe(
    title: str, unit: str, series: Mapping[str, Sequence[float | None]], summed: bool
) -> str:
    told = "; ".join(f"{name}: {_legend(values, summed)}" for name, values in series.items())
    return f"{title}, {unit}. {told or 'Nothing recorded'}."
