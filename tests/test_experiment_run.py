"""`andon experiment run`: each (packet, condition, repeat) an attempt from the same base in
its own clone, judged by the real gates (real git, real pytest subprocesses), never merged;
outcomes, errors apart, budget, resume, interleaving, observations, export → compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from experiment_agents import project, spec_file

from andon.config import load_config
from andon.experiments.experiment import Experiment, plan
from andon.experiments.spec import load_spec
from andon.experiments.stored import export_rows, status, to_csv
from andon.git.repo import Repo
from andon.state import open_store

from helpers import git


def experiment(root: Path, path: Path) -> Experiment:
    repo = Repo(root)
    return Experiment(repo, load_config(root), open_store(repo), load_spec(path))


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Two packets × conditions good / bad / sprawling / down, once each."""
    root = project(tmp_path_factory.mktemp("exp") / "proj")
    path = spec_file(root, {"good": "good", "bad": "bad", "sprawl": "sprawling",
                            "down": "provider_down"})
    exp = experiment(root, path)
    progress = exp.run()
    return root, path, exp, progress


def by_key(rows):
    return {(r["task"], r["condition"], r["repeat"]): r for r in rows}


@pytest.mark.e2e  # the shared fixture runs eight real attempts
def test_outcomes_resolved_unresolved_and_error_apart(ran):
    root, _path, exp, progress = ran
    assert progress.planned == 8 and len(progress.recorded) == 8
    rows = by_key(export_rows(exp.store, "exp"))
    for task in ("P1", "P2"):
        assert rows[task, "good", 0]["outcome"] == "resolved"
        assert rows[task, "bad", 0]["outcome"] == "unresolved"
        assert rows[task, "bad", 0]["failure_gate"] == "suite" or \
            rows[task, "bad", 0]["failure_layer"] == "code"
        down = rows[task, "down", 0]
        assert down["outcome"] == "error" and down["resolved"] is None
        assert down["failure_layer"] == "environment"
    # never merged: the integration branch was not even made, main is where it was
    assert git(root, "branch", "--list", "andon/*").strip() == ""
    assert git(root, "status", "--porcelain").strip() == ""


@pytest.mark.e2e  # the shared fixture runs eight real attempts
def test_observations_false_claim_and_extra_files(ran):
    _, _, exp, _ = ran
    rows = by_key(export_rows(exp.store, "exp"))
    assert rows["P1", "bad", 0]["false_claim"] is True
    assert rows["P1", "good", 0]["false_claim"] is False
    assert rows["P1", "down", 0]["false_claim"] is None  # an error says nothing
    assert rows["P1", "sprawl", 0]["extra_files"] == 1
    assert rows["P1", "sprawl", 0]["extra_lines"] == 3
    assert rows["P1", "good", 0]["extra_files"] == 0


@pytest.mark.e2e  # the shared fixture runs eight real attempts
def test_export_csv_is_read_by_compare(ran, tmp_path):
    from andon.experiments.compare import as_dict, compare
    from andon.experiments.runs import read_csv
    _, _, exp, _ = ran
    csv_path = tmp_path / "runs.csv"
    csv_path.write_text(to_csv(export_rows(exp.store, "exp")))
    table = read_csv(csv_path)
    assert table.ignored_columns and "evidence_dir" in table.ignored_columns
    result = as_dict(compare(table, "good", "bad", resamples=200))
    conds = {c["condition"]: c for c in result["conditions"]}
    assert conds["good"]["resolved"] == 2 and conds["bad"]["resolved"] == 0
    assert conds["down"]["errors"] == 2 and conds["down"]["runs"] == 0
    obs = {(o["condition"], o["observation"]): o for o in result["observations"]}
    assert obs["bad", "false_claim"]["seen"] == 2 and obs["bad", "false_claim"]["runs"] == 2
    assert obs["good", "false_claim"]["seen"] == 0
    assert ("down", "false_claim") not in obs  # error runs are not observed
    assert result["pairs"][0]["table"]["only_a"] == 2


@pytest.mark.e2e  # the shared fixture runs eight real attempts
def test_status_counts_and_json(ran):
    _, _, exp, _ = ran
    s = status(exp.store, "exp")
    assert s["planned"] == 8 and s["done"] == 8 and s["left"] == 0 and s["eta_s"] == 0.0
    assert (s["resolved"], s["unresolved"], s["error"]) == (4, 2, 2)
    assert s["conditions"]["down"] == {"resolved": 0, "unresolved": 0, "error": 2}
    json.dumps(s)


@pytest.mark.e2e  # the shared fixture runs eight real attempts
def test_running_again_skips_finished_runs_and_more_repeats_add_runs(ran):
    root, path, exp, _ = ran
    again = experiment(root, path).run()
    assert again.recorded == [] and again.skipped == 8
    text = path.read_text().replace("repeats = 1", "repeats = 2")
    more = root.parent / "more.toml"
    more.write_text(text)
    grown = experiment(root, more)
    grown.spec.conditions = [c for c in grown.spec.conditions if c.name == "good"]
    progress = grown.run()
    assert progress.skipped == 2 and len(progress.recorded) == 2
    assert {(r["task"], r["repeat"]) for r in export_rows(exp.store, "exp")
            if r["condition"] == "good"} == {("P1", 0), ("P2", 0), ("P1", 1), ("P2", 1)}


def test_interleaved_seeded_order():
    order = plan(["T1", "T2", "T3"], ["A", "B", "C"], 2, seed=3)
    assert order == plan(["T1", "T2", "T3"], ["A", "B", "C"], 2, seed=3)
    assert len(order) == 18 and len(set(order)) == 18
    conds = [k.condition for k in order]
    # never all of one condition first: every block of three holds each condition once
    for i in range(0, 18, 3):
        assert sorted(conds[i:i + 3]) == ["A", "B", "C"]
    assert conds[:3] != conds[3:6] or conds[3:6] != conds[6:9]
    # raising repeats keeps the runs already planned in their place
    assert plan(["T1", "T2", "T3"], ["A", "B", "C"], 3, seed=3)[:18] == order
    assert plan(["T1", "T2", "T3"], ["A", "B", "C"], 2, seed=4) != order
