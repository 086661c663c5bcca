"""The report's plots as inline SVG strings, drawn here so the HTML page needs no library,
script or network: the distribution of per-task ratios on a log scale with the median and
its interval, a paired scatter of A's and B's cost per task (log–log), and resolve rates
with their intervals.

Every text from the data (task and condition names) is escaped. Elements carry classes
(``bar``, ``median``, ``ci``, ``unity``, ``point``, ``diagonal``, ``rate``, ``interval``)
so that a test or a style sheet can find them; sizes are in SVG user units (px).
"""

from __future__ import annotations

import math
from html import escape

from .compare import Rate

W, H = 520, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 16, 36
NICE = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200,
        500, 1000)


def _svg(cls: str, label: str, body: list[str], width: int = W, height: int = H) -> str:
    return (f'<svg class="plot {cls}" role="img" '
            f'aria-label="{escape(label)}" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}">' + "".join(body) + "</svg>")


def _log_domain(values: list[float]) -> tuple[float, float]:
    """log10 bounds covering the values and 1 (the no-change line), padded."""
    logs = [math.log10(v) for v in values] + [0.0]
    lo, hi = min(logs), max(logs)
    pad = max(0.05, (hi - lo) * 0.05)
    return lo - pad, hi + pad


def _ticks(lo: float, hi: float) -> list[float]:
    ticks = [t for t in NICE if lo <= math.log10(t) <= hi]
    while len(ticks) > 9:  # keep labels apart
        ticks = ticks[::2] if 1 in ticks[::2] else ticks[1::2]
    return ticks


def _label(t: float) -> str:
    return f"×{t:g}"


