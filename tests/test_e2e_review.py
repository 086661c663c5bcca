"""End-to-end: reviews against named invariants, staged pipelines, human gates, dependencies
and spec pins — on real temporary git repositories with real pytest subprocesses.

Agents are scripted functions of a ``StageContext``; reviewers write their JSON document to
``ctx.review_file`` (or end their reply with a ```json block). Every assertion reads what the
harness stored (reviews, gate results, stage runs, events, refs), never what an agent said.

Most repositories use ``FAST`` (2 red runs, 1 hermetic run, no random-order run): none of
these tests is about the number of runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from andon.errors import ConfigError
from andon.exits import EXIT_HALTED, EXIT_OK
from andon.packet import load_packets
from andon.review.contract import SCHEMA, decide, validate

from helpers import (
    MUL_CODE,
    andon,
    config_toml,
    git,
    honest_mul,
    make_project,
    mul_packet,
    packet_md,
    review_document,
    runner_for,
    wrapper_config,
    write,
)

FAST = config_toml(red_runs=2, hermetic_runs=1, hermetic_random_order=False)


def config_with(stages: dict[str, str] | None = None, tiers: dict[str, str] | None = None,
                base: str = FAST) -> str:
    """``base`` with ``[stages]`` keys set (TOML values as text, replacing any the file has)
    and a ``[stages.tiers]`` table added."""
    stages = dict(stages or {})
    if stages:
        if "\n[stages]\n" not in base:
            base += "\n[stages]\n"
        head, _, rest = base.partition("\n[stages]\n")
        body, sep, tail = rest.partition("\n[")
        for key, value in stages.items():
            line = f"{key} = {value}"
            body, n = re.subn(rf"^{re.escape(key)}\s*=.*$", line, body, flags=re.M)
            if not n:
                body = line + "\n" + body
        base = head + "\n[stages]\n" + body + sep + tail
    if tiers:
        assert not re.search(r"^\[stages\.tiers\]", base, flags=re.M)
        base += "\n[stages.tiers]\n" + "".join(f"{k} = {v}\n" for k, v in tiers.items())
    return base


INTEGRATION = "refs/heads/andon/integration"
PLANTED = "tests/test_mul_p1.py"
INVARIANTS = (("MUL-1", True, "mul(a, b) == a * b for all ints"),
              ("MUL-2", False, "mul does not change its arguments"))
# src/calc/ops.py after honest_mul: helpers.CALC (6 lines) + MUL_CODE (4 lines); `mul` is on
# lines 9-10, which exist only in the post-change tree.
OPS_LINES = 10
MUL_LINES = "src/calc/ops.py:9-10"
ATDD_FILE = "tests/test_mul_atdd.py"

ATDD_TESTS = '''\
import pytest


def test_mul_ordinary():
    """MUL-1: an ordinary case."""
    from calc.ops import mul
    assert mul(3, 4) == 12


def test_mul_zero():
    """MUL-1: the boundary."""
    from calc.ops import mul
    assert mul(0, 9) == 0


def test_mul_rejects_text():
    """MUL-1: a rejected input."""
    from calc.ops import mul
    with pytest.raises(TypeError):
        mul("a", "b")
'''

# sub and neg live in modules of their own, so that their merges never conflict with mul's.
SUB_TEST = "from calc.sub import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
NEG_TEST = "from calc.neg import neg\n\n\ndef test_neg():\n    assert neg(4) == -4\n"


# -- builders -----------------------------------------------------------------------------

def with_invariants(md: str, invariants=INVARIANTS) -> str:
    """A packet.md text with ``[[invariants]]`` tables (id, critical, assert) added."""
    block = "".join(f'\n[[invariants]]\nid = "{i}"\ncritical = {str(c).lower()}\n'
                    f'assert = "{a}"\n' for i, c, a in invariants)
    assert md.count("\n+++\n\n## Context") == 1
    return md.replace("\n+++\n\n## Context", "\n" + block + "+++\n\n## Context")


def inv_packet(pid: str = "P1", plant: bool = True, **fields):
    """mul_packet with the two INVARIANTS (MUL-1 critical); ``plant=False`` plants nothing."""
    if not plant:  # then only the review (or an atdd stage) decides: opt out explicitly
        fields = {"tests": "none", "gate": "auto", **fields}
    md, planted = mul_packet(pid, **fields)
    if not plant:
        planted = {}
    return with_invariants(md), planted


def sub_packet(pid: str, **fields):
    fields.setdefault("allowed_paths", ["src/calc/**"])
    return packet_md(pid, "subtract", "calc.ops.sub subtracts.", **fields), {
        f"tests/test_sub_{pid.lower()}.py": SUB_TEST}


def neg_packet(pid: str, **fields):
    fields.setdefault("allowed_paths", ["src/calc/**"])
    return packet_md(pid, "negate", "calc.ops.neg negates.", **fields), {
        f"tests/test_neg_{pid.lower()}.py": NEG_TEST}


def honest_sub(ctx) -> str:
    write(ctx, "src/calc/sub.py", "def sub(a, b):\n    return a - b\n")
    return "done"


def honest_neg(ctx) -> str:
    write(ctx, "src/calc/neg.py", "def neg(a):\n    return -a\n")
    return "done"


def wrong_sub(ctx) -> str:
    write(ctx, "src/calc/sub.py", "def sub(a, b):\n    return a + b\n")
    return "done"


def atdd_writes(text: str = ATDD_TESTS, path: str = ATDD_FILE):
    def atdd(ctx) -> str:
        write(ctx, path, text)
        return "wrote the tests"
    return atdd


def staged(atdd, implement=honest_mul):
    """One behaviour for the atdd and implement stages."""
    return lambda ctx: (atdd if ctx.stage == "atdd" else implement)(ctx)


def project(tmp_path: Path, packets, files=None, config: str = FAST) -> Path:
    return make_project(tmp_path / "repo", packets, files, config)


def doc(ctx, **over) -> dict:
    """A valid review document for ``ctx``'s packet: every invariant held at MUL_LINES."""
    d = {"verdicts": [{"invariant": inv.id, "verdict": "held", "evidence": MUL_LINES,
                       "reason": "mul returns a * b"} for inv in ctx.packet.invariants],
         "findings": [], "decision": "accept", "revise_stage": None}
    d.update(over)
    return d


def put(ctx, document) -> str:
    """Write a review document (a dict, or raw text) where the harness reads it."""
    text = document if isinstance(document, str) else json.dumps(document)
    ctx.review_file.write_text(text)
    return "review written"


def verdicts(ctx, **by_id) -> list[dict]:
    """Verdicts for every invariant, held unless ``by_id`` says otherwise."""
    return [{"invariant": inv.id, "verdict": by_id.get(inv.id.replace("-", "_"), "held"),
             "evidence": MUL_LINES, "reason": "read the code"} for inv in ctx.packet.invariants]


def attempt(runner, pid: str, n: int = 1) -> dict:
    return runner.store.attempts(pid)[n - 1]


def gate_rows(runner, pid: str, n: int = 1) -> list[dict]:
    return runner.store.gate_results(attempt(runner, pid, n)["id"])


def last_gate(runner, pid: str, n: int = 1) -> dict:
    return gate_rows(runner, pid, n)[-1]


def stages_run(runner, pid: str, n: int = 1) -> list[str]:
    return [s["stage"] for s in runner.store.stage_runs(attempt(runner, pid, n)["id"])]


def reviews(runner, pid: str, n: int = 1) -> list[dict]:
    return runner.store.reviews(attempt(runner, pid, n)["id"])


def prompt(runner, pid: str, n: int, stage: str) -> str:
    return (Path(attempt(runner, pid, n)["evidence_dir"]) / f"{stage}.prompt.md").read_text()


def rev(root: Path, name: str) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", name], cwd=root,
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def files_in(tree: Path) -> list[str]:
    """Every file under ``tree`` (a worktree), repo-relative, without git's own."""
    return sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")
                  if p.is_file() and p.name != ".git" and "__pycache__" not in p.parts)


