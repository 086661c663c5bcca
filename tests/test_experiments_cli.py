"""`andon compare` through the real CLI: the terminal report's sections, the JSON document's
keys, bad input (exit 2, file:line and column, nothing on stdout), and the HTML file — one
self-contained page with no external URL, whose plots exist, are laid out by headless
Chromium with the network cut (where Debian's `chromium` is installed), and whose data is
escaped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from helpers import _in_process  # click's CliRunner with the CLI's consoles swapped

# the same hand-computed table as test_experiments_compare.py, condensed
RUNS = """task,condition,outcome,cost_usd,input_tokens,output_tokens,wall_s,model
t1,A,resolved,1,100,10,5,m
t2,A,resolved,1,100,10,5,m
t3,A,resolved,1,100,10,5,m
t4,A,resolved,1,100,10,5,m
t5,A,unresolved,1,100,10,5,m
t6,A,unresolved,1,100,10,5,m
t7,A,resolved,1,100,10,5,m
t8,A,error,7,,,,m
t1,B,resolved,2,300,30,5,m
t2,B,unresolved,0.5,50,5,5,m
t3,B,unresolved,,,,5,m
t4,B,resolved,0,100,10,5,m
t5,B,resolved,4,100,10,5,m
t6,B,unresolved,1,100,10,5,m
t7,B,resolved,3,100,10,5,m
t8,B,resolved,1,100,10,5,m
t9,B,resolved,1,100,10,5,m
"""

TOP_KEYS = {"source", "baseline", "conditions", "pairs", "seed", "resamples", "confidence",
            "ignored_columns", "pairing_rule", "observations"}
PAIR_KEYS = {"a", "b", "tasks", "dropped", "rate_a", "rate_b", "table", "ratios", "repeats",
             "rows", "regressions", "cost_increases"}
RATE_KEYS = {"condition", "resolved", "runs", "errors", "rate", "low", "high", "tasks"}
RATIO_KEYS = {"metric", "tasks", "missing", "b_higher", "median", "q1", "q3", "ci_low",
              "ci_high"}
CELL_KEYS = {"runs", "errors", "valid", "resolved", "first_resolved", "metrics", "fraction"}


def run(tmp_path: Path, *args: str):
    return _in_process(tmp_path, ("compare", *args), {"COLUMNS": "160"})


def runs_file(tmp_path: Path, text: str = RUNS) -> str:
    p = tmp_path / "runs.csv"
    p.write_text(text)
    return str(p)


def test_terminal_report_has_every_section(tmp_path):
    r = run(tmp_path, runs_file(tmp_path), "--baseline", "A", "--candidate", "B",
            "--seed", "7", "--resamples", "500")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for expected in [
        "bootstrap seed 7, 500 resamples",
        "ignored columns: model",
        "Pairing: A task is compared when both conditions",
        "7 tasks compared, 2 dropped",
        "dropped 1 × every run of A errored (1): t8",
        "dropped 1 × no run of A: t9",
        "resolve rate A: 5/7 = 71.4%",
        "errors 0",
        "3 both", "2 only A", "1 only B", "1 neither",
        "exact McNemar on 3 discordant tasks: p = 1.000",
        "Per-task ratios B/A",
        "5 of 7",              # cost: t3 has no B cost, t4's B cost is 0
        "worst regressions (resolved more often by A): t2, t3",
        "biggest cost increases: t5 ×4.00, t7 ×3.00, t1 ×2.00",
    ]:
        assert expected in out, expected
    # the conditions table counts A's error run apart
    assert re.search(r"A\s+8\s+7\s+1\s+5\s+71\.4%", out), out


def test_json_has_the_documented_keys_and_is_deterministic(tmp_path):
    f = runs_file(tmp_path)
    one = run(tmp_path, f, "--baseline", "A", "--json", "--resamples", "300")
    two = run(tmp_path, f, "--baseline", "A", "--json", "--resamples", "300")
    assert one.returncode == 0, one.stderr
    assert one.stdout == two.stdout
    doc = json.loads(one.stdout)
    assert set(doc) == TOP_KEYS
    assert (doc["seed"], doc["resamples"]) == (0, 300)
    (pair,) = doc["pairs"]
    assert set(pair) == PAIR_KEYS
    assert set(pair["rate_a"]) == RATE_KEYS and set(doc["conditions"][0]) == RATE_KEYS
    assert set(pair["ratios"][0]) == RATIO_KEYS
    assert set(pair["table"]) == {"both", "only_a", "only_b", "neither", "p_value", "p_holm"}
    row = pair["rows"][0]
    assert set(row) == {"task", "a", "b", "ratios"} and set(row["a"]) == CELL_KEYS
    assert pair["dropped"] == [{"task": "t8", "reason": "every run of A errored (1)"},
                               {"task": "t9", "reason": "no run of A"}]
    assert doc["conditions"][0]["errors"] == 1


def test_bad_input_exits_2_naming_file_line_and_column(tmp_path):
    f = runs_file(tmp_path, RUNS.replace("t5,B,resolved,4,", "t5,B,resolved,4 USD,"))
    r = run(tmp_path, f, "--baseline", "A")
    assert r.returncode == 2
    assert f"{f}:14: column 'cost_usd': expected a number >= 0 (or empty when not known), " \
           "got '4 USD'" in r.stderr
    assert r.stdout == ""
    r = run(tmp_path, runs_file(tmp_path), "--baseline", "X")
    assert r.returncode == 2 and "no condition 'X' (the baseline)" in r.stderr
    r = run(tmp_path, str(tmp_path / "none.csv"), "--baseline", "A")
    assert r.returncode == 2 and "none.csv: cannot read the runs file" in r.stderr
    r = run(tmp_path, runs_file(tmp_path), "--baseline", "A", "--resamples", "0")
    assert r.returncode == 2
    r = run(tmp_path, runs_file(tmp_path), "--baseline", "A", "--html",
            str(tmp_path / "no" / "such" / "dir.html"))
    assert r.returncode == 2 and "cannot write the report" in r.stderr


def test_the_real_command_in_its_own_process(tmp_path):
    f = runs_file(tmp_path)
    r = subprocess.run([sys.executable, "-m", "andon", "compare", f, "-a", "A", "-b", "B",
                        "--json", "--resamples", "200"], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["pairs"][0]["table"]["only_a"] == 2


class Elements(HTMLParser):
    """Every start tag with its attributes, and every attribute value that is a URL."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def having(self, tag: str, cls: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and cls in a.get("class", "").split()]


