"""`andon context --label-with AGENT`: an agent names the large segments the rules left
generic, through a real `command` agent process; its names become rules of the report; what
it wrote is checked like any agent output (names, ids), and off by default."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from andon.cli import main
from andon.context import load
from andon.context.label import MIN_TOKENS, candidates, parse

NOTES = "\n".join(f"- v1.{i}: fixed the parser for input number {i} and its edge cases"
                  for i in range(80))  # an untagged pasted document, well over MIN_TOKENS

# A labeller as a user would write one: reads the prompt, answers in $ANDON_REVIEW_FILE.
LABELLER = r'''
import json, os, re, sys
prompt = open(os.environ["ANDON_PROMPT_FILE"]).read()
items = json.loads(prompt.split("Items (JSON):\n", 1)[1])
mode = sys.argv[1]
labels = {}
for it in items:
    if "v1.0" in it["excerpt"]:
        labels[it["id"]] = "release_notes" if mode == "good" else "<script>x</script>"
if mode == "bad":
    labels["S99"] = "made_up"
with open(os.environ["ANDON_REVIEW_FILE"], "w") as f:
    json.dump({"labels": labels}, f)
print("named", len(labels))
'''


def transcript(tmp_path: Path) -> Path:
    p = tmp_path / "chat.json"
    p.write_text(json.dumps({"messages": [
        {"role": "system", "content": "You are a careful engineer."},
        {"role": "user", "content": "Summarise what changed:\n\n" + NOTES},
        {"role": "assistant", "content": "The parser was fixed eighty times."},
        {"role": "user", "content": "Again, the same notes:\n\n" + NOTES},
        {"role": "assistant", "content": "Still eighty fixes."},
        {"role": "user", "content": "Summarise what changed:\n\n" + NOTES}]}))
    return p


def run(tmp_path: Path, *args: str) -> dict:
    script = tmp_path / "labeller.py"
    script.write_text(LABELLER)
    r = CliRunner().invoke(main, ["-C", str(tmp_path), "context", str(transcript(tmp_path)),
                                  "--json", *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def final(report: dict) -> dict:
    return report["composition"]


def test_the_agents_names_become_components_wherever_the_text_appears(tmp_path):
    script = tmp_path / "labeller.py"
    report = run(tmp_path, "--label-with", "command", "--command",
                 f"{sys.executable} {script} good")
    # two openings asked (the third paste repeats the first), both named
    assert report["labelled"]["labels"] == {"S1": "release_notes", "S2": "release_notes"}
    assert report["labelled"]["problems"] == []
    assert report["labelled"]["run"]["exit_status"] == 0
    comp = final(report)
    # all three pastes carry the name: the repeat by the first one's rule
    assert comp["release_notes"] >= 3 * MIN_TOKENS
    assert comp.get("user_instruction", 0) < MIN_TOKENS


def test_off_by_default_and_the_rules_alone_say_user_instruction(tmp_path):
    report = run(tmp_path)
    assert "labelled" not in report
    assert "release_notes" not in final(report)


def test_names_and_ids_the_agent_made_up_are_refused_and_reported(tmp_path):
    script = tmp_path / "labeller.py"
    report = run(tmp_path, "--label-with", "command", "--command",
                 f"{sys.executable} {script} bad")
    assert report["labelled"]["labels"] == {}
    problems = " ".join(report["labelled"]["problems"])
    assert "S99" in problems and "not a name" in problems
    assert "<script>" not in json.dumps(final(report))


def test_only_large_generic_segments_are_asked_one_per_opening(tmp_path):
    conv = load(transcript(tmp_path))
    asked = candidates(conv)
    assert len(asked) == 2 and {a.component for a in asked} == {"user_instruction"}
    assert parse("not json", {"S1": asked[0]})[1][0].startswith("the labeller's answer is not")