# -- 1. each validation rule of the contract, through a real run -------------------------

def honest_mul_dropping_legacy(ctx) -> str:
    """The honest change, which also deletes src/calc/legacy.py (it exists on the base, not in
    the post-change tree)."""
    (ctx.worktree / "src/calc/legacy.py").unlink()
    return honest_mul(ctx)


def _malformed(ctx):
    return '{"verdicts": ['


def _missing(ctx):
    d = doc(ctx)
    d["verdicts"] = d["verdicts"][:1]
    return d


def _unknown(ctx):
    d = doc(ctx)
    d["verdicts"].append({**d["verdicts"][0], "invariant": "MUL-9"})
    return d


def _duplicate(ctx):
    d = doc(ctx)
    d["verdicts"].append(dict(d["verdicts"][0]))
    return d


def _file_not_in_post_change_tree(ctx):
    d = doc(ctx)
    d["verdicts"][0]["evidence"] = "src/calc/legacy.py:1"   # exists on the base only
    return d


def _line_beyond_the_end(ctx):
    d = doc(ctx)
    d["verdicts"][0]["evidence"] = f"src/calc/ops.py:9-{OPS_LINES + 1}"
    return d


INVALID = {
    "malformed-json": (_malformed, ["review is not valid JSON: Expecting value at line 1 "
                                    "column 15"]),
    "missing-id": (_missing, ["no verdict for invariant 'MUL-2'"]),
    "unknown-id": (_unknown, ["verdict for unknown invariant 'MUL-9' (the packet's "
                              "invariants: MUL-1, MUL-2)"]),
    "duplicate-id": (_duplicate, ["invariant 'MUL-1' has 2 verdicts; give exactly one"]),
    "file-not-in-post-change-tree": (_file_not_in_post_change_tree, [
        "verdict MUL-1: src/calc/legacy.py does not exist in the post-change tree"]),
    "line-beyond-the-end": (_line_beyond_the_end, [
        f"verdict MUL-1: src/calc/ops.py:9-{OPS_LINES + 1} is outside src/calc/ops.py, "
        f"which has {OPS_LINES} lines"]),
}


@pytest.mark.parametrize("case", INVALID)
def test_an_invalid_review_is_asked_again_and_fails_the_attempt_as_verifier(tmp_path, case):
    """Attempt 1: the reviewer returns the same broken document twice → each stored with
    ``valid == 0`` and the exact error (naming the id or path:line); ask 2's prompt carries
    that error; after ``review_max_asks`` (2) the attempt fails with layer ``verifier``.
    Attempt 2: broken at ask 1, valid at ask 2 → the attempt proceeds and merges. (The valid
    document cites src/calc/ops.py:9-10, lines that exist only after the change.)"""
    bad, expected = INVALID[case]
    asked: list[tuple[int, str]] = []

    def reviewer(ctx):
        asked.append((ctx.attempt, ctx.prompt))
        ask = sum(1 for n, _ in asked if n == ctx.attempt)
        return put(ctx, doc(ctx) if (ctx.attempt, ask) == (2, 2) else bad(ctx))

    root = project(tmp_path, {"P1": inv_packet("P1", plant=False)},
                   files={"src/calc/legacy.py": "OLD = 1\n"})
    runner = runner_for(root, honest_mul_dropping_legacy, reviewer=reviewer)
    report = runner.run()

    assert report.exit_status == EXIT_OK and report.merged == ["P1"], report.message
    a1, a2 = runner.store.attempts("P1")
    r1 = reviews(runner, "P1", 1)
    assert [(r["stage"], r["ask"], r["valid"], r["errors"]) for r in r1] == [
        ("review", 1, 0, expected), ("review", 2, 0, expected)]
    assert all(r["document"] is None and r["effective_decision"] is None for r in r1)
    g = last_gate(runner, "P1", 1)
    assert (g["gate"], g["status"], g["failure_layer"]) == ("review", "fail", "verifier")
    assert g["summary"].startswith("no valid review after 2 asks: ")
    assert [(f["kind"], f["message"]) for f in g["evidence"]["findings"]] == [
        ("invalid-review", e) for e in expected]
    assert (a1["state"], a1["failure_layer"]) == ("failed", "verifier")
    first, second = [p for n, p in asked if n == 1]
    assert "previous document was rejected" not in first
    assert all(f"- {e}\n" in second for e in expected)

    r2 = reviews(runner, "P1", 2)
    assert [(r["ask"], r["valid"], r["errors"]) for r in r2] == [(1, 0, expected), (2, 1, [])]
    assert r2[1]["decision"] == r2[1]["effective_decision"] == "accept"
    assert r2[1]["document"]["verdicts"][0]["evidence"] == MUL_LINES
    assert a2["state"] == "merged" and rev(root, INTEGRATION) == a2["merge_sha"]
    assert len(asked) == 4


def broken_first_review():
    """(the attempts the implementing agent ran in, an honest agent that records them, a
    reviewer whose first review misses an invariant and whose later ones are valid)."""
    implemented: list[int] = []

    def agent(ctx):
        implemented.append(ctx.attempt)
        return honest_mul(ctx)

    def reviewer(ctx):
        return put(ctx, _missing(ctx) if ctx.attempt == 1 else doc(ctx))
    return implemented, agent, reviewer


def test_after_a_broken_review_only_the_review_runs_again_on_the_same_candidate(tmp_path):
    """A ``verifier`` failure is the reviewer's fault, not the agent's: the next attempt does
    not run the implementing agent again. It reuses the candidate commit (red carried over
    from the attempt that ran it, every gate after implement run again on it) and asks the
    reviewer again; a valid accept merges exactly that candidate."""
    implemented, agent, reviewer = broken_first_review()

    root = project(tmp_path, {"P1": inv_packet("P1")})
    runner = runner_for(root, agent, reviewer=reviewer)
    report = runner.run()

    assert report.merged == ["P1"], report.message
    assert implemented == [1]
    a1, a2 = runner.store.attempts("P1")
    assert (a1["failure_layer"], a1["route_stage"]) == ("verifier", "review")
    assert a2["start_stage"] == "review" and a2["candidate_sha"] == a1["candidate_sha"]
    assert [r["stage"] for r in runner.store.stage_runs(a2["id"])] == ["review"]
    g2 = {g["gate"]: g for g in runner.store.gate_results(a2["id"])}
    assert g2["red"]["status"] == "pass"
    assert g2["red"]["summary"].startswith("carried over from attempt 1")
    red1 = next(g for g in runner.store.gate_results(a1["id"]) if g["gate"] == "red")
    assert g2["red"]["evidence"]["red_ids"] == red1["evidence"]["red_ids"]
    assert {"scope", "suite", "hermetic"} <= set(g2)
    merged_tree = git(root, "rev-parse", "andon/integration^{tree}").strip()
    assert merged_tree == git(root, "rev-parse", a1["candidate_sha"] + "^{tree}").strip()


class _Stop(Exception):
    """Raised from the run's output once attempt 1 has failed: the run ends there."""


