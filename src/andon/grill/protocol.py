"""The interview's turn protocol: what the interview agent returns each turn, validated.

The harness owns the phase. Each turn it gives the agent the feature text, the glossary and
DESIGN.md if present, and the log so far, and asks for one JSON document:

- phase ``ask`` or ``review``: one question, or ``{"done": true}`` to end the phase::

      {"phase": "ask", "topic": "storage-format", "door": "one-way",
       "question": "...", "recommended": "...", "why": "...",
       "about": []}                 # review: the answered topics the question re-reads

- phase ``write``: the decisions and glossary additions::

      {"phase": "write",
       "decisions": [{"title": "...", "decision": "...", "reasoning": "...",
                      "alternatives_refused": [{"option": "...", "why_not": "..."}],
                      "topics": ["storage-format"]}],
       "glossary": [{"term": "...", "meaning": "..."}]}

``phase`` may be left out; when given it must be the phase asked for. What the harness
checks beyond the schema (each a reason for :class:`TurnRejected`): a topic already asked is
not asked again; a review question names, in ``about``, the answered topics it re-reads;
every answered topic is covered by a decision and a decision cites only answered topics; a
glossary term is new (not in the glossary file, not twice). docs/grill.md is the user's side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from .. import json_document
from ..errors import DocumentRejected, InvalidValue

Phase = Literal["ask", "review", "write"]
PHASES: tuple[Phase, ...] = ("ask", "review", "write")
TOPIC = re.compile(r"^[a-z0-9][a-z0-9-]{0,59}$")


def _text(value: str) -> str:
    if not value.strip():
        raise InvalidValue("must be a non-empty string")
    return value.strip()


def _topic(value: str) -> str:
    if not TOPIC.match(value):
        raise InvalidValue(f"must match {TOPIC.pattern} (lowercase words joined by '-', at "
                         f"most 60 characters), got {value!r}")
    return value


Text = Annotated[str, AfterValidator(_text)]
Topic = Annotated[str, AfterValidator(_topic)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Question(_Strict):
    """One question with the answer the agent recommends and why."""

    phase: Literal["ask", "review"] | None = None
    topic: Topic = Field(description="a short key, new in this interview")
    door: Literal["one-way", "two-way"] = Field(
        description="one-way: expensive to reverse (names, schemas, behaviour towards "
                    "dependencies); two-way: cheap to change later")
    question: Text
    recommended: Text
    why: Text
    about: list[Topic] = Field(default_factory=list,
                               description="review: the answered topics this question re-reads")


class Done(_Strict):
    """The phase has nothing more to ask."""

    phase: Literal["ask", "review"] | None = None
    done: Literal[True]


class Refused(_Strict):
    option: Text
    why_not: Text


class Decision(_Strict):
    title: Text
    decision: Text
    reasoning: Text
    alternatives_refused: list[Refused] = Field(default_factory=list)
    topics: list[Topic] = Field(min_length=1, description="the answered topics it rests on")


class Term(_Strict):
    term: Text
    meaning: Text


class Written(_Strict):
    """The write phase's document: the decisions and the glossary additions."""

    phase: Literal["write"] | None = None
    decisions: list[Decision] = Field(min_length=1)
    glossary: list[Term] = Field(default_factory=list)


SCHEMAS = {"question": Question.model_json_schema(), "done": Done.model_json_schema(),
           "write": Written.model_json_schema()}


class TurnRejected(DocumentRejected):
    """A turn document breaks the protocol; ``errors`` says how, one line each (they go back
    to the agent as evidence for its next ask)."""


def parse_turn(text: str, phase: Phase, asked: Mapping[str, str],
               glossary_terms: Iterable[str] = ()) -> Question | Done | Written:
    """Parse and check one turn document for ``phase``.

    ``asked`` maps every topic in the log (answered or not) to its phase; ``glossary_terms``
    are the terms the glossary file already defines (compared case-insensitively).

    Raises:
        TurnRejected: every problem found, each saying what was expected.
    """
    data = json_document.load(
        text, TurnRejected, name="the turn", expected="expected one JSON object",
        empty="no turn document: nothing in $ANDON_REVIEW_FILE and no JSON at the end of the reply")
    if not isinstance(data, dict):
        raise TurnRejected([f"expected one JSON object, got {type(data).__name__}"])
    if data.get("phase") not in (None, phase):
        raise TurnRejected([f"phase: this turn is phase {phase!r}, got {data['phase']!r}"])
    model: type[Question] | type[Done] | type[Written]
    model = Written if phase == "write" else Done if "done" in data else Question
    try:
        doc = model.model_validate(data)
    except ValidationError as exc:
        what = {Written: "the write document", Done: '{"done": true}',
                Question: "a question"}[model]
        raise TurnRejected([f"{json_document.where(e['loc'])}: {e['msg']} (expected {what})"
                            for e in exc.errors()]) from None
    problems = _check(doc, phase, asked, {t.lower() for t in glossary_terms})
    if problems:
        raise TurnRejected(problems)
    return doc


def _check(doc: Question | Done | Written, phase: Phase, asked: Mapping[str, str],
           known_terms: set[str]) -> list[str]:
    problems: list[str] = []
    if isinstance(doc, Question):
        if doc.topic in asked:
            problems.append(f"topic {doc.topic!r} was already asked (phase {asked[doc.topic]}):"
                            " ask about something else, or return {\"done\": true}")
        unknown = [t for t in doc.about if t not in asked]
        if unknown:
            problems.append(f"about: {', '.join(unknown)} not answered in this interview; "
                            f"answered topics: {', '.join(asked) or 'none'}")
        if phase == "review" and not doc.about:
            problems.append("about: a review question names the answered topics it re-reads")
    elif isinstance(doc, Written):
        cited = {t for d in doc.decisions for t in d.topics}
        for i, d in enumerate(doc.decisions, 1):
            for t in d.topics:
                if t not in asked:
                    problems.append(f"decisions.{i}.topics: {t!r} was not asked in this "
                                    "interview")
        missing = [t for t in asked if t not in cited]
        if missing:
            problems.append(f"decisions: no decision covers the answered topic(s) "
                            f"{', '.join(missing)}")
        seen: set[str] = set()
        for i, term in enumerate(doc.glossary, 1):
            key = term.term.lower()
            if key in known_terms:
                problems.append(f"glossary.{i}: {term.term!r} is already in the glossary")
            elif key in seen:
                problems.append(f"glossary.{i}: {term.term!r} is given twice")
            seen.add(key)
    return problems

