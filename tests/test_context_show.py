"""`andon show ID --context`: each stage's context summary from its transcript, and the page
written beside it (the evidence links it); a transcript andon context cannot read is named,
not fatal."""

import json
import shlex
from pathlib import Path

import pytest

from andon.context import stage

from helpers import MUL_CODE, andon, make_project, mul_packet

T = Path(__file__).parent / "fixtures" / "transcripts"
STREAM = T / "claude-stream-json/basic_query-2.1.7.ndjson"


def test_summarise_and_line(tmp_path):
    copy = tmp_path / "implement.transcript.log"
    copy.write_text(STREAM.read_text())
    s = stage.summarise(copy)
    assert s["format"] == "claude-stream-json" and s["turns"] == 1 and s["peak"] == 21580
    assert Path(s["page"]).is_file() and Path(s["page"]).name.endswith(".context.html")
    assert stage.line(s).startswith("claude-stream-json, 1 turns, peak 21,580 tokens")
    junk = tmp_path / "other.log"
    junk.write_text("hello\n")
    assert stage.line(stage.summarise(junk)).startswith("not read: ")


@pytest.mark.e2e
def test_show_context_after_a_real_run(tmp_path):
    """A command agent that writes the code and prints a Claude stream-json transcript: the
    stage's context is summarised by `andon show P1 --context`, in text and JSON."""
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, {"P1": mul_packet("P1")})
    agent = ("printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py && cat "
             + shlex.quote(str(STREAM)))
    run = andon(root, "run", "--agent", "command", "--command", agent)
    assert run.returncode == 0, run.stdout + run.stderr
    plain = andon(root, "show", "P1")
    assert "context:" not in plain.stdout
    r = andon(root, "show", "P1", "--context")
    assert r.returncode == 0, r.stderr
    assert "context: claude-stream-json, 1 turns, peak 21,580 tokens" in r.stdout
    doc = json.loads(andon(root, "show", "P1", "--context", "--json").stdout)
    [st] = [s for s in doc["attempts"][0]["stages"] if s.get("context")]
    assert Path(st["context"]["page"]).is_file()


@pytest.mark.parametrize("kind, said", [("missing", "no such file"),
                                        ("folder", "is a folder, not a transcript file")])
def test_andon_context_on_a_path_that_is_not_a_file_says_what_it_is(tmp_path, kind, said):
    """It said "expected a transcript file, got nothing" for a path that does not exist."""
    path = tmp_path / "t.jsonl"
    if kind == "folder":
        path.mkdir()
    r = andon(tmp_path, "context", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: {said}" in r.stderr, r.stderr
