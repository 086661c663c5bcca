"""The report as one self-contained, offline HTML page (``andon context --html``).

A stacked area chart of the main thread's context over turns by component (SVG, drawn
here), any turn's composition (a select), duplicates and stale reads (tables), and a message
browser with search and filters (a small inline script). Agent text is hostile input: it is
only ever HTML-escaped into the markup or placed in a JSON data block with ``<``, ``>`` and
``&`` escaped, and the script writes it with ``textContent``. No external URL.
"""

from __future__ import annotations

import html
import json
from typing import Any

from andon.context.model import Conversation

_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
            "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#9467bd")
_W, _H, _PAD = 900, 300, 40


def _data_block(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def chart(turns: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    """The stacked area SVG of ``turns`` and the colour of each component."""
    comps: dict[str, int] = {}
    for t in turns:
        for k, v in t["by_component"].items():
            comps[k] = comps.get(k, 0) + v
    order = sorted(comps, key=lambda k: -comps[k])
    colour = {k: _COLOURS[i % len(_COLOURS)] for i, k in enumerate(order)}
    peak = max((sum(t["by_component"].values()) for t in turns), default=0) or 1
    n = len(turns)

    def x(i: int) -> float:
        return _PAD + (i * (_W - 2 * _PAD) / (n - 1) if n > 1 else (_W - 2 * _PAD) / 2)

    def y(v: float) -> float:
        return _H - _PAD - v * (_H - 2 * _PAD) / peak

    base = [0.0] * n
    paths = []
    for comp in order:
        top = [b + t["by_component"].get(comp, 0) for b, t in zip(base, turns, strict=True)]
        pts = [f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(top)]
        pts += [f"{x(i):.1f},{y(v):.1f}" for i, v in reversed(list(enumerate(base)))]
        paths.append(f'<polygon class="area" points="{" ".join(pts)}" fill="{colour[comp]}">'
                     f"<title>{html.escape(comp)}</title></polygon>")
        base = top
    axis = (f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" '
            f'stroke="#333"/><text x="{_PAD}" y="{_PAD - 10}">{peak:,} tokens</text>'
            f'<text x="{_W - _PAD}" y="{_H - 10}" text-anchor="end">turn {n}</text>')
    svg = (f'<svg class="chart" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" '
           f'>{"".join(paths)}{axis}</svg>')
    return svg, colour


def _table(rows: list[list[Any]], head: list[str]) -> str:
    if not rows:
        return "<p>none</p>"
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def page(report: dict[str, Any], conv: Conversation) -> str:
    """The whole page for ``report`` (``analyse.analyse``) of ``conv``."""
    main = report["threads"][0]
    svg, colour = chart(main["turns"])
    legend = "".join(f'<span class="key"><i style="background:{c}"></i>{html.escape(k)}</span>'
                     for k, c in colour.items())
    dup = report["duplicates"]
    dups = _table([[g["kind"], g["copies"], g["tokens"], f"{g['share']:.1%}", g["component"],
                    "; ".join(g["locations"][:6]), g["excerpt"][:80]] for g in dup["groups"]],
                  ["kind", "copies", "tokens each", "share", "component", "where", "text"])
    stale = _table([[s["path"], s["read"], s["edit"], s["used"]]
                    for s in report["reads"]["stale"]], ["file", "read", "edited", "used"])
    reread = _table([[r["path"], len(r["reads"]), "; ".join(r["reads"][:6])]
                     for r in report["reads"]["reread"]], ["file", "reads", "where"])
    messages = [{"thread": t.name, "i": i, "role": m.role, "source": m.source,
                 "parts": [{"kind": p.kind, "tool": p.tool, "tokens": p.tokens,
                            "text": p.text[:20000]} for p in m.parts]}
                for t in conv.threads for i, m in enumerate(t.messages)]
    data = {"turns": main["turns"], "colour": colour, "messages": messages}
    title = html.escape(f"context of {report['path']}")
    summary = html.escape(f"{report['format']} · model {report['model'] or 'unknown'} · "
                          f"{report['local_tokens']:,} tokens ({report['encoding']}) · "
                          f"{len(main['turns'])} turns · peak {main['peak']:,} · "
                          f"duplicates {dup['share']:.1%}")
    return _TEMPLATE.format(title=title, summary=summary, chart=svg, legend=legend, dups=dups,
                            stale=stale, reread=reread, data=_data_block(data))


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }}
.key {{ margin-right: 1em; white-space: nowrap; }} .key i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; }}
table {{ border-collapse: collapse; margin: .5em 0; }} td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }}
#messages .msg {{ border-left: 4px solid #ccc; margin: .4em 0; padding: .2em .6em; }}
#messages pre {{ white-space: pre-wrap; margin: .2em 0; max-height: 20em; overflow: auto; background: #f6f6f6; }}
.bar {{ height: 14px; display: inline-block; }}
</style></head><body>
<h1>{title}</h1><p>{summary}</p>
<h2>Context over turns (main thread)</h2>{chart}<div id="legend">{legend}</div>
<h2>Composition of a turn</h2><select id="turn"></select><div id="composition"></div>
<h2>Repeated content</h2>{dups}
<h2>Stale reads</h2>{stale}<h2>Files read more than once</h2>{reread}
<h2>Messages</h2>
<input id="search" type="search" placeholder="search text"> <select id="role"><option value="">every role</option><option>system</option><option>user</option><option>assistant</option><option>tool</option></select>
<select id="kind"><option value="">every part</option><option>text</option><option>tool_call</option><option>tool_result</option><option>reasoning</option><option>image</option><option>compaction_summary</option></select>
<span id="count"></span><div id="messages"></div>
<script type="application/json" id="data">{data}</script>
<script>
const D = JSON.parse(document.getElementById("data").textContent);
const el = (tag, text) => {{ const e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }};
const sel = document.getElementById("turn"), comp = document.getElementById("composition");
D.turns.forEach((t, i) => {{ const o = el("option", "turn " + t.turn + " · " + t.size + " tokens"); o.value = i; sel.appendChild(o); }});
function showTurn() {{
  comp.replaceChildren(); const t = D.turns[sel.value]; if (!t) return;
  const total = Object.values(t.by_component).reduce((a, b) => a + b, 0) || 1;
  const tab = el("table");
  Object.entries(t.by_component).sort((a, b) => b[1] - a[1]).forEach(([k, v]) => {{
    const tr = el("tr"); tr.appendChild(el("td", k)); tr.appendChild(el("td", String(v)));
    const td = el("td"), bar = el("span"); bar.className = "bar"; bar.style.width = Math.max(1, 400 * v / total) + "px";
    bar.style.background = D.colour[k] || "#999"; td.appendChild(bar); tr.appendChild(td); tab.appendChild(tr); }});
  comp.appendChild(tab);
}}
sel.addEventListener("change", showTurn); sel.value = D.turns.length - 1; showTurn();
const box = document.getElementById("messages");
function showMessages() {{
  const q = document.getElementById("search").value.toLowerCase(), role = document.getElementById("role").value,
        kind = document.getElementById("kind").value;
  box.replaceChildren(); let n = 0;
  for (const m of D.messages) {{
    if (role && m.role !== role) continue;
    const parts = m.parts.filter(p => (!kind || p.kind === kind) && (!q || p.text.toLowerCase().includes(q)));
    if (!parts.length) continue;
    if (++n > 500) break;
    const d = el("div"); d.className = "msg";
    d.appendChild(el("b", m.thread + " · " + m.role + " · " + m.source));
    for (const p of parts) {{ d.appendChild(el("div", p.kind + (p.tool ? " " + p.tool : "") + " · " + p.tokens + " tokens")); d.appendChild(el("pre", p.text)); }}
    box.appendChild(d);
  }}
  document.getElementById("count").textContent = n + " messages";
}}
["search", "role", "kind"].forEach(id => document.getElementById(id).addEventListener("input", showMessages));
showMessages();
</script></body></html>
"""