def test_a_carried_base_that_no_longer_passes_its_suite_is_left_for_the_head(tmp_path):
    """A retry carries its first attempt's base (here: a broken review, so the candidate too).
    When that base no longer passes its own suite in a later run (the branch moved on, the
    environment changed under a wrapper test command, so nothing of it is known), asking what
    passes there stopped the run, and the next run the same way: the retry now starts afresh
    from the integration head, and says so."""
    implemented, agent, reviewer = broken_first_review()

    marker = tmp_path / "environment-changed"
    guard = (f"import os\n\n\ndef test_env():\n    assert not os.path.exists({str(marker)!r})"
             " or os.path.exists('src/calc/moved.py')\n")
    root = project(tmp_path, {"P1": inv_packet("P1")}, files={"tests/test_env.py": guard},
                   config=wrapper_config(tmp_path))

    def stop_after_attempt_1(line: str) -> None:
        if line.startswith("P1: needs work"):
            raise _Stop
    with pytest.raises(_Stop):
        runner_for(root, agent, reviewer=reviewer, echo=stop_after_attempt_1).run()
    old_base = runner_for(root, agent).store.attempts("P1")[0]["base_sha"]
    # the branch moves on (a person's commit on it), then the environment changes: the old
    # base fails its suite now, the head passes it
    side = tmp_path / "side"
    git(root, "worktree", "add", "-q", str(side), "andon/integration")
    (side / "src" / "calc" / "moved.py").write_text("")
    git(side, "add", "-A")
    git(side, "commit", "-qm", "the branch moves on")
    git(root, "worktree", "remove", "--force", str(side))
    marker.write_text("")
    head = git(root, "rev-parse", "andon/integration").strip()
    said: list[str] = []
    runner = runner_for(root, agent, reviewer=reviewer, echo=said.append)
    report = runner.run()
    assert report.merged == ["P1"], (report.message, said)
    a2 = runner.store.attempts("P1")[1]
    assert a2["base_sha"] == head != old_base and a2["start_stage"] is None
    assert implemented == [1, 2]  # afresh: the agent works again, on the head
    assert any(f"{old_base[:10]}, the base of the attempt this one carries on from, no longer "
               "passes its own suite: attempt 2 starts afresh" in s for s in said), said
    assert f"preflight: running the full suite on {old_base[:10]}, an attempt's base the " \
           "branch has moved past" in said, said


def test_a_packet_edited_between_runs_is_not_carried_over(tmp_path):
    """Attempt 1's reviewer breaks; attempt 2 (review only) is interrupted (the person stops
    the run) and the person edits the packet's planted test before running again. The
    carried candidate was checked against the old packet, so attempt 3 starts afresh: the
    agent implements again against the new planted test."""
    implemented: list[int] = []

    def agent(ctx):
        implemented.append(ctx.attempt)
        return honest_mul(ctx)

    def reviewer(ctx):
        if ctx.attempt == 2:
            raise KeyboardInterrupt  # the person presses Ctrl-C mid-review
        return put(ctx, _missing(ctx) if ctx.attempt == 1 else doc(ctx))

    root = project(tmp_path, {"P1": inv_packet("P1")})
    with pytest.raises(KeyboardInterrupt):
        runner_for(root, agent, reviewer=reviewer).run()
    planted = next((root / "packets/P1/plant").rglob("test_*.py"))
    planted.write_text(planted.read_text() + "\n\ndef test_mul_negative():\n"
                       "    assert mul(-2, 3) == -6\n")
    runner = runner_for(root, agent, reviewer=reviewer)
    report = runner.run()

    assert report.merged == ["P1"], report.message
    a1, a2, a3 = runner.store.attempts("P1")
    assert a2["state"] == "interrupted" and a2["start_stage"] == "review"
    assert a3["start_stage"] is None and a3["candidate_sha"] != a1["candidate_sha"]
    assert implemented == [1, 3]
    assert "test_mul_negative" in git(root, "show", "andon/integration:" + str(
        planted.relative_to(root / "packets/P1/plant")))


def test_silence_is_not_a_pass(tmp_path):
    """A reviewer that writes no file and says nothing is invalid at every ask (stored with
    an empty raw text), and the attempt fails with layer ``verifier`` — it is not merged.
    The next attempt's reviewer gives its document only in its reply (a ```json block), which
    the harness reads: accepted, merged."""
    def reviewer(ctx):
        if ctx.attempt == 1:
            return None
        return "I looked at it.\n```json\n" + json.dumps(doc(ctx)) + "\n```\n"

    root = project(tmp_path, {"P1": inv_packet("P1", plant=False)})
    runner = runner_for(root, honest_mul, reviewer=reviewer)
    report = runner.run()

    r1 = reviews(runner, "P1", 1)
    assert [(r["ask"], r["valid"], r["raw"]) for r in r1] == [(1, 0, ""), (2, 0, "")]
    assert r1[0]["errors"] == ["the reviewer returned no document: nothing in "
                               "$ANDON_REVIEW_FILE and no JSON at the end of its reply"]
    a1 = attempt(runner, "P1", 1)
    assert (a1["state"], a1["failure_layer"], a1["merge_sha"]) == ("failed", "verifier", None)
    assert (last_gate(runner, "P1", 1)["gate"], last_gate(runner, "P1", 1)["status"]) == (
        "review", "fail")
    assert [(r["ask"], r["valid"], r["effective_decision"])
            for r in reviews(runner, "P1", 2)] == [(1, 1, "accept")]
    assert report.merged == ["P1"] and attempt(runner, "P1", 2)["state"] == "merged"


def test_a_reviewer_that_is_always_invalid_blocks_on_the_repeated_fingerprint(tmp_path):
    """With ``review_max_asks = 3`` the reviewer is asked three times per attempt; the same
    invalid document in two attempts is the same failure → blocked ("same failure as attempt
    1"), nothing merged."""
    config = config_with({"review_max_asks": "3"})
    root = project(tmp_path, {"P1": inv_packet("P1", plant=False)}, config=config)
    runner = runner_for(root, honest_mul, reviewer=lambda ctx: put(ctx, _missing(ctx)))
    report = runner.run()

    assert report.exit_status == EXIT_HALTED and report.halted_by == "P1"
    for n in (1, 2):
        assert [(r["ask"], r["valid"]) for r in reviews(runner, "P1", n)] == [
            (1, 0), (2, 0), (3, 0)]
        assert attempt(runner, "P1", n)["failure_layer"] == "verifier"
    assert attempt(runner, "P1", 2)["reason"].startswith("same failure as attempt 1")
    assert runner.store.packet("P1")["state"] == "blocked"
    assert rev(root, INTEGRATION) == rev(root, "main")


# -- 2. each downgrade rule ---------------------------------------------------------------

BLOCKER = {"severity": "blocker", "location": "src/calc/ops.py:10",
           "message": "mul(2**64, 2) overflows the ledger column"}
DOWNGRADES = {
    "critical-violated": (lambda ctx: doc(ctx, verdicts=verdicts(ctx, MUL_1="violated")),
                          [f"critical invariant MUL-1 is violated ({MUL_LINES})"]),
    "critical-unverifiable": (lambda ctx: doc(ctx, verdicts=verdicts(ctx, MUL_1="unverifiable")),
                              [f"critical invariant MUL-1 is unverifiable ({MUL_LINES})"]),
    "blocker-finding": (lambda ctx: doc(ctx, findings=[BLOCKER]),
                        [f"blocker finding at src/calc/ops.py:10: {BLOCKER['message']}"]),
}


@pytest.mark.parametrize("case", DOWNGRADES)
def test_accept_is_downgraded_to_revise(tmp_path, case):
    """The reviewer says ``accept`` but its own document holds a reason not to: the stored
    review keeps ``decision == "accept"``, has ``effective_decision == "revise"`` and the
    reason as data in ``downgraded_because``; the review gate fails (layer code, back to
    implement), nothing is merged, and ``andon show`` prints the downgrade."""
    make, because = DOWNGRADES[case]
    root = project(tmp_path, {"P1": inv_packet("P1", plant=False, max_attempts=1)})
    runner = runner_for(root, honest_mul, reviewer=lambda ctx: put(ctx, make(ctx)))
    report = runner.run()

    assert report.exit_status == EXIT_HALTED and report.merged == []
    (r,) = reviews(runner, "P1")
    assert (r["valid"], r["errors"], r["decision"], r["effective_decision"],
            r["revise_stage"]) == (1, [], "accept", "revise", "implement")
    assert r["downgraded_because"] == because
    g = last_gate(runner, "P1")
    assert (g["gate"], g["status"], g["failure_layer"]) == ("review", "fail", "code")
    assert g["summary"] == "revise → implement: " + "; ".join(because)
    assert g["evidence"]["downgraded_because"] == because
    a = attempt(runner, "P1")
    assert (a["state"], a["route_stage"], a["merge_sha"]) == ("failed", "implement", None)
    assert rev(root, INTEGRATION) == rev(root, "main")

    shown = andon(root, "show", "P1")
    assert shown.returncode == 0, shown.stderr
    assert "  review (ask 1): accept → revise (back to implement)" in shown.stdout
    assert "review review" not in shown.stdout  # the stage's name once (a newcomer pass)
    assert f"downgraded: {because[0]}" in shown.stdout


