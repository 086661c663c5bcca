"""A base branch that moved on after the integration branch was made is surfaced, not merged.

andon squash-merges onto ``andon/integration``, which starts from the base branch once; later
commits on the base never reach it by themselves. `andon run` and `andon status` say so, with
the count and what to do; `status --json` carries it for scripts.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers import andon, git, make_project, mul_packet


def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    first = andon(root, "run", "--command", "true")  # creates the integration branch
    assert git(root, "rev-parse", "--verify", "andon/integration").strip(), first.stdout
    return root


def test_new_commits_on_the_base_branch_are_reported_by_run_and_status(tmp_path):
    root = project(tmp_path)
    status = andon(root, "status")
    assert "base branch" not in status.stdout  # nothing to say yet
    for n in (1, 2):
        (root / f"notes{n}.txt").write_text("later\n")
        git(root, "add", f"notes{n}.txt")
        git(root, "commit", "-qm", f"later work {n}")

    run = andon(root, "run", "--command", "true")
    status = andon(root, "status")
    for out in (run.stdout, status.stdout):
        assert "main has 2 commits that andon/integration does not" in out, out
        assert "git merge main" in out
    data = json.loads(andon(root, "status", "--json").stdout)
    assert data["base_drift"] == {"base_branch": "main", "integration_branch":
                                  "andon/integration", "commits": 2}


def test_no_drift_reported_when_integration_holds_everything(tmp_path):
    root = project(tmp_path)
    data = json.loads(andon(root, "status", "--json").stdout)
    assert data["base_drift"] is None


def test_commits_that_only_add_packets_are_no_drift(tmp_path):
    # packets are read from the checkout: a commit of a new packet leaves nothing to merge
    root = project(tmp_path)
    (root / "packets" / "P9").mkdir(parents=True)
    (root / "packets" / "P9" / "packet.md").write_text("+++\nid = \"P9\"\n+++\nlater\n")
    git(root, "add", "packets")
    git(root, "commit", "-qm", "a new packet")
    assert json.loads(andon(root, "status", "--json").stdout)["base_drift"] is None
    (root / "notes.txt").write_text("later\n")
    git(root, "add", "notes.txt")
    git(root, "commit", "-qm", "later work")
    assert json.loads(andon(root, "status", "--json").stdout)["base_drift"]["commits"] == 1
