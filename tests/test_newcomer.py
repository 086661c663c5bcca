"""The smaller things a new user hit (issue 9): the board before the first run, the squash
commit's subject, `andon unblock` after a broken reviewer, uncommitted work, and the
README's install line. Real repositories, the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from andon.merge import squash_message
from andon.packet import load_packets

from helpers import MUL_CODE, andon, git, make_project, mul_packet

HONEST = "printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py"
README = Path(__file__).resolve().parents[1] / "README.md"


def test_status_before_the_first_run_shows_the_packets_as_ready(tmp_path):
    """Before: an empty board although `check` found the packets. Now each packet is
    listed as ready (read from the packet files), with a note that nothing ran yet."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"),
                                            "P2": mul_packet("P2", requires=["P1"])})
    r = andon(root, "status")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if re.search(r"\bP[12]\b", ln)]
    assert len(rows) == 2 and all("ready" in ln for ln in rows), r.stdout
    assert "nothing ran yet" in r.stdout
    data = json.loads(andon(root, "status", "--json").stdout)
    assert [(p["id"], p["state"], p["attempts"]) for p in data["packets"]] == [
        ("P1", "ready", 0), ("P2", "ready", 0)]


def test_the_board_after_a_run_refused_at_preflight_says_so(tmp_path):
    """Before: after `andon run` stopped at preflight (the base fails its own suite), the
    board still said "nothing ran yet … `andon run` starts them", as if running were the
    fix. Now it names the preflight failure; once the base is fixed, the note is gone."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        {"tests/test_broken.py": "def test_broken():\n    assert False\n"})
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 3, r.stdout + r.stderr
    board = andon(root, "status").stdout
    assert "nothing ran yet" not in board
    assert "the last `andon run` stopped at preflight" in board, board
    assert "tests.test_broken::test_broken" in board or "1 test" in board, board
    (root / "tests/test_broken.py").unlink()
    git(root, "commit", "-qam", "fix the base")
    assert andon(root, "run", "--agent", "command", "--command", HONEST).returncode == 0
    assert "stopped at preflight" not in andon(root, "status").stdout


def test_a_failing_base_test_whose_id_reads_as_markup_is_shown_as_written(tmp_path):
    """Before: a base test ``test_path[/tmp]`` failing preflight crashed `andon run` (exit 1,
    not 3) and every `andon status` after it with rich's MarkupError (the board's caption
    was read as markup), and dropped ``[test]`` from andon's own advice. Test ids are the
    project's, written by anyone: shown as written."""
    broken = ('import pytest\n\n\n@pytest.mark.parametrize("p", ["/tmp", "[red]x"])\n'
              'def test_path(p):\n    assert False\n')
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")},
                        {"tests/test_broken.py": broken})
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    s = andon(root, "status")
    assert s.returncode == 0 and "Traceback" not in s.stderr, s.stderr
    flat = " ".join(s.stdout.split())
    assert "stopped at preflight" in flat, s.stdout
    assert "[/tmp]" in flat.replace(" ", "") or "[red]x" in flat.replace(" ", ""), s.stdout


def test_show_says_the_agent_never_ran_when_red_stopped_the_attempt(tmp_path):
    """Before: "attempt 1: failed — agent command" for an attempt red stopped before any
    agent started, which reads as if the agent had run and failed."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    (root / "src/calc/ops.py").write_text((root / "src/calc/ops.py").read_text() + MUL_CODE)
    git(root, "commit", "-qam", "mul is already there: the planted tests pass on the base")
    assert andon(root, "run", "--agent", "command", "--command", HONEST).returncode == 1
    shown = andon(root, "show", "P1").stdout
    assert "agent command (never started: the attempt stopped before its first stage)" \
        in shown, shown


def test_a_packet_added_after_a_run_shows_on_the_board_as_ready(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    assert andon(root, "run", "--agent", "command", "--command", HONEST).returncode == 0
    md, plant = mul_packet("P2")
    (root / "packets/P2/plant/tests").mkdir(parents=True)
    (root / "packets/P2/packet.md").write_text(md)
    for rel, text in plant.items():
        (root / "packets/P2/plant" / rel).write_text(text)
    data = json.loads(andon(root, "status", "--json").stdout)
    assert [(p["id"], p["state"]) for p in data["packets"]] == [("P1", "done"),
                                                                ("P2", "ready")]


def test_the_squash_commit_is_named_by_id_and_slug_with_the_goal_in_the_body(tmp_path):
    """Before: the subject was the truncated goal, which reads like the bug. Now
    `<id> <slug>` is the subject and the goal is in the body."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout + r.stderr
    assert git(root, "log", "-1", "--format=%s", "andon/integration").strip() == "P1 multiply"
    body = git(root, "log", "-1", "--format=%b", "andon/integration")
    assert "calc.ops.mul multiplies." in body and "Andon-Packet: P1" in body