def test_every_downgrade_reason_is_kept_and_non_critical_problems_do_not_downgrade(tmp_path):
    """P1's reviewer accepts with a violated critical invariant, an unverifiable one and a
    blocker: all three reasons are stored, in that order. P2's reviewer accepts with only a
    non-critical invariant violated and a ``major`` finding: no downgrade, merged."""
    # P0 sorts first, so it runs before P1 blocks and halts the line.
    sub_md = with_invariants(sub_packet("P0", tests="none", gate="auto")[0],
                                                  [("SUB-1", True, "sub(a, b) == a - b"),
                                                   ("SUB-2", False, "sub is pure"),
                                                   ("SUB-3", True, "ints stay ints")])
    mul_md = with_invariants(mul_packet("P1", max_attempts=1, tests="none", gate="auto")[0], [
        ("MUL-1", True, "mul(a, b) == a * b"), ("MUL-2", True, "mul is pure")])

    def reviewer(ctx):
        if ctx.packet.id == "P0":
            return put(ctx, doc(ctx, verdicts=[
                {"invariant": "SUB-1", "verdict": "held", "evidence": "src/calc/sub.py:1",
                 "reason": "r"},
                {"invariant": "SUB-2", "verdict": "violated", "evidence": "src/calc/sub.py:2",
                 "reason": "r"},
                {"invariant": "SUB-3", "verdict": "held", "evidence": "src/calc/sub.py:1-2",
                 "reason": "r"}],
                findings=[{**BLOCKER, "severity": "major", "location": "src/calc/sub.py:2"}]))
        return put(ctx, doc(ctx, verdicts=[
            {"invariant": "MUL-1", "verdict": "violated", "evidence": "src/calc/ops.py:9",
             "reason": "r"},
            {"invariant": "MUL-2", "verdict": "unverifiable", "evidence": "src/calc/ops.py:10",
             "reason": "r"}], findings=[BLOCKER]))

    root = project(tmp_path, {"P0": (sub_md, {}), "P1": (mul_md, {})})
    runner = runner_for(root, {"P0": honest_sub, "P1": honest_mul}, reviewer=reviewer)
    report = runner.run()

    assert report.merged == ["P0"] and report.halted_by == "P1"
    (ok,) = reviews(runner, "P0")
    assert (ok["decision"], ok["effective_decision"], ok["downgraded_because"]) == (
        "accept", "accept", [])
    (r,) = reviews(runner, "P1")
    assert r["downgraded_because"] == [
        "critical invariant MUL-1 is violated (src/calc/ops.py:9)",
        "critical invariant MUL-2 is unverifiable (src/calc/ops.py:10)",
        f"blocker finding at src/calc/ops.py:10: {BLOCKER['message']}"]
    assert r["effective_decision"] == "revise"


def test_a_red_gate_never_reaches_review_and_would_downgrade_it(tmp_path):
    """A red gate cannot reach review: the attempt stops at the first failing gate (here the
    suite, with a wrong mul), so no reviewer runs and no review is stored. The rule is still
    in the contract: ``decide`` with red gates turns an accept into a revise, naming them."""
    root = project(tmp_path, {"P1": inv_packet("P1", max_attempts=1)})
    reviewed = []

    def wrong_mul(ctx):
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return a + b\n", append=True)

    runner = runner_for(root, wrong_mul, reviewer=lambda ctx: reviewed.append(ctx))
    runner.run()

    assert last_gate(runner, "P1")["gate"] == "suite"
    assert stages_run(runner, "P1") == ["implement"] and reviewed == []
    assert reviews(runner, "P1") == []

    (packet,) = load_packets(root / "packets", root)
    text = json.dumps({"verdicts": [
        {"invariant": i, "verdict": "held", "evidence": "src/calc/ops.py:1", "reason": "r"}
        for i in ("MUL-1", "MUL-2")], "decision": "accept"})
    document = validate(text, packet, lambda path: 6 if path == "src/calc/ops.py" else None)
    out = decide(document, packet, red_gates=["suite", "hermetic"])
    assert (out.decision, out.downgraded_because) == (
        "revise", ["gate suite is red", "gate hermetic is red"])
    assert decide(document, packet).decision == "accept"


# -- 3. routing a revise back to the named stage ------------------------------------------

STAGED = ["atdd", "implement", "review"]


def test_a_revise_to_implement_reuses_the_atdd_commit_and_the_fingerprint_still_blocks(
        tmp_path):
    """The reviewer sends the work back to ``implement`` with a finding, twice, identically.
    Attempt 2 starts at implement (``start_stage``), on the same base, plant and atdd commits
    (its candidate's parent is attempt 1's atdd commit), runs no atdd agent, re-checks the
    atdd tests red, and its implement prompt carries the finding. The same revise twice is
    the same fingerprint → blocked."""
    finding = {"severity": "major", "location": "src/calc/ops.py:10",
               "message": "mul(True, 2) is accepted; booleans must be rejected"}
    atdd_runs = []
    root = project(tmp_path, {"P1": inv_packet("P1", plant=False, stages=STAGED)})
    runner = runner_for(
        root, staged(lambda ctx: atdd_runs.append(ctx.attempt) or atdd_writes()(ctx)),
        reviewer=lambda ctx: put(ctx, doc(ctx, decision="revise", revise_stage="implement",
                                          findings=[finding], summary="reject booleans")))
    report = runner.run()

    a1, a2 = runner.store.attempts("P1")
    assert stages_run(runner, "P1", 1) == STAGED
    assert (a1["route_stage"], a1["failure_layer"]) == ("implement", "code")
    assert (a2["start_stage"], a2["atdd_sha"], a2["plant_sha"], a2["base_sha"]) == (
        "implement", a1["atdd_sha"], a1["plant_sha"], a1["base_sha"])
    assert a1["atdd_sha"] and git(root, "rev-parse", f"{a2['candidate_sha']}^").strip() == \
        a1["atdd_sha"]
    assert stages_run(runner, "P1", 2) == ["implement", "review"]
    assert atdd_runs == [1]
    red2 = gate_rows(runner, "P1", 2)[0]
    assert red2["gate"] == "red" and red2["status"] == "pass"
    assert "tests.test_mul_atdd::test_mul_zero" in red2["evidence"]["red_ids"]
    p2 = prompt(runner, "P1", 2, "implement")
    assert finding["message"] in p2 and "revise → implement" in p2
    assert finding["message"] not in prompt(runner, "P1", 1, "implement")

    assert a1["fingerprint"] == a2["fingerprint"]
    assert a2["reason"].startswith("same failure as attempt 1")
    assert report.halted_by == "P1" and runner.store.packet("P1")["state"] == "blocked"


def test_a_revise_to_atdd_runs_the_atdd_stage_again_with_the_findings(tmp_path):
    """The reviewer finds the tests weak and names ``atdd``: attempt 1 fails with layer
    ``test``; attempt 2 starts at atdd, runs the atdd agent again (its prompt carries the
    finding), makes a new atdd commit, then implement and review; accepted and merged with
    the new test."""
    weak = {"severity": "major", "location": f"{ATDD_FILE}:4",
            "message": "no test with a negative factor"}
    negative = ('\n\ndef test_mul_negative():\n    """MUL-1: a negative factor."""\n'
                "    from calc.ops import mul\n    assert mul(-2, 3) == -6\n")
    atdd_prompts = []

    def atdd(ctx):
        atdd_prompts.append(ctx.prompt)
        return atdd_writes(ATDD_TESTS + (negative if ctx.attempt == 2 else ""))(ctx)

    def reviewer(ctx):
        if ctx.attempt == 1:
            return put(ctx, doc(ctx, decision="revise", revise_stage="atdd", findings=[weak]))
        return put(ctx, doc(ctx))

    root = project(tmp_path, {"P1": inv_packet("P1", plant=False, stages=STAGED)})
    runner = runner_for(root, staged(atdd), reviewer=reviewer)
    report = runner.run()

    assert report.merged == ["P1"], report.message
    a1, a2 = runner.store.attempts("P1")
    assert (a1["route_stage"], a1["failure_layer"]) == ("atdd", "test")
    assert last_gate(runner, "P1", 1)["summary"].startswith("revise → atdd")
    assert a2["start_stage"] == "atdd"
    assert stages_run(runner, "P1", 2) == STAGED
    assert len(atdd_prompts) == 2
    assert weak["message"] not in atdd_prompts[0] and weak["message"] in atdd_prompts[1]
    assert a2["atdd_sha"] and a2["atdd_sha"] != a1["atdd_sha"]
    assert "def test_mul_negative" in git(root, "show", f"{a2['merge_sha']}:{ATDD_FILE}")


