"""Issue 19 "hidden stays hidden" under the default sandbox (``auto``, level ``fs``): a real
command agent run by ``andon run`` tries to read the packet's hidden tests in the person's
checkout by absolute path, through ``git -C <checkout>`` (``show``, the ignored files' list),
and searches every folder it can read (its worktree, HOME, TMPDIR, /tmp, the prompt) for a
file that names them. It must see nothing: the checkout is not in its view, and the prompt
and evidence live outside the checkout and the worktree. It writes what it saw into the
attempt (an allowed path), so the merged commit (on
``andon/integration``) is the evidence."""

from __future__ import annotations

import json

import pytest

from andon.sandbox import probe

from helpers import FAST, andon, git, make_project, mul_packet

CAPS = probe.capabilities()
HIDDEN_REL = "tests/test_mul_hidden.py"
MARK = "mul(7, 6) == 42"  # in the hidden test only
HIDDEN_TEST = f"from calc.ops import mul\n\n\ndef test_mul_other_inputs():\n    assert {MARK}\n"


def agent_script(checkout: str) -> str:
    """Try every way to the hidden test; keep what was seen in src/calc/seen.txt; then do the
    work honestly (so the attempt is merged and the seen file reaches the commit)."""
    h = f"{checkout}/packets/P1/hidden"
    return (
        "seen=src/calc/seen.txt; echo seen: > $seen; "
        f"cat {h}/{HIDDEN_REL} >> $seen 2>/dev/null; "
        f"ls -R {h} >> $seen 2>/dev/null; "
        f"git -C {checkout} show HEAD:packets/P1/hidden/{HIDDEN_REL} >> $seen 2>/dev/null; "
        f"git -C {checkout} ls-files -o -i --exclude-standard >> $seen 2>/dev/null; "
        f"git -C {checkout} status --ignored --porcelain >> $seen 2>/dev/null; "
        # every file it can read that names the hidden test: worktree, HOME, temp, the prompt
        'for d in "$PWD" "$HOME" "${TMPDIR:-/tmp}" /tmp /var/tmp; do '
        "grep -rl -e 'test_mul_hidden' -e 'mul(7, 6)' \"$d\" 2>/dev/null "
        "| grep -v -e seen.txt -e agent.sh >> $seen; done; "
        # the prompt, and the folder it lives in (outside the checkout and the worktree)
        "grep -rl -e test_mul_hidden -e 'mul(7, 6)' \"$ANDON_PROMPT_FILE\" "
        "\"$(dirname \"$ANDON_PROMPT_FILE\")\" 2>/dev/null >> $seen; "
        "case \"$ANDON_PROMPT_FILE\" in \"$PWD\"/*|"
        f"{checkout}/*) echo \"prompt inside: $ANDON_PROMPT_FILE\" >> $seen;; esac; "
        r"printf '\n\ndef mul(a, b):\n    return a * b\n' >> src/calc/ops.py; "
        "echo done")


@pytest.mark.skipif(not CAPS.fs[0], reason=f"no fs sandbox here: {CAPS.fs[1]}")
def test_the_agent_cannot_read_the_hidden_tests_by_any_path(tmp_path):
    md, plant = mul_packet("P1", max_attempts=1)
    root = make_project(tmp_path / "repo", {"P1": (md, plant)}, config=FAST,
                        files={".gitignore": "__pycache__/\n*.pyc\npackets/*/hidden/\nagent.sh\n"})
    hidden = root / "packets/P1/hidden" / HIDDEN_REL
    hidden.parent.mkdir(parents=True)
    hidden.write_text(HIDDEN_TEST)
    # without a sandbox the same commands would name it: git lists it among ignored files
    assert f"packets/P1/hidden/{HIDDEN_REL}" in git(root, "ls-files", "-o", "-i",
                                                    "--exclude-standard")
    # the agent's own commands live in a script (as an agent CLI's tool calls would): the
    # person's --command names only the script, which the sandbox binds read-only
    (root / "agent.sh").write_text(agent_script(str(root)) + "\n")
    r = andon(root, "run", "--agent", "command", "--command", f"sh {root}/agent.sh")
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads(andon(root, "show", "P1", "--json").stdout)
    assert s["packet"]["state"] == "done"
    implement = next(x for x in s["attempts"][0]["stages"] if x["stage"] == "implement")
    assert implement["usage"]["notes"][0].startswith("sandbox fs")
    # the hermetic gate did run the hidden test (it exists and passed), so it was there to see
    gates = {g["gate"]: g for g in s["attempts"][0]["gates"]}
    assert gates["hermetic"]["status"] == "pass", gates["hermetic"]
    assert "test_mul_hidden" in json.dumps(gates["hermetic"]["evidence"])
    seen = git(root, "show", "andon/integration:src/calc/seen.txt")  # the merged work
    assert seen == "seen:\n", f"the agent saw the hidden test through: {seen!r}"