def test_html_is_one_offline_file_with_its_plots(tmp_path):
    out = tmp_path / "report.html"
    r = run(tmp_path, runs_file(tmp_path), "--baseline", "A", "--html", str(out),
            "--resamples", "300")
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stderr
    page = out.read_text()
    parsed = Elements()
    parsed.feed(page)
    # nothing to fetch: no URL in any src or href, no script, style sheet link or import
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "xlink:href"):
            url = re.match(r"\s*(https?:)?//", attrs.get(name, ""), re.IGNORECASE)
            assert not url, (tag, attrs)
        assert tag not in ("script", "link", "iframe", "img", "object", "embed")
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page
    # the plots
    assert len(parsed.having("svg", "rates")) == 1
    assert len(parsed.having("circle", "rate")) == 2            # A and B have valid runs
    assert len(parsed.having("line", "interval")) == 2
    dists = parsed.having("svg", "ratio-dist")
    assert len(dists) == 5          # cost, input, output, total tokens, wall; no tool time
    assert len(parsed.having("line", "median")) == 5
    assert parsed.having("rect", "bar") and parsed.having("rect", "ci")
    assert len(parsed.having("svg", "cost-scatter")) == 1
    points = parsed.having("circle", "point")
    assert len(points) == 5                                     # the tasks with a cost ratio
    assert len(parsed.having("circle", "worse")) == 1           # t2 (t3 has no B cost)
    assert len(parsed.having("circle", "better")) == 1          # t5: only B resolved it
    # every task is in the table
    for task in (f"t{i}" for i in range(1, 8)):
        assert f"<td>{task}</td>" in page


def test_names_from_the_file_are_escaped_in_html_and_terminal(tmp_path):
    evil_task = '<img src="https://x.invalid/a.png" onerror=alert(1)>'
    evil_cond = "[bold red]B[/bold red]&<b>"
    text = "task,condition,resolved,cost_usd\n" + "".join(
        f'"{task}",{cond},{ok},1\n' for task, cond, ok in [
            (evil_task.replace('"', '""'), "A", 1), (evil_task.replace('"', '""'), evil_cond, 0),
            ("plain", "A", 0), ("plain", evil_cond, 1)])
    out = tmp_path / "r.html"
    r = run(tmp_path, runs_file(tmp_path, text), "--baseline", "A", "--html", str(out),
            "--resamples", "100")
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert "<img" not in page and "&lt;img src=&#34;https://x.invalid" in page
    assert "<b>" not in page and "[bold red]B[/bold red]&amp;&lt;b&gt;" in page
    # rich markup in a name is printed as text, not applied
    assert "[bold red]B[/bold red]&<b>" in r.stdout
    assert evil_task in r.stdout