# -- 4. the atdd stage's tests are checked before any code is written ---------------------

def test_atdd_tests_that_already_pass_are_rejected(tmp_path):
    """The atdd agent writes tests that pass on the current code: the red gate fails with an
    ``already-passes`` finding per test (path = the atdd file), implement never runs. The atdd
    agent erred, not the packet: layer ``test``, back to atdd with the finding; the same
    tests again are the same failure, so attempt 2 blocks."""
    passing = ('def test_add_again():\n    """MUL-1: ordinary."""\n    from calc.ops import add\n'
               '    assert add(1, 1) == 2\n\n\ndef test_add_zero():\n    """MUL-1: boundary."""\n'
               '    from calc.ops import add\n    assert add(0, 0) == 0\n')
    root = project(tmp_path, {"P1": inv_packet("P1", plant=False, stages=STAGED)})
    runner = runner_for(root, staged(atdd_writes(passing)))
    report = runner.run()

    g = last_gate(runner, "P1", 1)
    assert (g["gate"], g["status"], g["failure_layer"]) == ("red", "fail", "test")
    assert sorted((f["kind"], f["test_id"], f["path"]) for f in g["evidence"]["findings"]) == [
        ("already-passes", "tests.test_mul_atdd::test_add_again", ATDD_FILE),
        ("already-passes", "tests.test_mul_atdd::test_add_zero", ATDD_FILE)]
    assert [x["gate"] for x in gate_rows(runner, "P1", 1)] == ["red", "atdd-scope", "red"]
    assert stages_run(runner, "P1", 1) == ["atdd"]
    assert attempt(runner, "P1", 1)["route_stage"] == "atdd"
    assert attempt(runner, "P1", 2)["start_stage"] == "atdd"
    assert "same failure as attempt 1" in attempt(runner, "P1", 2)["reason"]
    assert report.halted_by == "P1" and runner.store.packet("P1")["state"] == "blocked"


@pytest.mark.parametrize("what, kind, path, layer", [
    ("writes code", "not-a-test", "src/calc/ops.py", "permission"),
    ("edits a planted test", "tamper", PLANTED, "permission"),
    ("writes nothing", "no-change", None, "code"),
])
def test_atdd_scope(tmp_path, what, kind, path, layer):
    """The atdd stage writes tests and nothing else: a non-test path is ``not-a-test``, a
    changed planted test is ``tamper``, no change at all is ``no-change``; the ``atdd-scope``
    gate fails, the red gate does not run on the atdd tests and implement never runs."""
    def atdd(ctx):
        write(ctx, ATDD_FILE, ATDD_TESTS)
        if what == "writes code":
            honest_mul(ctx)
        elif what == "edits a planted test":
            write(ctx, PLANTED, "\ndef test_more():\n    assert True\n", append=True)
        else:
            (ctx.worktree / ATDD_FILE).unlink()

    root = project(tmp_path, {"P1": inv_packet("P1", stages=STAGED, max_attempts=1)})
    runner = runner_for(root, staged(atdd))
    runner.run()

    g = last_gate(runner, "P1")
    assert (g["gate"], g["status"], g["failure_layer"]) == ("atdd-scope", "fail", layer)
    assert [(f["kind"], f["path"]) for f in g["evidence"]["findings"]] == [(kind, path)]
    assert [x["gate"] for x in gate_rows(runner, "P1")] == ["red", "atdd-scope"]
    assert stages_run(runner, "P1") == ["atdd"]
    assert runner.store.packet("P1")["state"] == "blocked"


THIN = '''\
{top}

def test_mul_ordinary():
    """MUL-1: an ordinary case."""
    {inner}
    assert mul(3, 4) == 12


def test_mul_commutes():
    """Swapping the factors changes nothing."""
    {inner}
    assert mul(4, 3) == 12
'''


@pytest.mark.parametrize("imports", ["inside-the-tests", "at-module-top"])
def test_atdd_with_one_test_per_invariant_is_thin_coverage(tmp_path, imports):
    """The atdd tests name MUL-1 in one test only (the other test names no invariant): the
    red gate fails with ``thin-coverage`` naming MUL-1 and that test — whether the module
    imports ``mul`` inside each test or at the top (then the module does not even import on
    the base)."""
    top, inner = (("", "from calc.ops import mul") if imports == "inside-the-tests"
                  else ("from calc.ops import mul\n", "pass"))
    root = project(tmp_path, {"P1": inv_packet("P1", plant=False, stages=STAGED)})
    runner = runner_for(root, staged(atdd_writes(THIN.format(top=top, inner=inner))))
    runner.run()

    g = last_gate(runner, "P1")
    assert (g["gate"], g["status"]) == ("red", "fail"), g["summary"]
    thin = [f for f in g["evidence"]["findings"] if f["kind"] == "thin-coverage"]
    assert [(f["test_id"], f["message"]) for f in thin] == [(
        "tests.test_mul_atdd::test_mul_ordinary",
        "invariant MUL-1 is covered by only one test (tests.test_mul_atdd::test_mul_ordinary);"
        " write an ordinary case, a boundary and a rejected input")]
    assert stages_run(runner, "P1") == ["atdd"]


# -- 5. implement may not touch a test ----------------------------------------------------

@pytest.mark.parametrize("path, message", [
    (ATDD_FILE, f"test path {ATDD_FILE} was changed by the implement stage, which writes "
                "code only"),
    (PLANTED, f"planted file {PLANTED} was changed (modified)"),
    ("tests/test_ops.py", "test path tests/test_ops.py was changed by the implement stage, "
                          "which writes code only"),
    ("tests/test_extra.py", "test path tests/test_extra.py was changed by the implement "
                            "stage, which writes code only"),
], ids=["atdd-test", "planted-test", "existing-test", "new-test"])
def test_implement_that_edits_a_test_is_tamper(tmp_path, path, message):
    """After an atdd stage, the implement agent writes the right code but also edits a test
    (the atdd stage's, a planted one, an existing one) or adds one: the scope gate fails with
    one ``tamper`` finding naming the path (layer permission); suite and review never run."""
    def implement(ctx):
        honest_mul(ctx)
        target = ctx.worktree / path
        write(ctx, path, "\n\ndef test_added():\n    assert True\n",
              append=target.exists())

    root = project(tmp_path, {"P1": inv_packet("P1", plant=path == PLANTED, stages=STAGED,
                                               max_attempts=1)})
    runner = runner_for(root, staged(atdd_writes(), implement))
    runner.run()

    g = last_gate(runner, "P1")
    assert (g["gate"], g["status"], g["failure_layer"]) == ("scope", "fail", "permission")
    assert [(f["kind"], f["path"], f["message"]) for f in g["evidence"]["findings"]] == [
        ("tamper", path, message)]
    assert "suite" not in [x["gate"] for x in gate_rows(runner, "P1")]
    assert stages_run(runner, "P1") == ["atdd", "implement"]
    assert runner.store.packet("P1")["state"] == "blocked"


# -- 6. a reviewer changes nothing --------------------------------------------------------

def _sh(ctx, *argv: str) -> str:
    return git(ctx.worktree, *argv)