def test_a_title_is_the_squash_commits_subject(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", title="Multiply numbers")})
    [packet] = load_packets(root / "packets", root)
    message = squash_message(packet, 2, ["red", "scope"])
    subject, _, rest = message.partition("\n\n")
    assert subject == "Multiply numbers"
    assert "calc.ops.mul multiplies." in rest and "attempt 2" in rest
    long = mul_packet("P1", title="x" * 300)[0]
    (root / "packets/P1/packet.md").write_text(long)
    [packet] = load_packets(root / "packets", root)
    assert len(squash_message(packet, 1, []).splitlines()[0]) <= 72


def test_unblock_after_a_broken_reviewer_does_not_say_the_packet_will_block_again(tmp_path):
    """A reviewer that writes no valid review blocks the packet (layer verifier); the
    advice is to fix the reviewer, not the packet, so `unblock` must not warn that the
    unchanged packet will block again."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    r = andon(root, "run", "--agent", "command", "--command", HONEST,
              "--reviewer-command", "echo no review")
    assert r.returncode == 1, r.stdout + r.stderr
    last = json.loads(andon(root, "status", "--json").stdout)["packets"][0]["last_attempt"]
    assert last["failure_layer"] == "verifier"
    # a finding with no file or test to point at prints no empty place before its message
    shown = andon(root, "show", "P1").stdout
    assert "invalid-review: the reviewer returned no document" in shown, shown
    u = andon(root, "unblock", "P1")
    assert u.returncode == 0, u.stderr
    assert "block it again" not in " ".join(u.stderr.split())
    assert "verifier" in u.stdout + u.stderr


def test_unblock_of_an_unchanged_packet_blocked_by_its_code_still_warns(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    r = andon(root, "run", "--agent", "command", "--command", "true")
    assert r.returncode == 1, r.stdout + r.stderr
    u = andon(root, "unblock", "P1")
    # the warning names the packet's path, so where its line wraps depends on tmp_path's length
    assert u.returncode == 0 and "block it again" in " ".join(u.stderr.split())


def test_run_says_uncommitted_work_is_not_included(tmp_path):
    """Before: a dirty working tree was silently ignored. Now one line names how many files
    are not part of the run."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    (root / "src/calc/ops.py").write_text("# edited, not committed\n")
    (root / "notes.txt").write_text("untracked\n")
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "uncommitted changes" in ln]
    assert len(lines) == 1 and "1 changed" in lines[0] and "untracked: notes.txt" in lines[0], (
        r.stdout + r.stderr)


def test_a_clean_checkout_gets_no_uncommitted_note(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0 and "uncommitted changes" not in r.stdout + r.stderr


def test_readme_use_it_on_your_repository_names_the_installed_command():
    """Installed into .venv, `andon` is not on PATH: the section says how to call it."""
    text = README.read_text()
    section = text.split("## Use it on your repository", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/andon" in section or "activate" in section


def test_uncommitted_packets_and_config_are_not_counted_as_left_out(tmp_path):
    """Before: a new user who wrote andon.toml and a packet without committing them was told
    those files were 'not part of this run', yet the packet ran. They are read from the
    checkout as they are, so the note counts only the other files."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    with (root / "andon.toml").open("a") as f:
        f.write("# edited, not committed\n")
    (root / "packets/P1/notes.txt").write_text("untracked, inside the packets folder\n")
    (root / "notes.txt").write_text("untracked\n")
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "uncommitted changes" in ln]
    assert len(lines) == 1 and lines[0].endswith("untracked: notes.txt"), r.stdout + r.stderr
