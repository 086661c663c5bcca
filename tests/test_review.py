"""The reviewer contract: each validation rule and each downgrade rule, with the exact error."""

import json

import pytest

from andon.packet import load_packets
from andon.review.contract import ReviewRejected, decide, extract_json, validate

from helpers import make_project, packet_md

LINES = {"src/calc/ops.py": 8, "tests/test_ops.py": 9}


@pytest.fixture
def packet(tmp_path):
    md = packet_md("P1", "two-invariants", "Two invariants.").replace(
        "+++\n\n## Context", '[[invariants]]\nid = "I1"\ncritical = true\nassert = "a"\n\n'
        '[[invariants]]\nid = "I2"\nassert = "b"\n+++\n\n## Context')
    root = make_project(tmp_path / "p", {"P1": (md, {})})
    return load_packets(root / "packets", root)[0]


def doc(**over):
    d = {"verdicts": [
        {"invariant": "I1", "verdict": "held", "evidence": "src/calc/ops.py:2", "reason": "r"},
        {"invariant": "I2", "verdict": "held", "evidence": "src/calc/ops.py:4-5",
         "reason": "r"}],
        "findings": [], "decision": "accept"}
    d.update(over)
    return json.dumps(d)


def check(text, packet, stages=("implement",)):
    return validate(text, packet, LINES.get, stages)


def errors(text, packet, stages=("implement",)):
    with pytest.raises(ReviewRejected) as exc:
        check(text, packet, stages)
    return exc.value.errors


def test_valid_review_accepted(packet):
    out = decide(check(doc(), packet), packet)
    assert out.decision == "accept" and out.downgraded_because == []


def test_malformed_json(packet):
    assert errors('{"verdicts": [', packet)[0].startswith("review is not valid JSON")


def test_schema_violation_names_field(packet):
    e = errors(doc(decision="maybe"), packet)
    assert any(x.startswith("decision:") for x in e)


def test_missing_invariant(packet):
    d = json.loads(doc())
    d["verdicts"] = d["verdicts"][:1]
    assert errors(json.dumps(d), packet) == ["no verdict for invariant 'I2'"]


def test_unknown_and_duplicate_invariant(packet):
    d = json.loads(doc())
    d["verdicts"].append(dict(d["verdicts"][0]))
    d["verdicts"].append({**d["verdicts"][0], "invariant": "I9"})
    e = errors(json.dumps(d), packet)
    assert "invariant 'I1' has 2 verdicts; give exactly one" in e
    assert any("unknown invariant 'I9'" in x for x in e)


def test_evidence_file_missing(packet):
    d = json.loads(doc())
    d["verdicts"][0]["evidence"] = "src/calc/nope.py:1"
    assert errors(json.dumps(d), packet) == [
        "verdict I1: src/calc/nope.py does not exist in the post-change tree"]


def test_evidence_line_outside_file(packet):
    d = json.loads(doc())
    d["verdicts"][1]["evidence"] = "src/calc/ops.py:7-12"
    assert errors(json.dumps(d), packet) == [
        "verdict I2: src/calc/ops.py:7-12 is outside src/calc/ops.py, which has 8 lines"]


def test_evidence_must_be_a_location(packet):
    d = json.loads(doc())
    d["verdicts"][0]["evidence"] = "looks fine to me"
    assert "evidence must be path:line" in errors(json.dumps(d), packet)[0]


def test_finding_location_checked(packet):
    e = errors(doc(findings=[{"severity": "minor", "location": "tests/test_ops.py:99",
                              "message": "m"}]), packet)
    assert e == ["finding 1: tests/test_ops.py:99 is outside tests/test_ops.py, which has 9 "
                 "lines"]


def test_revise_stage_must_exist(packet):
    e = errors(doc(decision="revise", revise_stage="atdd"), packet)
    assert e == ["revise_stage 'atdd' is not a stage of this packet (implement)"]
    assert check(doc(decision="revise", revise_stage="atdd"), packet,
                 ("atdd", "implement")).revise_stage == "atdd"


def test_downgrade_on_red_gate(packet):
    out = decide(check(doc(), packet), packet, red_gates=["suite"])
    assert out.decision == "revise" and out.downgraded_because == ["gate suite is red"]


@pytest.mark.parametrize("verdict", ["violated", "unverifiable"])
def test_downgrade_on_critical_invariant(packet, verdict):
    d = json.loads(doc())
    d["verdicts"][0]["verdict"] = verdict
    out = decide(check(json.dumps(d), packet), packet)
    assert out.decision == "revise"
    assert out.downgraded_because == [
        f"critical invariant I1 is {verdict} (src/calc/ops.py:2)"]


def test_non_critical_violation_does_not_downgrade(packet):
    d = json.loads(doc())
    d["verdicts"][1]["verdict"] = "violated"
    assert decide(check(json.dumps(d), packet), packet).decision == "accept"


def test_downgrade_on_blocker_finding(packet):
    out = decide(check(doc(findings=[{"severity": "blocker", "location": "src/calc/ops.py:5",
                                      "message": "divides by zero"}]), packet), packet)
    assert out.decision == "revise"
    assert out.downgraded_because == ["blocker finding at src/calc/ops.py:5: divides by zero"]


def test_revise_keeps_named_stage(packet):
    out = decide(check(doc(decision="revise"), packet), packet)
    assert (out.decision, out.revise_stage, out.downgraded_because) == ("revise", "implement",
                                                                         [])


def test_extract_json_from_fenced_message():
    assert extract_json('Here it is:\n```json\n{"a": 1}\n```\nbye') == '{"a": 1}'
    assert extract_json('  {"a": 1} ') == '{"a": 1}'


def test_reversed_range_and_schema_positions_are_named_plainly(packet):
    d = json.loads(doc())
    d["verdicts"][1]["evidence"] = "src/calc/ops.py:5-2"
    assert errors(json.dumps(d), packet) == [
        "verdict I2: src/calc/ops.py:5-2 is a reversed range (start after end)"]
    d = json.loads(doc())
    d["verdicts"][1]["verdict"] = "fine"
    assert errors(json.dumps(d), packet)[0].startswith("verdicts.2.verdict:")
    e = errors(doc(findings=[{"severity": "minor", "location": "nowhere", "message": "m"}]),
               packet)
    assert e == ["finding 1: location must be path:line or path:start-end, got 'nowhere'"]