REVIEWER_TAMPER = {
    # what the reviewer does → the tamper finding's path
    "edits-a-file": (lambda ctx: write(ctx, "src/calc/ops.py", "# reviewed\n", append=True),
                     "src/calc/ops.py"),
    "adds-a-file": (lambda ctx: write(ctx, "REVIEW_NOTES.md", "looks fine\n"),
                    "REVIEW_NOTES.md"),
    "deletes-a-test": (lambda ctx: (ctx.worktree / "tests/test_ops.py").unlink(),
                       "tests/test_ops.py"),
    "commits-an-edit": (lambda ctx: (write(ctx, "src/calc/ops.py", "# reviewed\n", append=True),
                                     _sh(ctx, "commit", "-qam", "reviewer fix")),
                        "src/calc/ops.py"),
}


@pytest.mark.parametrize("case", REVIEWER_TAMPER)
def test_a_reviewer_that_changes_the_worktree_is_tamper(tmp_path, case):
    """The reviewer writes a valid accepting document but also changes its worktree (edit,
    new file, deletion, even an attempt to commit it): the review gate fails with layer
    ``permission`` and one ``tamper`` finding naming the path; its document is not used (no
    review stored); the candidate is unchanged — the attempt branch still points at the
    candidate commit, whose ops.py is exactly the implement stage's."""
    change, path = REVIEWER_TAMPER[case]

    def reviewer(ctx):
        review_document(ctx, evidence=MUL_LINES)
        change(ctx)

    root = project(tmp_path, {"P1": inv_packet("P1", plant=False, max_attempts=1)})
    runner = runner_for(root, honest_mul, reviewer=reviewer)
    report = runner.run()

    g = last_gate(runner, "P1")
    assert (g["gate"], g["status"], g["failure_layer"]) == ("review", "fail", "permission")
    assert [(f["kind"], f["path"], f["message"]) for f in g["evidence"]["findings"]] == [
        ("tamper", path, f"reviewer changed {path}")]
    assert g["summary"] == f"the review reviewer changed files: {path}"
    assert reviews(runner, "P1") == []
    a = attempt(runner, "P1")
    assert rev(root, "refs/heads/andon/P1/1") == a["candidate_sha"]
    assert git(root, "show", f"{a['candidate_sha']}:src/calc/ops.py") == \
        git(root, "show", "main:src/calc/ops.py") + MUL_CODE
    assert git(root, "diff", "--name-only", a["plant_sha"], a["candidate_sha"]).split() == [
        "src/calc/ops.py"]
    assert report.merged == [] and rev(root, INTEGRATION) == rev(root, "main")


def test_a_reviewer_that_runs_the_code_is_not_tamper_for_its_bytecode_caches(tmp_path):
    """A reviewer that imports the code it reviews (in a subprocess, as the demo's does)
    leaves ``__pycache__/*.pyc`` in its export wherever ``PYTHONDONTWRITEBYTECODE`` is not
    set: caches of the bytes it was given, not a change; the review counts and the packet is
    merged. A cache beside a real edit still fails the review, naming only the edit."""
    import sys

    def run_code(ctx):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([sys.executable, "-c", "import calc.ops"], cwd=ctx.worktree / "src",
                       env=env, check=True)
        assert list((ctx.worktree / "src/calc/__pycache__").glob("ops.*.pyc"))

    def reviewer(ctx):
        run_code(ctx)
        review_document(ctx, evidence=MUL_LINES)

    root = project(tmp_path / "a", {"P1": inv_packet("P1", plant=False, max_attempts=1)})
    report = runner_for(root, honest_mul, reviewer=reviewer).run()
    assert report.merged == ["P1"]

    def editing_reviewer(ctx):
        reviewer(ctx)
        write(ctx, "src/calc/ops.py", "# reviewed\n", append=True)

    root = project(tmp_path / "b", {"P1": inv_packet("P1", plant=False, max_attempts=1)})
    runner = runner_for(root, honest_mul, reviewer=editing_reviewer)
    runner.run()
    g = last_gate(runner, "P1")
    assert (g["gate"], g["status"]) == ("review", "fail")
    assert [f["path"] for f in g["evidence"]["findings"]] == ["src/calc/ops.py"]


def test_a_reviewer_that_moves_a_branch_is_tamper_and_the_branch_is_put_back(tmp_path):
    """The reviewer's directory has no .git, but the repository is still reachable by its
    path: a reviewer that points the integration branch and the attempt branch elsewhere
    (``git -C <repo> update-ref``) is a tamper finding, and both refs are put back, as for
    the implement stage."""
    root = project(tmp_path, {"P1": inv_packet("P1", plant=False, max_attempts=1)})

    def reviewer(ctx):
        review_document(ctx, evidence=MUL_LINES)
        git(root, "update-ref", "refs/heads/andon/integration", "refs/heads/andon/P1/1")
        git(root, "update-ref", "refs/heads/andon/P1/1", "main")

    runner = runner_for(root, honest_mul, reviewer=reviewer)
    report = runner.run()

    a = attempt(runner, "P1")
    g = last_gate(runner, "P1")
    assert (g["gate"], g["status"], g["failure_layer"]) == ("scope", "fail", "permission")
    assert g["summary"].startswith("the review agent moved git refs")
    assert sorted((f["kind"], f["path"]) for f in g["evidence"]["findings"]) == [
        ("tamper", "refs/heads/andon/P1/1"), ("tamper", "refs/heads/andon/integration")]
    assert rev(root, "refs/heads/andon/P1/1") == a["candidate_sha"]
    assert report.merged == [] and rev(root, INTEGRATION) == rev(root, "main")


# -- 7./11. a critical tier: atdd, implement, review-tests, review-correctness --------------

CRITICAL = ["atdd", "implement", "review-tests", "review-correctness"]
# The atdd tests live beside the code: "src/calc/mul_test.py" sorts before "src/calc/ops.py",
# so git's own order would put them first in a diff.
SIDE_TESTS = "src/calc/mul_test.py"
FIXTURE = "fixtures/mul_cases.csv"


@pytest.fixture(scope="module")
def critical_run(tmp_path_factory):
    """One run of a ``tier = "critical"`` packet (planted test + a planted fixture outside
    tests/; atdd writes src/calc/mul_test.py). Each reviewer records the files of its
    worktree, what git would show it of the tests, and its prompt."""
    tmp = tmp_path_factory.mktemp("critical")
    config = config_with(tiers={"critical": json.dumps(CRITICAL)})
    md, plant = inv_packet("P1", tier="critical")
    root = project(tmp, {"P1": (md, {**plant, FIXTURE: "3,4,12\n"})}, config=config)
    seen: dict[str, dict] = {}

    def reviewer(ctx):
        shown = subprocess.run(["git", "show", f"HEAD:{SIDE_TESTS}"], cwd=ctx.worktree,
                               capture_output=True, text=True)
        seen[ctx.stage] = {"files": files_in(ctx.worktree), "prompt": ctx.prompt,
                           "git_shows_tests": shown.returncode == 0}
        return review_document(ctx, evidence=MUL_LINES)

    runner = runner_for(root, staged(atdd_writes(path=SIDE_TESTS)), reviewer=reviewer)
    report = runner.run()
    return root, runner, report, seen


def test_a_tier_runs_its_stages_in_order(critical_run):
    """``[stages.tiers] critical = [atdd, implement, review-tests, review-correctness]`` and a
    packet with ``tier = "critical"``: exactly those stages run, in that order, each gated,
    and the packet merges with the atdd tests."""
    root, runner, report, seen = critical_run
    assert report.merged == ["P1"], report.message
    assert stages_run(runner, "P1") == CRITICAL
    assert [(g["gate"], g["status"]) for g in gate_rows(runner, "P1")] == [
        ("red", "pass"), ("atdd-scope", "pass"), ("red", "pass"), ("scope", "pass"),
        ("patterns", "pass"), ("suite", "pass"), ("hermetic", "pass"),
        ("static", "skipped"), ("flaky", "skipped"), ("mutation", "skipped"),
        ("review-tests", "pass"),
        ("review-correctness", "pass")]
    assert [(r["stage"], r["effective_decision"]) for r in reviews(runner, "P1")] == [
        ("review-tests", "accept"), ("review-correctness", "accept")]
    assert sorted(seen) == ["review-correctness", "review-tests"]
    assert "def test_mul_zero" in git(root, "show", f"{INTEGRATION}:{SIDE_TESTS}")


