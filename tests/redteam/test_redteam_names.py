"""File names an agent picks to get past a gate that reads its files: a name ending in a
carriage return (``git cat-file --batch`` strips one before the newline, so it read the file
without it) and a name that is not UTF-8 (a strict encode stopped the line as a harness
error). Each is played through the real Runner; the same file under a plain name is the
control."""

from __future__ import annotations

import os

import pytest

from scenarios import FAST, Scenario, honest_mul, play

RULE = ('\n[gates.patterns]\n[[gates.patterns.rules]]\nid = "no-secret"\nregex = "SECRET"'
        '\nmessage = "no secrets in the code"\npaths = ["src/**"]\n')


def _writes(rel: bytes, data: bytes):
    def agent(ctx):
        honest_mul(ctx)
        with open(os.path.join(os.fsencode(ctx.worktree), rel), "wb") as f:
            f.write(data)
        return "done"
    return agent


@pytest.mark.parametrize("name", [b"src/calc/notes", b"src/calc/notes\r", b"src/calc/n\r\r"],
                         ids=["plain", "cr", "two-cr"])
def test_a_user_rule_reads_the_file_the_agent_named(tmp_path, name):
    """Beside it, a file of the name without the CR that the rule would let through: the
    rule must read the agent's own file and block the packet."""
    plain = name.rstrip(b"\r")
    files = {} if plain == name else {os.fsdecode(plain): "harmless = 1\n"}

    def agent(ctx):
        _writes(name, b"SECRET = 1\n")(ctx)
        for rel, text in files.items():
            (ctx.worktree / rel).write_text(text)
        return "done"
    o = play(Scenario("name-" + os.fsdecode(name), 14, "", agent, config=FAST + RULE),
             tmp_path / "repo")
    assert not o.merged, o.gates
    assert o.gate == "patterns", (o.gate, o.summary)
    assert any(f.get("path") == os.fsdecode(name) for f in o.findings), o.findings


def test_a_file_name_that_is_not_utf8_is_merged_not_a_harness_error(tmp_path):
    o = play(Scenario("non-utf8-name", None, "", _writes(b"src/calc/\xff.txt", b"data\n")),
             tmp_path / "repo")
    assert o.merged, (o.gate, o.summary)
