"""`andon demo --plan` (issue 14): the scripted interview first (its decisions committed on
their own branch, the checkout untouched, the decisions file in the planner's prompt); a
scripted planner's mistake returned by the checks in round 1, fixed in round 2; the drafts
accepted (recorded) and merged through the loop."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from andon.demo.plan import run_plan_demo
from andon.git.repo import Repo
from andon.state import open_store

pytestmark = pytest.mark.e2e  # the whole loop, twice, on a real repository


def test_demo_plan_interviews_drafts_checks_accepts_and_merges(tmp_path: Path):
    buf = io.StringIO()
    root = tmp_path / "demo" / "ledger"
    code = run_plan_demo(Console(file=buf, width=200), root)
    text = buf.getvalue()
    assert code == 0, text
    repo = Repo(root)
    decided = repo.git("show", "andon/grill/feature-request:decisions/001-feature-request.md")
    assert "Decisions from the interview about `docs/feature_request.md`" in decided
    assert not (root / "decisions").exists()  # on its own branch only
    assert "round 1 problems (returned to the planner): S02: allowed_paths overlap S01's" in text
    prompts = sorted((root / ".andon" / "plan").glob("*/round-*/plan.prompt.md"))
    assert len(prompts) == 2
    assert "Decisions from the interview" in prompts[0].read_text()
    assert "S02: allowed_paths overlap S01's" in prompts[1].read_text()
    store = open_store(Repo(root))
    try:
        for pid in ("S01", "S02"):
            (event,) = store.events(pid, "accepted")
            assert event["data"]["by"] == "the demo"
            assert store.packet(pid)["state"] == "done"
    finally:
        store.close()
