"""Everything an agent wrote is hostile input, wherever it is shown (issue: terminal control
characters). A real run whose agent claims, whose reviewer's findings and whose file names
carry terminal escapes, C1 controls, bidi overrides and rich markup; ``andon show`` and
``andon status`` (the real CLI) must show each visibly and let none act, while ``--json``
keeps the exact original text. Plus :func:`andon.safe_text.visible` per category.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_workers import honest, mod_packet

from andon.safe_text import markup_safe, visible

from helpers import andon, honest_mul, make_project, mul_packet, review_document, runner_for, write

# clear screen, an OSC 8 hyperlink, a right-to-left override, a C1 CSI, a zero-width space,
# and markup that rich would read as a green PASS
HOSTILE = ("\x1b[2J\x1b]8;;http://x\x07link\x1b]8;;\x07 \u202eevil\u202c \x9b1A"
           "\u200b[bold red]PASS[/]")
SHOWN = "\\x1b[2J\\x1b]8;;http://x\\x07link\\x1b]8;;\\x07 \\u202eevil\\u202c \\x9b1A\\u200b"
MARKUP = "[bold red]PASS[/]"
# what no terminal may receive from agent text
ACTIVE = ["\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\u200b", "\r"]
# a file name may hold a line break: on one line it must not start a line of its own
NAME = "evil\x1b[1A\u2066x\u2069\n.txt"
NAME_SHOWN = "evil\\x1b[1A\\u2066x\\u2069\\n.txt"


def _claims_hostile(ctx) -> str:
    honest(ctx)
    write(ctx, NAME, "out of scope\n")  # scope gate: a path outside allowed_paths
    return "done\n" + HOSTILE


def _review_hostile(ctx) -> str:
    return review_document(ctx, findings=[{"severity": "minor", "location": "src/calc/ops.py:1",
                                           "message": HOSTILE}])


def test_show_and_status_let_no_agent_text_act(tmp_path: Path):
    # P1 merges with the reviewer's hostile findings; P2's agent then blocks it (one try)
    root = make_project(tmp_path / "p", {"P1-m": mul_packet("P1"),
                                         "P2-m": mod_packet("P2", max_attempts=1)})
    runner_for(root, {"P1": honest_mul, "P2": _claims_hostile}, reviewer=_review_hostile).run()

    shown = {pid: andon(root, "show", pid) for pid in ("P1", "P2")}
    status = andon(root, "status")
    for r in (*shown.values(), status):
        assert r.returncode in (0, 1), r.stderr
        for ch in ACTIVE:
            assert ch not in r.stdout + r.stderr, (repr(ch), r.stdout)
    p1, p2 = shown["P1"].stdout, shown["P2"].stdout
    assert f"minor: src/calc/ops.py:1 — {SHOWN}{MARKUP}" in p1, p1  # the reviewer's finding
    assert "agent claimed (not used): " + SHOWN + MARKUP in p2, p2  # markup not read
    # the scope gate's summary and finding, and the reason, name the file on one line
    assert p2.count(NAME_SHOWN) >= 3 and "\n.txt" not in p2, p2
    assert "scope" in status.stdout and "evil\\x1b[1A\\u2066x\\u2069" in status.stdout

    # --json keeps the exact text: ASCII-escaped JSON, so nothing active reaches a terminal
    for pid in ("P1", "P2"):
        r = andon(root, "show", pid, "--json")
        assert not any(ch in r.stdout for ch in ACTIVE)
        d = json.loads(r.stdout)
        texts = [s["claim"] for a in d["attempts"] for s in a["stages"]]
        texts += [f["message"] for a in d["attempts"] for rv in a["reviews"]
                  for f in rv["document"]["findings"]]
        texts += [f["path"] for a in d["attempts"] for g in a["gates"]
                  for f in g["evidence"].get("findings", [])]
        assert ("done\n" + HOSTILE if pid == "P2" else HOSTILE) in texts
        if pid == "P2":
            assert NAME in texts
    j = andon(root, "status", "--json")
    assert not any(ch in j.stdout for ch in ACTIVE)
    reasons = [r["last_attempt"]["reason"] for r in json.loads(j.stdout)["packets"]
               if r["last_attempt"]]
    assert any(NAME in (x or "") for x in reasons), reasons


@pytest.mark.parametrize("raw, one_line, lines", [
    ("plain text: ünïcode, 日本語, emoji 🙂", None, None),   # printable: unchanged
    ("a\x1bb\x00c\x7fd", "a\\x1bb\\x00c\\x7fd", None),         # C0 and DEL
    ("a\x9bb\x85c\x80", "a\\x9bb\\x85c\\x80", None),           # C1 (U+0080–U+009F)
    ("bell\x07 back\x08 cr\r ff\x0c", "bell\\x07 back\\x08 cr\\r ff\\x0c", None),
    ("a\u202ab\u202ec\u2066d\u2069e\u061c", "a\\u202ab\\u202ec\\u2066d\\u2069e\\u061c", None),
    ("zw\u200b\u200c\u200d\u200e\u200f\ufeff\u00ad.", "zw\\u200b\\u200c\\u200d\\u200e\\u200f"
     "\\ufeff\\xad.", None),                                    # other Cf
    ("line\u2028para\u2029", "line\\u2028para\\u2029", None),   # line/paragraph separators
    ("tag\U000e0041", "tag\\U000e0041", None),                  # a Cf beyond the BMP
    ("lone \ud800", "lone \\ud800", None),                      # a surrogate cannot be printed
    ("one\ntwo\tthree", "one\\ntwo\\tthree", "one\ntwo\tthree"),  # kept only for lines=True
])
def test_visible_per_category(raw: str, one_line: str | None, lines: str | None):
    one_line = raw if one_line is None else one_line
    assert visible(raw) == one_line
    assert visible(raw, lines=True) == (one_line if lines is None else lines)
    assert visible(one_line) == one_line  # what is shown is shown as it is


def test_markup_safe_is_visible_and_escaped():
    assert markup_safe("\x1b[1m[red]x[/red]") == "\\x1b[1m\\[red]x\\[/red]"
    assert markup_safe(None) == "None" and visible(3) == "3"
