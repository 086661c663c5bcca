"""A stage whose command runs a tool that is not there (exit 127, the shell's "not found"),
found by a newcomer pass on a real project: the reviewer script ran ``python3``, a pyenv shim
that could not reach pyenv inside the sandbox. andon said "review is not valid JSON:
Expecting value at line 1 column 1" (it had parsed the shell's error as the review) and "the
agent's command was not found: … give an absolute path" (it was one). Both now say what
happened, with the stage's own last line."""

from __future__ import annotations

from helpers import MUL_CODE, andon, make_project, mul_packet


def test_a_reviewer_that_exits_127_is_named_with_its_last_line(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    agent = tmp_path / "agent.sh"
    agent.write_text(f"#!/bin/sh\nprintf '{MUL_CODE}' >> src/calc/ops.py\n")
    reviewer = tmp_path / "reviewer.sh"
    reviewer.write_text("#!/bin/sh\nno-such-review-tool --json\n")
    for f in (agent, reviewer):
        f.chmod(0o755)
    r = andon(root, "run", "--agent", "command", "--command", str(agent),
              "--reviewer-command", str(reviewer))
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 1, out
    assert "not valid JSON" not in out
    assert ("review: fail: no valid review after 2 asks: the reviewer returned no document: "
            "nothing in $ANDON_REVIEW_FILE and no JSON at the end of its reply (it exited "
            f"127: {reviewer}: 2: no-such-review-tool: not found)") in out, out
    assert "give an absolute path" not in out
    assert ("what to do: the review stage exited 127 (a command it runs was not found): "
            f"{reviewer}: 2: no-such-review-tool: not found") in out, out
    assert "[agent] sandbox_paths" in out