def test_review_correctness_never_sees_the_tests(critical_run):
    """The review-correctness worktree holds the code and the packet but no test file
    (tests/, the atdd stage's src/calc/mul_test.py) and no planted file — neither where it was
    planted nor its source in the packets folder; its prompt's diff has the code change and
    no test file. (review-tests, for contrast, has them all.)"""
    *_, seen = critical_run
    assert seen["review-correctness"]["files"] == [
        ".gitignore", "andon.toml", "packets/P1/packet.md", "src/calc/__init__.py",
        "src/calc/ops.py"]
    assert {PLANTED, FIXTURE, SIDE_TESTS, "tests/test_ops.py"} <= set(
        seen["review-tests"]["files"])
    p = seen["review-correctness"]["prompt"]
    assert "diff --git a/src/calc/ops.py b/src/calc/ops.py" in p and "+def mul(a, b):" in p
    assert "mul_test" not in p and "test_mul" not in p and "tests/" not in p
    assert "You do not get the tests" in p


def test_review_correctness_cannot_read_the_tests_through_git(critical_run):
    """Removing the test files is not enough while git history holds them: a reviewer agent
    that runs ``git show HEAD:src/calc/mul_test.py`` in its directory must not get it (the
    review directory is a plain export, with no .git)."""
    assert critical_run[3]["review-correctness"]["git_shows_tests"] is False


def test_review_tests_reads_the_code_first_and_the_tests_last(critical_run):
    """The review-tests prompt's diff has the code change before the atdd tests, although
    git's own order (by path) would put src/calc/mul_test.py first; the JSON Schema of the
    review document is in every reviewer's prompt."""
    p = critical_run[3]["review-tests"]["prompt"]
    code = p.index("diff --git a/src/calc/ops.py b/src/calc/ops.py")
    tests = p.index(f"diff --git a/{SIDE_TESTS} b/{SIDE_TESTS}")
    assert code < tests
    assert sorted(["src/calc/ops.py", SIDE_TESTS])[0] == SIDE_TESTS
    for stage in ("review-tests", "review-correctness"):
        assert json.dumps(SCHEMA, indent=2) in critical_run[3][stage]["prompt"]


def test_an_undefined_tier_is_a_clear_error(tmp_path):
    """A packet naming a tier that andon.toml does not define: `andon run` exits 2 naming the
    tier, the config file and the tiers that exist; no agent ran and nothing was claimed."""
    config = config_with(tiers={"critical": json.dumps(CRITICAL)})
    root = project(tmp_path, {"P1": inv_packet("P1", tier="gold")}, config=config)
    cli = andon(root, "run", "--agent", "command", "--command", "touch ran")
    assert cli.returncode == 2, cli.stdout + cli.stderr
    assert ("tier 'gold' is not defined in [stages.tiers] of andon.toml; defined: critical"
            in " ".join(cli.stderr.split()))
    runner = runner_for(root, honest_mul)
    with pytest.raises(ConfigError, match="tier 'gold' is not defined"):
        runner.run()
    assert runner.store.attempts("P1") == []
    assert not [e for e in runner.store.events("P1") if e["kind"] == "claimed"]


# -- 12. the schema is published ----------------------------------------------------------

def test_the_schema_is_published_in_the_docs():
    """docs/review.md's first ```json block is exactly the JSON Schema
    ``andon.review.contract.SCHEMA`` produces (so the docs cannot drift from the validator)."""
    text = (Path(__file__).parents[1] / "docs" / "review.md").read_text(encoding="utf-8")
    block = re.search(r"^```json\n(.*?)^```$", text, flags=re.M | re.S)
    assert block, "docs/review.md has no ```json block"
    assert json.loads(block.group(1)) == SCHEMA


# -- 8. human gates -----------------------------------------------------------------------

MINOR = {"severity": "minor", "location": "src/calc/ops.py:9", "message": "no docstring"}


def test_human_gate_waits_the_queue_goes_on_and_approve_merges(tmp_path):
    """P1 is ``gate = "human"``: after every check and the review passed it stops in
    ``awaiting_human``; P2 (independent, after it in the queue) runs and merges; P3 (requires
    P1) stays ready. ``andon show P1`` has the diff, the gate evidence, the verdicts and the
    findings; ``andon approve P2`` (done, not waiting) and ``andon approve P9`` (unknown)
    exit 2; ``andon approve P1`` exits 0 and lands one squash commit of P1 on the
    integration branch; then P3 runs."""
    root = project(tmp_path, {"P1": inv_packet("P1", gate="human"), "P2": sub_packet("P2"),
                              "P3": neg_packet("P3", requires=["P1"])})
    runner = runner_for(root, {"P1": honest_mul, "P2": honest_sub, "P3": honest_neg},
                        reviewer=lambda ctx: review_document(
                            ctx, evidence=MUL_LINES if ctx.packet.id == "P1" else None,
                            findings=[MINOR] if ctx.packet.id == "P1" else None))
    report = runner.run()

    assert report.exit_status == EXIT_OK and report.merged == ["P2"], report.message
    states = {p["id"]: p["state"] for p in runner.store.packets()}
    assert states == {"P1": "awaiting_human", "P2": "done", "P3": "ready"}
    assert runner.store.attempts("P3") == []
    a1 = attempt(runner, "P1")
    assert a1["state"] == "passed" and a1["merge_sha"] is None
    assert [g["gate"] for g in gate_rows(runner, "P1")] == [
        "red", "scope", "patterns", "suite", "hermetic", "static", "flaky", "mutation",
        "review"]
    p2_head = rev(root, INTEGRATION)
    assert p2_head == attempt(runner, "P2")["merge_sha"]

    shown = andon(root, "show", "P1")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "awaiting_human" in out and "andon approve P1" in out
    assert "diff --git a/src/calc/ops.py b/src/calc/ops.py" in out and "+def mul(a, b):" in out
    assert re.search(r"✓ suite: \d+ tests passed", out) and "✓ hermetic:" in out
    assert "  review (ask 1): accept" in out
    assert f"MUL-1: held at {MUL_LINES} — " in out and f"MUL-2: held at {MUL_LINES}" in out
    assert "minor: src/calc/ops.py:9 — no docstring" in out

    for pid, why in (("P2", "packet P2 is done, not awaiting_human"),
                     ("P9", "no packet 'P9' in the store; known: P1, P2")):
        refused = andon(root, "approve", pid)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert why in refused.stderr
    assert rev(root, INTEGRATION) == p2_head

    approved = andon(root, "approve", "P1")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "P1: done" in approved.stdout
    assert runner.store.packet("P1")["state"] == "done"
    head = rev(root, INTEGRATION)
    assert git(root, "log", "-1", "--format=%P", head).split() == [p2_head]
    assert "Andon-Packet: P1" in git(root, "log", "-1", "--format=%(trailers:only)", head)
    assert sorted(git(root, "diff", "--name-only", p2_head, head).split()) == [
        "src/calc/ops.py", PLANTED]
    assert attempt(runner, "P1")["merge_sha"] == head
    assert [e["kind"] for e in runner.store.events("P1")][-3:] == [
        "gates-passed", "approved", "merged"]
    # `andon show` says a person let it through (it said nothing: a newcomer pass)
    by = runner.store.events("P1", kind="approved")[-1]["data"]["by"]
    assert re.search(rf"approved by {re.escape(by)} at \S+ \(human gate\)",
                     andon(root, "show", "P1").stdout)

    assert runner_for(root, {"P3": honest_neg}).run().merged == ["P3"]
    claims = [e["packet_id"] for e in runner.store.events() if e["kind"] == "claimed"]
    assert claims == ["P1", "P2", "P3"]


