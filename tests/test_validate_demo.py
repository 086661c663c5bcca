"""The demo's packets all validate: each has a reference solution (demo/solutions.py) that is
red on the base and passes every gate. Real CLI, real pytest runs."""

from __future__ import annotations

import json

from andon.demo import build_project

from helpers import FAST, andon, git


def test_every_demo_packet_validates(tmp_path):
    root = build_project(tmp_path / "ledger")
    # the demo's own settings repeat red and the hermetic suite three times each; one run of
    # each is enough to know the solutions are right (repetition is tested in test_validate)
    (root / "andon.toml").write_text(FAST)
    git(root, "commit", "-qam", "fewer repeated runs")
    assert "packets/B01-thousands/solution/" not in git(root, "ls-files")  # git-ignored
    proc = andon(root, "validate", "--json", "--runs", "1", timeout=900)
    doc = json.loads(proc.stdout)
    bad = {p["id"]: (p["failed_gate"], p["summary"]) for p in doc["packets"] if not p["valid"]}
    assert bad == {} and proc.returncode == 0, proc.stderr
    assert [p["id"] for p in doc["packets"]] == [f"B0{i}" for i in range(1, 9)]
    assert {p["id"]: p["applied"] for p in doc["packets"]}["B05"] == ["B01", "B03"]
