"""`andon demo --experiment`: the staged conditions (shipped templates and stage lists) on the
demo packets with seeded scripted agents, judged by the real gates, ending with the HTML
report — opened in headless Chromium with the network cut (the plots laid out), with no
external URL. Narrowed to three conditions and two packets to stay quick."""

from __future__ import annotations

import io
import re
import subprocess

import pytest
from rich.console import Console
from test_experiments_cli import MEASURE

from andon.demo.experiment import SPEC, run_experiment_demo
from andon.experiments.runs import read_csv
from andon.experiments.spec import load_spec


def test_the_shipped_experiment_names_conditions_a_to_h_with_their_templates():
    spec = load_spec(SPEC)
    assert [c.name for c in spec.conditions] == list("ABCDEFGH")
    for c in spec.conditions:
        template = spec.path(c.prompt_template)
        assert template is not None and template.is_file(), c.name
    # each condition adds one control: review stages only from G, a second reviewer at H
    stages = {c.name: c.stages for c in spec.conditions}
    assert stages["F"] == ["implement"] and "review" in (stages["G"] or [])
    assert len(stages["H"] or []) > len(stages["G"] or [])
    assert [c.retries for c in spec.conditions][:4] == [0, 0, 0, 0]
    assert spec.condition("E").retries == 1


@pytest.mark.e2e
def test_demo_experiment_ends_with_an_offline_html_report(tmp_path):
    buf = io.StringIO()
    out = Console(file=buf, width=160)
    root = tmp_path / "ledger"
    code = run_experiment_demo(out, root, packets=["B01", "B08"], conditions=["A", "E", "H"],
                               repeats=1)
    text = buf.getvalue()
    assert code == 0, text[-3000:]
    page = (tmp_path / "experiment.html").read_text()
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert 'id="observations"' in page and "false_claim" in page
    table = read_csv(tmp_path / "experiment-runs.csv")
    assert sorted({r.condition for r in table.runs}) == ["A", "E", "H"]
    assert len(table.runs) == 6
    assert all(r.metrics["cost_usd"] and r.metrics["input_tokens"] for r in table.runs
               if r.valid)
    assert "Observations" in text and "against" in text
    # progress: each run's line says how many are done and the time left, the last "done"
    lines = [ln for ln in text.splitlines() if ln.startswith("[")]
    assert [ln.split("]")[0] for ln in lines] == [f"[{n}/6" for n in range(1, 7)]
    assert all(re.search(r" — about \d+ (s|min \d+ s) left$", ln) for ln in lines[:-1]), lines
    assert lines[-1].endswith(" — done"), lines
    # nothing merged: the demo project's main is where the demo left it
    log = subprocess.run(["git", "log", "--oneline"], cwd=root, capture_output=True,
                         text=True, check=True).stdout
    assert len(log.splitlines()) == 2
    _chromium_lays_out_plots(tmp_path, page)


def _chromium_lays_out_plots(tmp_path, page: str) -> None:
    from helpers import chromium_offline_dom
    plots = chromium_offline_dom(tmp_path, page, MEASURE, "data-plots")
    kinds = [cls.split()[1] for cls, *_ in plots]
    # the rates, then per pair (E and H against A) its ratio histograms (where a ratio has
    # tasks) and one cost scatter
    assert kinds[0] == "rates" and kinds.count("cost-scatter") == 2
    assert set(kinds) <= {"rates", "ratio-dist", "cost-scatter"}
    for cls, width, height, _marks in plots:
        assert width > 300 and height > 80, (cls, width, height)
    assert plots[0][3] > 0  # the rates plot drew its intervals and dots


def test_the_demo_agents_provider_failure_is_an_environment_failure(tmp_path, monkeypatch):
    """A "provider failure" of the seeded agent must reach the report as `error`: nothing
    changed, exit 1 and no output token — the `agent` gate's rule (found in the full demo,
    where it came out as `unresolved` while the failure still reported output tokens)."""
    import andon.demo.experiment as demo_experiment
    from andon.agents import StageContext
    from andon.demo import build_project
    from andon.gates.agent import could_not_work
    from andon.packet import load_packets
    monkeypatch.setattr(demo_experiment, "ERROR_RATE", 1.0)
    root = build_project(tmp_path / "ledger")
    packet = {p.id: p for p in load_packets(root / "packets", root)}["B01"]
    ctx = StageContext(packet, "implement", 1, root, "prompt", tmp_path / "p.md", tmp_path, 10)
    run = demo_experiment.SeededAgent(0.5).run(ctx)
    result = could_not_work(run, "implement", False)
    assert run.exit_status == 1 and result is not None
    assert (result.gate, result.layer) == ("agent", "environment")
