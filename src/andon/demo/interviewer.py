"""A scripted interviewer (no model, no API key): four fixed questions about any feature
request, one contradiction check over the answers, then the decisions — for the tests and
for ``andon demo --plan``.

Three ways to use it:

- ``--agent scripted:andon.demo.interviewer:interviewer`` (in-process);
- ``--agent command --command "python /path/to/andon/demo/interviewer.py"`` (a real process,
  run as a script so that it imports nothing of andon and starts fast: it reads
  the prompt from ``$ANDON_PROMPT_FILE``, writes its turn to ``$ANDON_REVIEW_FILE`` and a
  made-up usage record — tokens counted as characters / 4, cost 0 — to ``$ANDON_USAGE_FILE``);
- :func:`run_interview` from Python (the demo's seam): the whole interview, non-interactive.

It reads the interview's state from the JSON block the prompt ends with (between
``<!-- grill-state -->`` markers), as any agent could.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agents.base import StageContext

STATE = re.compile(r"<!-- grill-state -->\s*```json\s*\n(.*?)\n```\s*<!-- /grill-state -->",
                   re.S)

QUESTIONS: list[dict[str, str]] = [
    {"topic": "public-name", "door": "one-way",
     "question": "What is the feature called where users see it (command, flag or function "
                 "name)?",
     "recommended": "{name}",
     "why": "names end up in scripts, docs and muscle memory; renaming later breaks them"},
    {"topic": "data-format", "door": "one-way",
     "question": "Where does the feature keep its data, and in what format?",
     "recommended": "No new stored data: it works on what the project already has",
     "why": "a new file format or schema must be migrated forever once written"},
    {"topic": "dependency-failure", "door": "one-way",
     "question": "What happens when something the feature depends on fails or is missing?",
     "recommended": "Stop with a clear error naming the dependency; never guess or retry "
                    "silently",
     "why": "behaviour towards dependencies is what callers build on"},
    {"topic": "compatibility", "door": "one-way",
     "question": "Must everything that works today keep working unchanged?",
     "recommended": "Yes: the feature is additive; existing behaviour and defaults stay",
     "why": "breaking existing callers is the most expensive door of all"},
]


def interviewer(ctx: StageContext) -> str:
    """The scripted adapter's behaviour: one turn, written to ``ctx.review_file``."""
    doc = turn(ctx.prompt)
    text = json.dumps(doc, indent=2)
    if ctx.review_file is not None:
        ctx.review_file.write_text(text, encoding="utf-8")
    return f"```json\n{text}\n```"


def turn(prompt: str) -> dict[str, Any]:
    """The next turn document for the interview state at the end of ``prompt``."""
    m = STATE.search(prompt)
    if m is None:
        return {"done": True}   # not an interview prompt: nothing to ask
    state = json.loads(m.group(1))
    phase, answers = state["phase"], state["answers"]
    asked = {a["question"]["topic"] for a in answers}
    if phase == "ask":
        for q in QUESTIONS:
            if q["topic"] not in asked:
                name = _name(prompt, state.get("feature", "feature"))
                return {"phase": "ask", **q, "recommended": q["recommended"].format(name=name)}
        return {"phase": "ask", "done": True}
    if phase == "review":
        if "consistency" in asked:
            return {"phase": "review", "done": True}
        agreed = "; ".join(f"{a['question']['topic']}: {a['answer']}" for a in answers)
        return {"phase": "review", "topic": "consistency", "door": "one-way",
                "about": [a["question"]["topic"] for a in answers],
                "question": f"Re-reading the agreed answers ({agreed}): do any two contradict "
                            "each other, or can any be read two ways?",
                "recommended": "No contradiction: the answers stand as agreed",
                "why": "a contradiction found now costs a sentence; found in code, a rewrite"}
    return _write(answers, state.get("glossary_terms", []))


def _write(answers: list[dict[str, Any]], known: list[str]) -> dict[str, Any]:
    decisions = []
    for a in answers:
        q = a["question"]
        refused = ([{"option": q["recommended"], "why_not": "the person corrected it"}]
                   if a["corrected"] else [])
        decisions.append({"title": q["topic"].replace("-", " ").capitalize(),
                          "decision": a["answer"],
                          "reasoning": q["why"] + (" (the person's own answer)"
                                                   if a["corrected"] else ""),
                          "alternatives_refused": refused, "topics": [q["topic"]]})
    name = next((a["answer"] for a in answers if a["question"]["topic"] == "public-name"), "")
    glossary = []
    if name and name.lower() not in {k.lower() for k in known}:
        glossary.append({"term": name, "meaning": "the feature settled in this interview"})
    return {"phase": "write", "decisions": decisions, "glossary": glossary}


def _name(prompt: str, feature: str) -> str:
    """The feature's name: its request's first heading as lowercase words joined by '-'."""
    m = re.search(r"^# The feature request \(.*?\)\n\n#+\s*(.+)$", prompt, re.M)
    words = re.findall(r"[a-z0-9]+", (m.group(1) if m else Path(feature).stem).lower())
    return "-".join(words[:4]) or "feature"


def run_interview(repo: Path, feature_path: Path, *, non_interactive: bool = True) -> Path:
    """Run the whole interview about ``feature_path`` in ``repo`` with this interviewer
    (answers: every recommendation when ``non_interactive``, else asked in the terminal) and
    return the decisions file: its copy in ``.andon/grill/<slug>/`` (the file itself is
    committed on ``andon/grill/<slug>``, not in the checkout). Running it again after it
    finished returns the same file.

    Raises:
        AndonError: as :class:`andon.grill.Interview` does (a bad feature file, a branch of
            another interview in the way).
    """
    from rich.console import Console

    from ..agents.scripted import ScriptedAgent
    from ..config import load_config
    from ..git.repo import Repo
    from ..grill import Interview, TerminalAnswerer, accept_all

    r = Repo(repo)
    interview = Interview(r, load_config(r.root), ScriptedAgent(interviewer), feature_path)
    if interview.log.phase == "done":
        interview.close()
        return interview.result().decisions_copy
    answer = accept_all if non_interactive else TerminalAnswerer(Console())
    return interview.run(answer).decisions_copy


def main() -> None:
    """The command adapter's entry: ``python <this file>`` (``python -m`` works too, but
    imports the whole demo package first)."""
    prompt = Path(os.environ["ANDON_PROMPT_FILE"]).read_text(encoding="utf-8")
    text = json.dumps(turn(prompt), indent=2)
    if out := os.environ.get("ANDON_REVIEW_FILE"):
        Path(out).write_text(text, encoding="utf-8")
    else:
        print(f"```json\n{text}\n```")
    if usage := os.environ.get("ANDON_USAGE_FILE"):
        Path(usage).write_text(json.dumps({
            "model": "scripted-interviewer", "input_tokens": len(prompt) // 4,
            "output_tokens": len(text) // 4, "cost_usd": 0.0, "turns": 1}))
    sys.stdout.write("asked one turn\n")


if __name__ == "__main__":
    main()
