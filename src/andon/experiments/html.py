"""The comparison as one self-contained HTML page: the style sheet inline, the plots inline
SVG (``plots.py``), no script, no font, no image and no URL, so it opens offline and can be
mailed or archived as one file. Everything from the data is escaped (Jinja2 autoescape)."""

from __future__ import annotations

from jinja2 import Environment
from markupsafe import Markup

from . import plots
from .compare import Comparison, Pair
from .render import (
    METRIC_LABELS,
    dropped_summary,
    fraction,
    ordered_rows,
    p_text,
    pct,
    rate_text,
    times,
)

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>andon compare: {{ c.baseline }} — {{ c.source }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .2em .7em; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.note { color: #555; } .worse { color: #b00020; } .better { color: #1b7f3b; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
svg.plot { background: #fafafa; border: 1px solid #ddd; font-size: 11px; }
svg .bar { fill: #4a7fb5; } svg .ci { fill: #f2c14e; opacity: .35; }
svg .median { stroke: #c0392b; stroke-width: 2; } svg .median-label { fill: #c0392b; }
svg .unity, svg .diagonal { stroke: #888; stroke-dasharray: 4 3; }
svg .axis, svg .tick { stroke: #444; } svg .interval { stroke: #4a7fb5; stroke-width: 3; }
svg .rate { fill: #c0392b; } svg .title { font-weight: bold; }
svg .point { fill-opacity: .7; } svg .point.same { fill: #777; }
svg .point.worse { fill: #b00020; } svg .point.better { fill: #1b7f3b; }
</style></head><body>
<h1>Comparison against {{ c.baseline }}</h1>
<p>Runs: <code>{{ c.source }}</code>. Bootstrap seed {{ c.seed }}, {{ c.resamples }}
resamples; {{ conf }}% intervals.{% if c.ignored_columns %} Ignored columns:
{{ c.ignored_columns|join(", ") }}.{% endif %}</p>
<p class="note">Pairing: {{ c.pairing_rule }}</p>
<h2>Conditions</h2>
<table><tr><th>condition</th><th>tasks</th><th>valid runs</th><th>errors</th>
<th>resolved</th><th>rate</th><th>{{ conf }}% CI (Wilson)</th></tr>
{% for r in c.conditions %}<tr><td>{{ r.condition }}</td><td>{{ r.tasks }}</td>
<td>{{ r.runs }}</td><td>{{ r.errors }}</td><td>{{ r.resolved }}</td><td>{{ pct(r.rate) }}</td>
<td>{% if r.runs %}[{{ pct(r.low) }}, {{ pct(r.high) }}]{% else %}–{% endif %}</td></tr>
{% endfor %}</table>
{{ rates_svg }}
{% if c.observations %}<h2>Observations</h2>
<p class="note">Share of each condition's valid runs in which the harness saw it at least
once (Wilson {{ conf }}% interval), and the total count; rules in docs/experiments.md.</p>
<table id="observations"><tr><th>condition</th><th>observation</th><th>runs</th><th>seen</th>
<th>rate</th><th>{{ conf }}% CI (Wilson)</th><th>total</th></tr>
{% for o in c.observations %}<tr><td>{{ o.condition }}</td><td>{{ o.observation }}</td>
<td>{{ o.runs }}</td><td>{{ o.seen }}</td><td>{{ pct(o.rate) }}</td>
<td>[{{ pct(o.low) }}, {{ pct(o.high) }}]</td><td>{{ o.total }}</td></tr>
{% endfor %}</table>{% endif %}
{% for s in sections %}{% set p = s.pair %}
<h2>{{ p.b }} against {{ p.a }}</h2>
<p>{{ p.tasks }} tasks compared, {{ p.dropped|length }} dropped.</p>
{% if p.dropped %}<ul>{% for line in s.dropped %}<li>dropped {{ line }}</li>{% endfor %}</ul>{% endif %}
<p>Resolve rate {{ p.a }}: {{ rate_text(p.rate_a) }}, errors {{ p.rate_a.errors }}<br>
Resolve rate {{ p.b }}: {{ rate_text(p.rate_b) }}, errors {{ p.rate_b.errors }}</p>
<h3>Paired outcomes (first valid run per task)</h3>
<table class="paired"><tr><th></th><th>{{ p.b }} resolved</th><th>{{ p.b }} not</th></tr>
<tr><td>{{ p.a }} resolved</td><td>{{ p.table.both }} both</td><td>{{ p.table.only_a }} only {{ p.a }}</td></tr>
<tr><td>{{ p.a }} not</td><td>{{ p.table.only_b }} only {{ p.b }}</td><td>{{ p.table.neither }} neither</td></tr>
</table>
<p>Exact McNemar on {{ p.table.only_a + p.table.only_b }} discordant tasks:
p = {{ p_text(p.table.p_value) }}{% if p.table.p_holm is not none %}, Holm-adjusted
{{ p_text(p.table.p_holm) }}{% endif %}.</p>
<h3>Per-task ratios {{ p.b }}/{{ p.a }}</h3>
<table><tr><th>metric</th><th>tasks</th><th>{{ p.b }} higher</th><th>median</th><th>IQR</th>
<th>{{ conf }}% CI of median</th></tr>
{% for r in p.ratios %}<tr><td>{{ labels[r.metric] }}</td><td>{{ r.tasks }} of {{ r.tasks + r.missing }}</td>
<td>{{ r.b_higher }}</td><td>{{ times(r.median) }}</td>
<td>{% if r.tasks %}{{ times(r.q1) }} – {{ times(r.q3) }}{% else %}–{% endif %}</td>
<td>{% if r.tasks %}[{{ times(r.ci_low) }}, {{ times(r.ci_high) }}]{% else %}–{% endif %}</td></tr>
{% endfor %}</table>
<div class="plots">{% for svg in s.ratio_svgs %}{{ svg }}{% endfor %}{{ s.scatter }}</div>
{% if p.repeats %}{% set ra, rb = p.repeats %}
<h3>With repeats</h3>
<table><tr><th>k</th><th>pass@k {{ ra.condition }}</th><th>pass@k {{ rb.condition }}</th>
<th>pass^k {{ ra.condition }}</th><th>pass^k {{ rb.condition }}</th><th>tasks {{ ra.condition }} / {{ rb.condition }}</th></tr>
{% for pa, pb in s.pass_rows %}<tr><td>{{ pa.k }}</td><td>{{ pct(pa.pass_at_k) }}</td>
<td>{{ pct(pb.pass_at_k if pb else none) }}</td><td>{{ pct(pa.pass_hat_k) }}</td>
<td>{{ pct(pb.pass_hat_k if pb else none) }}</td><td>{{ pa.tasks }} / {{ pb.tasks if pb else 0 }}</td></tr>
{% endfor %}</table>
{% for r in p.repeats %}<p>Consistency {{ r.condition }} (tasks with ≥ 2 valid runs):
{{ r.always }} resolved every time, {{ r.sometimes }} sometimes, {{ r.never }} never.</p>
{% endfor %}{% endif %}
<h3>Worst regressions</h3>
<p>Resolved more often by {{ p.a }}: {{ p.regressions|join(", ") if p.regressions else "none" }}.<br>
Biggest cost increases: {{ s.dearer|join(", ") if s.dearer else "none" }}.</p>
<h3>Per task, worst first</h3>
<table class="tasks"><tr><th>task</th><th>{{ p.a }} resolved</th><th>{{ p.b }} resolved</th>
<th>{{ p.a }} errors</th><th>{{ p.b }} errors</th>{% for m in labels %}<th>{{ labels[m] }}</th>{% endfor %}</tr>
{% for r in s.rows %}<tr class="{{ s.kind(r) }}"><td>{{ r.task }}</td>
<td>{{ fraction(r.a.resolved, r.a.valid) }}</td><td>{{ fraction(r.b.resolved, r.b.valid) }}</td>
<td>{{ r.a.errors }}</td><td>{{ r.b.errors }}</td>
{% for m in labels %}<td>{{ times(r.ratios[m]) }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% endfor %}
<p class="note">Made by andon compare. Methods: Wilson (1927) score intervals; exact McNemar
(1947) test as a two-sided binomial test on the discordant pairs; percentile bootstrap
(Efron 1979) of the median ratio; pass@k unbiased estimator (Chen et al. 2021); pass^k
(Yao et al. 2024); Holm (1979) adjustment across candidates.</p>
</body></html>
"""

_ENV = Environment(autoescape=True, keep_trailing_newline=True)
_TEMPLATE = _ENV.from_string(PAGE)


def _change(row) -> int:
    fa, fb = row.a.resolved / row.a.valid, row.b.resolved / row.b.valid
    return (fb > fa) - (fb < fa)


def _section(pair: Pair) -> dict:
    ratio_svgs = []
    for r in pair.ratios:
        values = [v for row in pair.rows if (v := row.ratios[r.metric]) is not None]
        if values:
            ci = (r.ci_low, r.ci_high) if r.ci_low is not None and r.ci_high is not None \
                else None
            ratio_svgs.append(Markup(plots.ratio_plot(
                values, r.median, ci, f"{METRIC_LABELS[r.metric]} {pair.b}/{pair.a}")))
    points = [(row.task, a, b, _change(row)) for row in pair.rows
              if row.ratios["cost_usd"] is not None and (a := row.a.metrics["cost_usd"]) is not None
              and (b := row.b.metrics["cost_usd"]) is not None]
    by_task = {row.task: row for row in pair.rows}
    pass_rows = []
    if pair.repeats:
        ra, rb = pair.repeats
        by_k = {p.k: p for p in rb.pass_k}
        pass_rows = [(pa, by_k.get(pa.k)) for pa in ra.pass_k]
    return {"pair": pair, "dropped": dropped_summary(pair, shown=20),
            "ratio_svgs": ratio_svgs,
            "scatter": Markup(plots.scatter_plot(points, pair.a, pair.b)),
            "rows": ordered_rows(pair), "pass_rows": pass_rows,
            "dearer": [f"{t} {times(by_task[t].ratios['cost_usd'])}"
                       for t in pair.cost_increases],
            "kind": lambda row: {-1: "worse", 0: "", 1: "better"}[_change(row)]}


def render_html(comparison: Comparison) -> str:
    """The whole report as one HTML document (a string, UTF-8 when written): every section
    of the terminal report, every task, and the plots (``plots.py``) inline."""
    return _TEMPLATE.render(
        c=comparison, conf=round(100 * comparison.confidence),
        rates_svg=Markup(plots.rates_plot(comparison.conditions)),
        sections=[_section(p) for p in comparison.pairs], labels=METRIC_LABELS,
        pct=pct, times=times, p_text=p_text, rate_text=rate_text, fraction=fraction)
