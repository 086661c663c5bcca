"""`andon plan` (issue 14): a scripted planner (a command agent printing the documented JSON)
whose mistakes come back as evidence in the next round's prompt; drafts never run until a
person accepts them, and accepting or rejecting is recorded."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from andon.config import PlanSettings
from andon.git.repo import Repo
from andon.plan import checks
from andon.plan.contract import DraftPacket, PlanRejected, parse, render
from andon.state import open_store
from tests.helpers import (
    FAST,
    MUL_TEST,
    NEST_DEEP_PY,
    _add_lines,
    andon,
    git,
    make_project,
    packet_md,
    skip_without_fs,
    with_sandbox,
)

PLANNER = '''\
import json, os, pathlib, shutil, sys
n = int(os.environ["ANDON_ATTEMPT"])
out = pathlib.Path(sys.argv[2]); out.mkdir(exist_ok=True)
shutil.copyfile(os.environ["ANDON_PROMPT_FILE"], out / f"round-{n}.md")
docs = json.loads(pathlib.Path(sys.argv[1]).read_text())
doc = docs[min(n, len(docs)) - 1]
if os.environ.get("ANDON_REVIEW_FILE") and n % 2:
    pathlib.Path(os.environ["ANDON_REVIEW_FILE"]).write_text(json.dumps(doc))
else:  # even rounds answer in the reply, as a fenced block
    print("here is the plan\\n```json\\n" + json.dumps(doc) + "\\n```")
'''

SPEC = "# Multiply\n\ncalc.ops gains mul(a, b) and a square(x) built on it.\n"
PASSING_TEST = "from calc.ops import add\n\n\ndef test_add_again():\n    assert add(1, 1) == 2\n"


def pkt(pid: str, paths: list[str], requires: list[str] = (), invariants: bool = True,
        planted: dict[str, str] | None = None) -> dict:
    return {"id": pid, "slug": f"s-{pid.lower()}", "goal": f"{pid} is observable",
            "allowed_paths": paths, "requires": list(requires),
            "invariants": [{"id": f"{pid}-1", "assert": "mul(3, 4) == 12"}] if invariants
            else [],
            "forbidden_shortcuts": ["special-casing the test inputs"],
            "planted_tests": planted or {}}


GOOD = {"packets": [
    pkt("M1", ["src/calc/ops.py"], planted={"tests/test_mul_m1.py": MUL_TEST}),
    pkt("M2", ["src/calc/square.py"], ["M1"]),
]}
BAD = {"packets": [
    pkt("A1", ["src/calc/ops.py"]),
    pkt("A2", ["src/calc/**"]),                                 # overlaps A1, unordered
    pkt("C1", ["src/c1.py"], ["C2"]), pkt("C2", ["src/c2.py"], ["C1"]),   # a cycle
    pkt("N1", ["src/n1.py"], invariants=False),                 # no invariant
    pkt("T1", ["src/t1.py", "tests/**"]),                       # tests in allowed_paths
    pkt("G1", ["src/g1.py"], planted={"tests/test_g1.py": PASSING_TEST}),  # already green
]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    # the command planner keeps its prompts in tmp_path/prompts, outside any worktree: bound
    # writable into the sandbox by name, as a user would
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    config = _add_lines(FAST, "agent", f'sandbox_paths = ["rw:{prompts}"]\n')
    return make_project(tmp_path / "repo", files={"docs/spec.md": SPEC}, config=config)


def planner(tmp_path: Path, *docs: dict) -> tuple[str, Path]:
    script = tmp_path / "planner.py"
    script.write_text(PLANNER)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(list(docs)))
    prompts = tmp_path / "prompts"
    return f"{sys.executable} {script} {answers} {prompts}", prompts


def test_every_problem_goes_back_and_nothing_is_accepted(project: Path, tmp_path: Path):
    command, prompts = planner(tmp_path, BAD)
    r = andon(project, "plan", "docs/spec.md", "--agent", "command", "--command", command,
              "--rounds", "2")
    assert r.returncode == 1, r.stdout + r.stderr
    second = (prompts / "round-2.md").read_text()
    expected = ["A2: allowed_paths overlap A1's", "requires forms a cycle: C1 -> C2 -> C1",
                "N1: names no invariant", "T1: allowed_paths 'tests/**' covers planted test",
                "G1: planted test tests.test_g1::test_add_again already passes on the base"]
    for words in expected:
        assert words in second, words          # evidence for the next round
        assert words in r.stdout, words        # and what remains, shown to the person
    assert "nothing was accepted" in r.stdout
    assert "Problems with your previous plan" not in (prompts / "round-1.md").read_text()
    store = open_store(Repo(project))
    try:
        states = {p["id"]: p["state"] for p in store.packets()}
        assert states == {pid: "draft" for pid in ("A1", "A2", "C1", "C2", "G1", "N1", "T1")}
        assert not store.events(kind="accepted")
        rounds = store.events(kind="plan-round")
        assert [e["data"]["round"] for e in rounds] == [1, 2]
        assert rounds[0]["data"]["agent"] == "command"
        assert rounds[0]["data"]["usage"]["wall_s"] is not None   # usage accounting
    finally:
        store.close()
    text = (project / "packets/N1/packet.md").read_text()
    assert 'status = "draft"' in text and "- [ ] special-casing the test inputs" in text


def test_a_mistake_in_round_one_is_fixed_in_round_two(project: Path, tmp_path: Path):
    wrong = {"packets": [GOOD["packets"][0], pkt("M2", ["src/calc/square.py"], ["M1"],
                                                  invariants=False)]}
    command, prompts = planner(tmp_path, wrong, GOOD)
    r = andon(project, "plan", "docs/spec.md", "--agent", "command", "--command", command)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "M2: names no invariant" in (prompts / "round-2.md").read_text()
    assert not (prompts / "round-3.md").exists()
    assert "2 draft(s) pass every check after 2 round(s)" in r.stdout
    assert (project / "packets/M1/plant/tests/test_mul_m1.py").read_text() == MUL_TEST


def test_a_broken_document_is_evidence_too(project: Path, tmp_path: Path):
    # no planted test in round 2: no test run is needed to show the round-1 evidence
    command, prompts = planner(tmp_path, {"packets": [{"id": "X"}]},
                               {"packets": [pkt("M1", ["src/calc/ops.py"])]})
    r = andon(project, "plan", "docs/spec.md", "--agent", "command", "--command", command)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "packets.1.goal: Field required" in (prompts / "round-2.md").read_text()


SQUARE_TEST = "from calc.ops import square\n\n\ndef test_square():\n    assert square(3) == 9\n"
AGENT = "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> src/calc/ops.py"


def test_a_draft_never_runs_until_accepted_and_accepting_is_recorded(tmp_path: Path):
    ready = packet_md("P1", "multiply", "mul multiplies", allowed_paths=["src/calc/**"])
    draft = packet_md("P2", "multiply-again", "mul multiplies", status="draft",
                      allowed_paths=["src/calc/**"], requires=["P1"])
    root = make_project(tmp_path / "repo", {
        "P1": (ready, {"tests/test_mul_p1.py": MUL_TEST}),
        "P2": (draft.replace("+++\n\n##", '[[invariants]]\nid = "I1"\nassert = "x"\n+++\n\n##'),
               {"tests/test_square_p2.py": SQUARE_TEST})})
    r = andon(root, "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "P1, P2 (draft)" in r.stdout
    r = andon(root, "run", "--agent", "command", "--command", AGENT)
    assert r.returncode == 0, r.stdout + r.stderr
    store = open_store(Repo(root))
    try:
        assert store.packet("P1")["state"] == "done"
        assert store.packet("P2")["state"] == "draft"
        assert store.attempts("P2") == []
    finally:
        store.close()
    board = andon(root, "status")
    assert any("P2" in ln and "draft" in ln for ln in board.stdout.splitlines()), board.stdout
    # a hand edit of the status is no acceptance: the row stays a draft
    src = root / "packets/P2/packet.md"
    src.write_text(src.read_text().replace('status = "draft"', 'status = "ready"'))
    r = andon(root, "run", "--agent", "command", "--command", AGENT)
    assert "accept it with `andon plan --accept P2`" in r.stdout + r.stderr
    store = open_store(Repo(root))
    try:
        assert store.attempts("P2") == []
    finally:
        store.close()
    src.write_text(src.read_text().replace('status = "ready"', 'status = "draft"'))
    r = andon(root, "plan", "--accept", "P2", "--by", "alice")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "P2: accepted by alice" in r.stdout
    assert 'status = "ready"' in src.read_text()
    store = open_store(Repo(root))
    try:
        (event,) = store.events("P2", "accepted")
        assert event["data"]["by"] == "alice" and event["to_state"] == "ready"
    finally:
        store.close()


def test_accepting_a_draft_with_problems_needs_force(project: Path, tmp_path: Path):
    # without G1's planted test: every --accept checks again, and no test run is needed here
    command, _ = planner(tmp_path, {"packets": BAD["packets"][:-1]})
    andon(project, "plan", "docs/spec.md", "--agent", "command", "--command", command,
          "--rounds", "1")
    r = andon(project, "plan", "--accept", "N1", "--by", "bob")
    assert r.returncode == 1 and "N1 still has 1 problem(s): N1: names no invariant" in r.stderr
    assert 'status = "draft"' in (project / "packets/N1/packet.md").read_text()
    r = andon(project, "plan", "--accept", "N1", "--by", "bob", "--force")
    assert r.returncode == 0, r.stderr
    assert "despite 1 problem(s) (--force, recorded)" in r.stdout
    store = open_store(Repo(project))
    try:
        (event,) = store.events("N1", "accepted")
        assert event["data"]["forced"] and event["data"]["by"] == "bob"
    finally:
        store.close()
    r = andon(project, "plan", "--reject", "T1", "--why", "already covered", "--by", "bob")
    assert r.returncode == 0, r.stderr
    assert not (project / "packets/T1").exists()
    r = andon(project, "plan", "--reject", "A1")
    assert r.returncode == 2 and "--why" in r.stderr
    store = open_store(Repo(project))
    try:
        (event,) = store.events("T1", "draft-rejected")
        assert event["data"] == {"by": "bob", "why": "already covered",
                                 "source": event["data"]["source"]}
    finally:
        store.close()


# -- one test per rule, with an honest plan that must pass it ---------------------------

def drafts(doc: dict) -> list[DraftPacket]:
    return parse(json.dumps(doc)).packets


def test_rule_requires_graph():
    bad = drafts({"packets": [pkt("A", ["a/x.py"], ["B"]), pkt("B", ["b/x.py"], ["A", "Z"])]})
    found = checks.requires_graph(bad, [])
    assert any("unknown packet 'Z'" in f for f in found)
    assert sum("cycle" in f for f in found) == 1
    assert checks.requires_graph(drafts(GOOD), []) == []
    assert checks.requires_graph(drafts({"packets": [pkt("A", ["a"], ["OLD"])]}), ["OLD"]) == []


def test_rule_overlaps_ordered():
    both = drafts({"packets": [pkt("A", ["src/x/**"]), pkt("B", ["src/x/y.py"])]})
    assert checks.overlaps_ordered(both)
    chain = drafts({"packets": [pkt("A", ["src/x/**"]), pkt("M", ["m.py"], ["A"]),
                                pkt("B", ["src/x/y.py"], ["M"])]})
    assert checks.overlaps_ordered(chain) == []           # ordered transitively
    apart = drafts({"packets": [pkt("A", ["src/a/**"]), pkt("B", ["src/b/*.py"])]})
    assert checks.overlaps_ordered(apart, ["src/a/k.py", "src/b/k.py"]) == []


def test_rule_has_invariant():
    assert checks.has_invariant(drafts({"packets": [pkt("A", ["a"], invariants=False)]}))
    assert checks.has_invariant(drafts(GOOD)) == []


def test_rule_bounded_scope():
    limits = PlanSettings(max_allowed_paths=2)
    wide = drafts({"packets": [pkt("A", ["a", "b", "c"]), pkt("B", ["**"]), pkt("C", [])]})
    found = checks.bounded_scope(wide, limits)
    assert any("A: 3 allowed_paths" in f for f in found)
    assert any("B: allowed_paths '**' matches the whole repository" in f for f in found)
    assert any("C: allowed_paths is empty" in f for f in found)
    assert checks.bounded_scope(drafts(GOOD), limits) == []


def test_rule_tests_not_allowed():
    test_paths = ["tests/**", "**/test_*.py"]
    covering = drafts({"packets": [pkt("A", ["src/**", "tests/test_a.py"],
                                       planted={"tests/test_a.py": "x"})]})
    assert any("covers planted test" in f for f in checks.tests_not_allowed(covering, test_paths))
    wild = drafts({"packets": [pkt("A", ["tests/**"])]})
    assert checks.tests_not_allowed(wild, test_paths)
    helper = drafts({"packets": [pkt("A", ["src/a.py", "tests/test_helper_new.py"])]})
    assert checks.tests_not_allowed(helper, test_paths) == []   # one new test file, named


def test_contract_renders_a_packet_that_reads_back(tmp_path: Path):
    (d,) = drafts({"packets": [pkt("A", ["src/a.py"])]})
    folder = tmp_path / "packets" / "A"
    folder.mkdir(parents=True)
    (folder / "packet.md").write_text(render(d))
    from andon.packet import check_packets
    found, problems = check_packets(tmp_path / "packets", tmp_path)
    assert problems == [] and found[0].status == "draft" and found[0].tests == "none"
    with pytest.raises(PlanRejected, match="not valid JSON"):
        parse("{")


def test_a_draft_is_never_claimable():
    from andon import lifecycle
    from andon.errors import IllegalTransition
    assert "draft" not in lifecycle.CLAIMABLE
    lifecycle.check("draft", "ready")
    lifecycle.check("ready", "draft")
    for to in ("running", "gating", "merging", "done"):
        with pytest.raises(IllegalTransition):
            lifecycle.check("draft", to)


def test_rule_validation_reports_what_andon_check_does(tmp_path: Path):
    folder = tmp_path / "packets" / "A"
    folder.mkdir(parents=True)
    (folder / "packet.md").write_text(packet_md("A", status="draft", max_attempts=0))
    found = checks.validation(tmp_path / "packets", tmp_path, {"A": folder / "packet.md"})
    assert len(found) == 1 and found[0].startswith("A: andon check: packets/A/packet.md:")
    assert "max_attempts" in found[0]
    (folder / "packet.md").write_text(packet_md("A", status="draft"))
    assert checks.validation(tmp_path / "packets", tmp_path, {"A": folder / "packet.md"}) == []


def test_the_planner_runs_under_the_sandbox_like_every_stage(project: Path, tmp_path: Path):
    """At `auto` (fs here) the planning stage works: the command planner (below /tmp, as
    the test's checkout is) runs, reads its prompt, writes its document; the prompts it
    keeps go to a folder bound writable by name (``project``)."""
    skip_without_fs("auto")
    command, prompts = planner(tmp_path, GOOD)
    toml = project / "andon.toml"
    toml.write_text(with_sandbox(toml.read_text(), "auto"))
    git(project, "commit", "-qam", "sandbox auto")
    r = andon(project, "plan", "docs/spec.md", "--agent", "command", "--command", command)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (prompts / "round-1.md").is_file()
    assert (project / "packets/M1/plant/tests/test_mul_m1.py").read_text() == MUL_TEST


def test_a_planner_that_nests_folders_too_deep_for_python_gets_an_answer_not_a_crash(
        project: Path, tmp_path: Path, deep_ok):
    """Without a sandbox the planner can write into the tree it reads: folders nested past
    Python's recursion limit are named as its change, and its temporary folder is deleted
    all the same (``shutil.rmtree`` raised RecursionError there)."""
    command, _ = planner(tmp_path, GOOD)
    toml = project / "andon.toml"
    toml.write_text(with_sandbox(toml.read_text(), "none"))
    git(project, "commit", "-qam", "no sandbox")
    (tmp_path / "deep.py").write_text(NEST_DEEP_PY + "\n\nnest_deep('build')\n")
    (tmp_path / "deep.sh").write_text(f"{sys.executable} {tmp_path / 'deep.py'} && {command}\n")
    r = andon(project, "plan", "docs/spec.md", "--agent", "command",
              "--command", f"sh {tmp_path / 'deep.sh'}")
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stdout + r.stderr, r.stderr
    assert "build/" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not list(Path(os.environ["TMPDIR"]).glob("andon-plan*")), "left behind"