def ratio_plot(values: list[float], median: float | None, ci: tuple[float, float] | None,
               title: str) -> str:
    """A histogram of the per-task ratios on a log10 axis: bars (``bar``), the no-change
    line at ×1 (``unity``), the median (``median``) and its interval (``ci``)."""
    if not values:
        return _svg("ratio-dist", title, [(f'<text x="{W / 2}" y="{H / 2}" '
                                          f'text-anchor="middle">no usable task</text>')])
    lo, hi = _log_domain(values + ([*ci] if ci else []))
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(v: float) -> float:
        return LEFT + (math.log10(v) - lo) / (hi - lo) * plot_w

    bins = max(5, min(40, int(math.sqrt(len(values))) * 2))
    counts = [0] * bins
    for v in values:
        i = int((math.log10(v) - lo) / (hi - lo) * bins)
        counts[min(max(i, 0), bins - 1)] += 1
    top = max(counts)
    body = [f'<text x="{LEFT}" y="12" class="title">{escape(title)}</text>']
    if ci:
        body.append(f'<rect class="ci" x="{x(ci[0]):.1f}" y="{TOP}" '
                    f'width="{max(1.0, x(ci[1]) - x(ci[0])):.1f}" height="{plot_h}"/>')
    for i, n in enumerate(counts):
        if n:
            h = n / top * plot_h
            bx = LEFT + i * plot_w / bins
            body.append(f'<rect class="bar" x="{bx:.1f}" y="{TOP + plot_h - h:.1f}" '
                        f'width="{plot_w / bins - 1:.1f}" height="{h:.1f}">'
                        f'<title>{n} tasks</title></rect>')
    base = TOP + plot_h
    body.append(f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{W - RIGHT}" y2="{base}"/>')
    for t in _ticks(lo, hi):
        body.append(f'<line class="tick" x1="{x(t):.1f}" y1="{base}" x2="{x(t):.1f}" '
                    f'y2="{base + 4}"/><text x="{x(t):.1f}" y="{base + 16}" '
                    f'text-anchor="middle">{_label(t)}</text>')
    body.append(f'<line class="unity" x1="{x(1):.1f}" y1="{TOP}" x2="{x(1):.1f}" y2="{base}"/>')
    if median is not None:
        body.append(f'<line class="median" x1="{x(median):.1f}" y1="{TOP}" '
                    f'x2="{x(median):.1f}" y2="{base}"><title>median {_label(median)}'
                    f'</title></line><text class="median-label" x="{x(median) + 4:.1f}" '
                    f'y="{TOP + 10}">median {median:.2f}</text>')
    body.append(f'<text x="{LEFT + plot_w / 2}" y="{H - 2}" text-anchor="middle">'
                f'B/A per task (log scale), {len(values)} tasks</text>')
    return _svg("ratio-dist", title, body)


def scatter_plot(points: list[tuple[str, float, float, int]], a: str, b: str) -> str:
    """Each task's cost under A (x) and B (y), log–log, with the diagonal B = A
    (``diagonal``); ``points`` are (task, cost A, cost B, change) with change −1 if A
    resolved it more often, +1 if B did, 0 if equally; circles (``point``) carry the task
    name as a tooltip."""
    size = 360
    if not points:
        return _svg("cost-scatter", "cost scatter", [
            (f'<text x="{size / 2}" y="{size / 2}" text-anchor="middle">no task with both '
            f'costs</text>')], size, size)
    values = [v for _, ca, cb, _ in points for v in (ca, cb)]
    lo, hi = _log_domain(values)
    span = size - LEFT - RIGHT

    def px(v: float) -> float:
        return LEFT + (math.log10(v) - lo) / (hi - lo) * span

    def py(v: float) -> float:
        return size - BOTTOM - (math.log10(v) - lo) / (hi - lo) * (size - TOP - BOTTOM)

    body = [(f'<line class="diagonal" x1="{px(10 ** lo):.1f}" y1="{py(10 ** lo):.1f}" '
            f'x2="{px(10 ** hi):.1f}" y2="{py(10 ** hi):.1f}"/>'),
            (f'<line class="axis" x1="{LEFT}" y1="{size - BOTTOM}" x2="{size - RIGHT}" '
            f'y2="{size - BOTTOM}"/><line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" '
            f'y2="{size - BOTTOM}"/>')]
    kind = {-1: "worse", 0: "same", 1: "better"}
    for task, ca, cb, change in points:
        body.append(f'<circle class="point {kind[change]}" cx="{px(ca):.1f}" '
                    f'cy="{py(cb):.1f}" r="3"><title>{escape(task)}: {escape(a)} '
                    f'${ca:.4g}, {escape(b)} ${cb:.4g}</title></circle>')
    body.append(f'<text x="{LEFT + span / 2}" y="{size - 4}" text-anchor="middle">'
                f'cost {escape(a)} (USD, log)</text><text x="12" y="{size / 2}" '
                f'transform="rotate(-90 12 {size / 2})" text-anchor="middle">cost {escape(b)}'
                f' (USD, log)</text>')
    return _svg("cost-scatter", f"cost per task, {a} against {b}", body, size, size)


def rates_plot(rates: list[Rate]) -> str:
    """Each condition's resolve rate (``rate``, a dot) with its interval (``interval``)
    on a 0–100 % axis; a condition without a valid run is named and left empty."""
    row, label_w = 28, 140
    height = TOP + row * len(rates) + BOTTOM
    span = W - label_w - RIGHT

    def x(p: float) -> float:
        return label_w + p * span

    body = []
    for i, r in enumerate(rates):
        y = TOP + row * i + row / 2
        body.append(f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end">'
                    f'{escape(r.condition)}</text>')
        if r.runs and r.low is not None and r.high is not None and r.rate is not None:
            body.append(f'<line class="interval" x1="{x(r.low):.1f}" y1="{y:.1f}" '
                        f'x2="{x(r.high):.1f}" y2="{y:.1f}"/><circle class="rate" '
                        f'cx="{x(r.rate):.1f}" cy="{y:.1f}" r="4"><title>'
                        f'{escape(r.condition)}: {r.resolved}/{r.runs}</title></circle>')
    base = height - BOTTOM
    body.append(f'<line class="axis" x1="{label_w}" y1="{base}" x2="{W - RIGHT}" '
                f'y2="{base}"/>')
    for p in (0, 0.25, 0.5, 0.75, 1.0):
        body.append(f'<text x="{x(p):.1f}" y="{base + 16}" text-anchor="middle">'
                    f'{round(100 * p)}%</text>')
    return _svg("rates", "resolve rates with 95% intervals", body, W, height)
