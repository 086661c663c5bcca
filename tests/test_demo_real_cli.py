"""`andon demo --agent claude-code` (issue 16): the demo's packets go through the real Claude
Code, as root with andon's default settings, against the scripted model server — and every
packet ends the way the demo expects (honest merged, tamper and forbidden path caught, the
reviewer's revise, the human gate, the halt)."""

import subprocess

from realcli import binary

from andon.demo.real_cli import DemoModel

from helpers import andon


def test_demo_with_the_real_claude_code_has_every_expected_outcome(tmp_path):
    claude = binary("claude")
    env = {"PATH": f"{claude.parent}:/usr/local/bin:/usr/bin:/bin"}
    r = andon(tmp_path, "demo", "--agent", "claude-code", "--dir", str(tmp_path / "ledger"),
              env=env, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "demo: every outcome as expected" in out
    assert "claude-code agent exited 0" in out          # the real CLI did the stages
    assert "UNEXPECTED" not in out
    # under the default sandbox ("auto": fs where bubblewrap works) like any `andon run`:
    # B03's edit of its planted test was refused by the OS, and its evidence says so
    from andon.sandbox import capabilities
    if capabilities().best(False) == "fs":
        status = andon(tmp_path / "ledger", "status", env={"COLUMNS": "200"}).stdout
        assert "sandbox fs" in status and "sandbox none" not in status, status
        show = andon(tmp_path / "ledger", "show", "B03").stdout
        assert "read-only (the OS refuses writes): .git, tests/test_trailing_minus.py" in show


def test_the_demo_model_turns_a_behaviour_into_write_calls_for_that_worktree(tmp_path):
    """The chooser runs the packet's behaviour on a copy and answers with Write calls into
    the real worktree; a folder it does not know gets no tool call."""
    from andon.demo import build_project
    root = build_project(tmp_path / "ledger")
    wt = tmp_path / "worktrees" / "B01-1"
    subprocess.run(["git", "clone", "-q", str(root), str(wt)], check=True)
    model = DemoModel(root, tmp_path / "worktrees")
    body = {"system": [{"type": "text", "text": f"Primary working directory: {wt}\n"}],
            "messages": [{"role": "user", "content": "Implement packet B01."}]}
    turns = model(body)
    assert [t.get("tool") for t in turns] == ["Write", None]
    assert turns[0]["input"]["file_path"] == str(wt / "src/ledger/loader.py")
    assert "def parse_number" in turns[0]["input"]["content"]
    assert (wt / "src/ledger/loader.py").read_text() != turns[0]["input"]["content"]
    assert model(body) is turns                                # one conversation, one script
    other = {**body, "system": [{"type": "text", "text": "Primary working directory: /x\n"}]}
    assert "tool" not in model(other)[0]