def test_human_gate_reject_sends_the_reason_to_the_next_attempt(tmp_path):
    """``andon reject P1 --why "needs a docstring"`` on a packet awaiting a person: exit 0,
    ``needs_work``, attempt 1 failed with the reason; nothing merged. The next attempt's
    prompt contains "needs a docstring"; it stops in ``awaiting_human`` again. Rejecting a
    packet that is not awaiting a person exits 2."""
    root = project(tmp_path, {"P1": inv_packet("P1", gate="human")})

    def agent(ctx):
        honest_mul(ctx)
        if ctx.attempt == 2:
            write(ctx, "src/calc/ops.py", '\n\n"""Arithmetic."""\n', append=True)

    runner = runner_for(root, agent)
    assert runner.run().merged == []
    assert runner.store.packet("P1")["state"] == "awaiting_human"

    rejected = andon(root, "reject", "P1", "--why", "needs a docstring")
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    assert runner.store.packet("P1")["state"] == "needs_work"
    a1 = attempt(runner, "P1")
    assert a1["state"] == "failed" and a1["reason"].endswith(": needs a docstring")
    assert rev(root, INTEGRATION) == rev(root, "main")
    again = andon(root, "reject", "P1", "--why", "twice")
    assert again.returncode == 2 and "not awaiting_human" in again.stderr

    runner.run()
    assert "needs a docstring" not in prompt(runner, "P1", 1, "implement")
    assert "needs a docstring" in prompt(runner, "P1", 2, "implement")
    assert runner.store.packet("P1")["state"] == "awaiting_human"
    assert attempt(runner, "P1", 2)["state"] == "passed"


# -- 9. a dependency chain ----------------------------------------------------------------

def test_a_dependency_chain_runs_in_order_and_waits_for_a_blocked_link(tmp_path):
    """A = P3 ← B = P2 ← C = P1 (ids sort against the chain). Run 1: A is claimed and merged
    first; B fails (needs_work) — C, although it sorts first and is ready, is not claimed —
    B fails the same way again and is blocked; C has still not started. After `andon
    unblock P2` and an honest B, run 2 merges B and then C, each based on the merge of the
    packet it requires."""
    root = project(tmp_path, {"P1": mul_packet("P1", requires=["P2"]),
                              "P2": sub_packet("P2", requires=["P3"], max_attempts=2),
                              "P3": neg_packet("P3")})
    first = runner_for(root, {"P1": honest_mul, "P2": wrong_sub, "P3": honest_neg})
    report = first.run()

    assert report.halted_by == "P2" and report.merged == ["P3"]
    claims = [e["packet_id"] for e in first.store.events() if e["kind"] == "claimed"]
    assert claims == ["P3", "P2", "P2"]
    assert first.store.packet("P2")["state"] == "blocked"
    assert first.store.packet("P1")["state"] == "ready" and first.store.attempts("P1") == []

    unblocked = andon(root, "unblock", "P2")
    assert unblocked.returncode == 0, unblocked.stderr
    second = runner_for(root, {"P1": honest_mul, "P2": honest_sub, "P3": honest_neg})
    assert second.run().merged == ["P2", "P1"]
    claims = [e["packet_id"] for e in second.store.events() if e["kind"] == "claimed"]
    assert claims == ["P3", "P2", "P2", "P2", "P1"]
    assert attempt(second, "P2", 3)["base_sha"] == attempt(second, "P3")["merge_sha"]
    assert attempt(second, "P1")["base_sha"] == attempt(second, "P2", 3)["merge_sha"]
    assert rev(root, INTEGRATION) == attempt(second, "P1")["merge_sha"]


# -- 10. a stale spec pin -----------------------------------------------------------------

def test_a_stale_spec_pin_is_refused_and_reported_by_check(tmp_path):
    """P1 pins docs/spec.md at a commit after which the spec changed: `andon check` reports
    it (packet file, the spec_commit line, exit 2); a run never claims it — it is ``stale``,
    refused with the spec's diff since the pin — while P2 runs. Once the pin names the
    current commit, check is clean and the packet runs."""
    root = project(tmp_path, {}, files={"docs/spec.md": "mul multiplies.\n"})
    old = rev(root, "HEAD")
    (root / "docs/spec.md").write_text("mul multiplies, and saturates at 100.\n")
    git(root, "commit", "-qam", "spec change")
    new = rev(root, "HEAD")

    def add_packet(folder, md, plant):
        for rel, text in {"packet.md": md, **{f"plant/{k}": v for k, v in plant.items()}}.items():
            (root / "packets" / folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "packets" / folder / rel).write_text(text)
    add_packet("P1", *mul_packet("P1", spec_path="docs/spec.md", spec_commit=old))
    add_packet("P2", *sub_packet("P2"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "packets")
    source = root / "packets" / "P1" / "packet.md"
    pin_line = source.read_text().splitlines().index(f'spec_commit = "{old}"') + 1

    check = andon(root, "check")
    assert check.returncode == 2, check.stdout + check.stderr
    assert f"{source}:{pin_line}: " in check.stdout
    assert "stale" in check.stdout and f"docs/spec.md changed since {old[:10]}" in check.stdout
    problems = json.loads(andon(root, "check", "--json").stdout)["problems"]
    assert [(p["path"], p["line"]) for p in problems] == [(str(source), pin_line)]

    calls = []
    runner = runner_for(root, lambda ctx: calls.append(ctx.packet.id) or (
        honest_mul if ctx.packet.id == "P1" else honest_sub)(ctx))
    assert runner.run().merged == ["P2"]
    assert runner.store.packet("P1")["state"] == "stale" and calls == ["P2"]
    assert runner.store.attempts("P1") == []
    (ev,) = [e for e in runner.store.events("P1") if e["to_state"] == "stale"]
    assert ev["data"]["why"].startswith(f"docs/spec.md changed since {old[:10]}:")
    assert "-mul multiplies.\n+mul multiplies, and saturates at 100." in ev["data"]["why"]

    source.write_text(source.read_text().replace(old, new))
    git(root, "commit", "-qam", "re-pin the spec")
    assert andon(root, "check").returncode == 0
    assert runner_for(root, honest_mul).run().merged == ["P1"]


@pytest.mark.parametrize("what", ["fifo", "link-to-dev-zero", "link-to-a-file"])
def test_a_review_file_that_is_not_a_file_is_never_waited_on_nor_followed(tmp_path, what):
    """The reviewer (sandboxed or not: the review file's folder is its to write) leaves in
    the review file's place a FIFO (reading it would wait for ever), a link to /dev/zero
    (read without end) or a link to a file of the user's (whose bytes would land in the
    evidence). That ask is rejected naming what was there; the next ask's honest document
    is read; nothing of the linked file is stored."""
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"decision": "accept", "marker": "SECRET-BYTES"}))

    def reviewer(ctx):
        if ctx.attempt == 1 and not reviews_seen:
            reviews_seen.append(1)
            if what == "fifo":
                os.mkfifo(ctx.review_file)
            else:
                ctx.review_file.symlink_to("/dev/zero" if what == "link-to-dev-zero"
                                           else secret)
            return "review written"
        return put(ctx, doc(ctx))
    reviews_seen: list[int] = []

    root = project(tmp_path, {"P1": inv_packet("P1")})
    runner = runner_for(root, honest_mul, reviewer=reviewer)
    report = runner.run()

    assert report.exit_status == EXIT_OK and report.merged == ["P1"], report.message
    r1 = reviews(runner, "P1", 1)
    kind = "a FIFO" if what == "fifo" else "a link"
    assert [(r["ask"], r["valid"]) for r in r1] == [(1, 0), (2, 1)]
    assert len(r1[0]["errors"]) == 1 and r1[0]["errors"][0].startswith(
        "$ANDON_REVIEW_FILE was not read: ") and f"is {kind}" in r1[0]["errors"][0]
    assert not any("SECRET-BYTES" in p.read_text(errors="replace")
                   for p in (root / ".andon").rglob("*") if p.is_file() and not p.is_symlink()
                   and p.suffix in (".json", ".log", ".txt", ".md"))
