"""The interview's turn protocol (docs/grill.md): what a turn document must be, and what the
harness checks beyond the schema — each rejection says what was expected."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from andon.grill.protocol import Done, Question, TurnRejected, Written, parse_turn
from andon.grill.record import glossary_terms, glossary_with
from andon.review.contract import extract_json

Q = {"topic": "storage-format", "door": "one-way", "question": "Where is it stored?",
     "recommended": "A JSON file", "why": "formats are forever"}


def rejected(doc: object, phase: str = "ask", asked: dict | None = None,
             terms: tuple[str, ...] = ()) -> list[str]:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    with pytest.raises(TurnRejected) as exc:
        parse_turn(text, phase, asked or {}, terms)  # type: ignore[arg-type]
    return exc.value.errors


def test_a_question_and_done_are_read_in_the_ask_phase():
    q = parse_turn(json.dumps({**Q, "phase": "ask"}), "ask", {})
    assert isinstance(q, Question) and q.topic == "storage-format" and q.door == "one-way"
    assert isinstance(parse_turn('{"done": true}', "ask", {}), Done)


def test_bad_json_and_an_empty_reply_name_what_was_expected():
    assert "not valid JSON" in rejected("{'topic': 1}")[0]
    assert "expected one JSON object" in rejected("   ")[0]
    assert "expected one JSON object, got list" in rejected([Q])[0]


def test_a_broken_question_names_each_field_and_the_expected_shape():
    errors = rejected({**Q, "door": "sideways", "why": "  "})
    assert any(e.startswith("door:") and "expected a question" in e for e in errors)
    assert any(e.startswith("why:") and "non-empty" in e for e in errors)
    assert any("topic" in e and "lowercase" in e for e in rejected({**Q, "topic": "Big Topic"}))
    assert any("extra" in e.lower() for e in rejected({**Q, "answer": "mine"}))


def test_a_document_for_another_phase_is_refused():
    assert rejected({**Q, "phase": "review"}, "ask") == [
        "phase: this turn is phase 'ask', got 'review'"]


def test_a_topic_already_asked_is_not_asked_again():
    errors = rejected(Q, "ask", {"storage-format": "ask"})
    assert errors == ["topic 'storage-format' was already asked (phase ask): ask about "
                      "something else, or return {\"done\": true}"]


def test_a_review_question_names_answered_topics_it_rereads():
    asked = {"storage-format": "ask", "name": "ask"}
    review = {**Q, "topic": "format-vs-name"}
    assert rejected(review, "review", asked) == [
        "about: a review question names the answered topics it re-reads"]
    assert "about: nope not answered" in rejected({**review, "about": ["nope"]}, "review",
                                                  asked)[0]
    ok = parse_turn(json.dumps({**review, "about": ["name"]}), "review", asked)
    assert isinstance(ok, Question) and ok.about == ["name"]


def _written(**over: object) -> dict:
    doc = {"decisions": [{"title": "Storage", "decision": "JSON", "reasoning": "simple",
                          "alternatives_refused": [{"option": "SQLite", "why_not": "heavy"}],
                          "topics": ["storage-format"]}],
           "glossary": [{"term": "ledger", "meaning": "the book"}]}
    doc.update(over)
    return doc


def test_the_write_document_must_cover_every_answered_topic_and_no_other():
    asked = {"storage-format": "ask", "name": "ask"}
    assert rejected(_written(), "write", asked) == [
        "decisions: no decision covers the answered topic(s) name"]
    bad = _written()
    bad["decisions"][0]["topics"] = ["storage-format", "name", "ghost"]
    assert rejected(bad, "write", asked) == [
        "decisions.1.topics: 'ghost' was not asked in this interview"]
    good = _written()
    good["decisions"][0]["topics"] = ["storage-format", "name"]
    doc = parse_turn(json.dumps(good), "write", asked)
    assert isinstance(doc, Written) and doc.decisions[0].alternatives_refused[0].option == "SQLite"


def test_a_glossary_term_must_be_new():
    asked = {"storage-format": "ask"}
    assert rejected(_written(), "write", asked, ("Ledger",)) == [
        "glossary.1: 'ledger' is already in the glossary"]
    twice = _written(glossary=[{"term": "a", "meaning": "x"}, {"term": "A", "meaning": "y"}])
    assert rejected(twice, "write", asked) == ["glossary.2: 'A' is given twice"]
    assert any("decisions" in e for e in rejected(_written(decisions=[]), "write", asked))


def test_the_document_may_end_a_reply_in_a_json_fence():
    reply = 'Thinking...\n```json\n{"done": true}\n```\n'
    assert extract_json(reply) == '{"done": true}'


def test_glossary_terms_are_read_from_tables_and_lists_and_appended_as_a_section():
    text = "# Glossary\n\n| term | meaning |\n| --- | --- |\n| packet | a unit |\n\n" \
           "- **gate**: a check\n"
    assert glossary_terms(text) == ("packet", "gate")
    doc = Written.model_validate(_written(glossary=[{"term": "a|b", "meaning": "x\ny"}]))
    out = glossary_with(text, doc, "decisions/002-x.md")
    assert out is not None and out.startswith(text)
    assert out.endswith("## From decisions/002-x.md\n\n| term | meaning |\n| --- | --- |\n"
                        "| a\\|b | x y |\n")
    assert glossary_with(None, doc, "d.md", ).startswith("# Glossary\n\n| term |")  # type: ignore[union-attr]
    assert glossary_with(text, Written.model_validate(_written(glossary=[])), "d.md") is None


def test_docs_grill_md_publishes_the_schemas_exactly():
    from andon.grill.protocol import SCHEMAS

    text = (Path(__file__).parents[1] / "docs" / "grill.md").read_text(encoding="utf-8")
    tail = text.split("## JSON Schemas of the documents", 1)[1]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", tail, flags=re.S)]
    assert blocks == [SCHEMAS["question"], SCHEMAS["done"], SCHEMAS["write"]]