# What headless Chromium measures in the page, added to a test copy only: the shipped page has
# no script. One line per plot: its class, its laid-out size, and how many of its marks
# (bars, points, median lines) have a non-empty box.
MEASURE = """<script>
const plots = [...document.querySelectorAll("svg.plot")].map(svg => {
  const box = svg.getBoundingClientRect();
  const marks = [...svg.querySelectorAll("rect.bar, circle, line.median, line.interval")]
    .filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; }).length;
  return [svg.getAttribute("class"), Math.round(box.width), Math.round(box.height), marks];
});
document.body.setAttribute("data-plots", JSON.stringify(plots));
</script>"""


def test_headless_chromium_without_network_lays_out_every_plot(tmp_path):
    """The page, opened offline in headless Chromium, lays out every plot. scripts/test
    installs Debian's chromium; missing, the test skips — except with CI=true, where it fails."""
    from helpers import chromium_offline_dom
    out = tmp_path / "report.html"
    r = run(tmp_path, runs_file(tmp_path), "--baseline", "A", "--html", str(out),
            "--resamples", "200")
    assert r.returncode == 0, r.stderr
    plots = chromium_offline_dom(tmp_path, out.read_text(), MEASURE, "data-plots")
    kinds = [cls.split()[1] for cls, *_ in plots]
    assert kinds == ["rates", *["ratio-dist"] * 5, "cost-scatter"]
    for cls, width, height, marks in plots:
        assert width > 300 and height > 80, (cls, width, height)
        assert marks > 0, cls
    # the rates plot: two intervals and two dots; the scatter: one point per task with costs
    assert plots[0][3] == 4 and plots[-1][3] == 5


def test_nothing_to_pair_still_reports_and_names_every_drop(tmp_path):
    # A and B never ran the same task, and C's only run errored: no crash, no made-up number
    text = "task,condition,outcome\nt1,A,resolved\nt2,B,resolved\nt1,C,error\n"
    f = runs_file(tmp_path, text)
    r = run(tmp_path, f, "--baseline", "A", "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert "0 tasks compared, 2 dropped" in r.stdout
    assert "dropped 1 × no run of B: t1" in r.stdout and "dropped 1 × no run of A: t2" in r.stdout
    assert "dropped 1 × every run of C errored (1): t1" in r.stdout
    assert "resolve rate B: no valid run (0 errors)" in r.stdout
    doc = json.loads(run(tmp_path, f, "--baseline", "A", "--json").stdout)
    c = doc["conditions"][2]
    assert (c["condition"], c["runs"], c["errors"], c["rate"], c["low"]) == ("C", 0, 1, None, None)
    assert all(x["median"] is None and x["tasks"] == 0 for x in doc["pairs"][0]["ratios"])
    assert "no usable task" not in (tmp_path / "r.html").read_text()  # no empty plots drawn


def test_repeats_in_every_output(tmp_path):
    text = "task,condition,repeat,outcome\n" + "".join(
        f"t{t},{c},{r},{'resolved' if ok else 'unresolved'}\n"
        for t, c, outcomes in [(1, "A", "100"), (1, "B", "111"), (2, "A", "000"), (2, "B", "011")]
        for r, ok in enumerate(int(x) for x in outcomes))
    f = runs_file(tmp_path, text)
    out = tmp_path / "r.html"
    r = run(tmp_path, f, "--baseline", "A", "--html", str(out))
    assert r.returncode == 0, r.stderr
    assert re.search(r"3\s+50\.0%\s+100\.0%\s+0\.0%\s+50\.0%\s+2 / 2", r.stdout), r.stdout
    assert re.search(r"pass\^k B\s+tasks A / B", r.stdout), r.stdout  # whose count is whose
    assert "consistency A (tasks with ≥ 2 valid runs): 0 resolved every time, 1 sometimes, " \
           "1 never" in r.stdout
    page = out.read_text()
    assert "<th>pass^k A</th>" in page and "<th>tasks A / B</th>" in page
    assert "<td>3</td><td>50.0%</td>" in page
    assert "Consistency B (tasks with ≥ 2 valid runs):\n1 resolved every time, 1 sometimes, " \
           "0 never." in page
    (pair,) = json.loads(run(tmp_path, f, "--baseline", "A", "--json").stdout)["pairs"]
    a, b = pair["repeats"]
    assert a["pass_k"][2] == {"k": 3, "tasks": 2, "pass_at_k": 0.5, "pass_hat_k": 0.0}
    assert (b["always"], b["sometimes"], b["never"]) == (1, 1, 0)
