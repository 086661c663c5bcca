"""Issue 19 kind 6: evidence from hidden tests that reaches an agent says only that a hidden
test failed and in which gate. Attempt 1 fails only the hidden test; attempt 2's prompt (as the
agent got it, and the copy kept as evidence) names no hidden id, file, function, input or
expected value, and says "1 hidden test failed in hermetic"; the prompt file the agent was
pointed at lives outside the checkout and the worktree and is gone after the stage;
`andon show` still shows the person the hidden failure in full."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from andon.prompt import PreviousFailure, redacted_failure
from andon.report.evidence import packet_detail, show_packet

from helpers import MUL_TEST, SHIPPED, andon, make_project, packet_md, runner_for

FAST = (SHIPPED.replace("red_runs = 3", "red_runs = 1")
        .replace("hermetic_runs = 3", "hermetic_runs = 1")
        .replace("hermetic_random_order = true", "hermetic_random_order = false"))
PLANTED, OPS, HIDDEN = "tests/test_mul_p1.py", "src/calc/ops.py", "tests/test_mul_hidden.py"
HIDDEN_TEST = '''\
from calc.ops import mul


def test_mul_other_inputs():
    assert mul(7, 6) == 42
    assert mul(-5, 11) == -55
'''

# Right on the planted inputs (3·4, 0·9), wrong on the hidden ones (7·6), without a literal
# of either in the code (patterns must not be the gate that rejects it).
ALMOST = "\n\ndef mul(a, b):\n    return a * b if a < b else a * b + 1\n"
RIGHT = "\n\ndef mul(a, b):\n    return a * b\n"

SECRETS = ("test_mul_hidden", "test_mul_other_inputs", "hidden/", "42", "43", "-55",
           "mul(7", "7, 6", "packets/P1/hidden")


def project(tmp_path: Path) -> Path:
    md = packet_md("P1", "multiply", "calc.ops.mul multiplies two numbers.",
                   allowed_paths=["src/calc/**"], max_attempts=2)
    root = make_project(tmp_path / "repo", {"P1": (md, {PLANTED: MUL_TEST})},
                        {".gitignore": "packets/*/hidden/\n"},
                        FAST)
    h = root / "packets" / "P1" / "hidden" / HIDDEN
    h.parent.mkdir(parents=True)
    h.write_text(HIDDEN_TEST)
    return root


def test_the_retry_prompt_says_only_that_a_hidden_test_failed_and_where(tmp_path):
    root = project(tmp_path)
    seen: dict[int, tuple[str, Path, str, Path]] = {}

    def agent(ctx):
        seen[ctx.attempt] = (ctx.prompt, ctx.prompt_file, ctx.prompt_file.read_text(),
                             ctx.worktree)
        with open(ctx.worktree / OPS, "a") as f:
            f.write(ALMOST if ctx.attempt == 1 else RIGHT)
        return "done"

    runner = runner_for(root, agent)
    report = runner.run()
    assert report.merged == ["P1"]
    a1, a2 = runner.store.attempts("P1")
    first = next(g for g in runner.store.gate_results(a1["id"]) if g["status"] == "fail")
    assert first["gate"] == "hermetic"
    assert any(f["kind"] == "hidden" for f in first["evidence"]["findings"])
    # the person's summary names what ran: planted and hidden tests (it said "the planted
    # tests, alone" above a hidden test's failure)
    assert first["summary"].startswith("the planted and hidden tests, alone, in both profiles: "
                                       "hidden test "), first["summary"]
    # andon show says once what "both profiles" are
    out = Console(record=True, width=200)
    show_packet(out, packet_detail(runner.store, None, "P1"))
    shown = " ".join(out.export_text().split())
    assert shown.count("(the plain profile: a pytest run without") == 1, shown

    prompt, prompt_file, on_disk, worktree = seen[2]
    kept = (Path(a2["evidence_dir"]) / "implement.prompt.md").read_text()
    for text in (prompt, on_disk, kept):
        assert "1 hidden test failed in hermetic" in text
        leaked = [s for s in SECRETS if s in text]
        assert not leaked, f"hidden details in the prompt: {leaked}\n{text}"
    # the file the agent was pointed at: outside the checkout and the worktree, and gone
    for where in (root.resolve(), worktree.resolve()):
        assert not prompt_file.resolve().is_relative_to(where)
    assert not prompt_file.exists()
    assert not seen[1][1].exists()

    # the person sees everything
    show = andon(root, "show", "P1")
    assert show.returncode == 0, show.stderr
    assert "test_mul_other_inputs" in show.stdout and "hidden" in show.stdout


def test_visible_findings_of_the_same_gate_still_reach_the_agent():
    evidence = {"findings": [
        {"kind": "hidden", "message": "hidden test tests.test_mul_hidden::test_x failed: "
         "assert 43 == 42", "path": HIDDEN, "test_id": "tests.test_mul_hidden::test_x"},
        {"kind": "hidden", "message": f"hidden test file {HIDDEN} ran no tests",
         "path": HIDDEN, "test_id": None},
        {"kind": "fail-to-pass", "message": "tests.test_mul_p1::test_mul failed: assert 1 == 12",
         "path": PLANTED, "test_id": "tests.test_mul_p1::test_mul"}],
        "runs": [{"output_tail": "FAILED tests/test_mul_hidden.py::test_x - assert 43 == 42"}]}
    prev = redacted_failure(1, "hermetic", "code", "2 failing tests in "
                            "tests.test_mul_hidden::test_x, tests.test_mul_p1::test_mul",
                            evidence, [HIDDEN])
    assert isinstance(prev, PreviousFailure)
    text = prev.reason + prev.details
    assert "2 hidden tests failed in hermetic" in text
    assert "tests.test_mul_p1::test_mul failed" in text
    assert "43" not in text and "test_mul_hidden" not in text and "test_x" not in text


def test_without_hidden_tests_the_evidence_is_passed_on_whole():
    evidence = {"findings": [{"kind": "fail-to-pass", "message": "tests.t::test_a failed: "
                              "assert 1 == 2", "path": "tests/t.py", "test_id": "tests.t::test_a"}],
                "runs": [{"output_tail": "FAILED tests/t.py::test_a"}]}
    prev = redacted_failure(1, "suite", "code", "1 failing test", evidence, [])
    assert "tests.t::test_a failed: assert 1 == 2" in prev.details
    assert "FAILED tests/t.py::test_a" in prev.details


def test_a_line_naming_a_hidden_test_anywhere_is_withheld():
    from andon.prompt import WITHHELD, hidden_names
    names = hidden_names({HIDDEN: HIDDEN_TEST.encode()})
    assert {"test_mul_other_inputs", "test_mul_hidden", HIDDEN} <= names
    evidence = {"findings": [{"kind": "regression", "message": "conftest imported "
                              "test_mul_other_inputs", "path": "tests/conftest.py"},
                             {"kind": "regression", "message": "tests.t::test_b failed",
                              "path": "tests/t.py", "test_id": "tests.t::test_b"}],
                "runs": [{"output_tail": "ok"}]}
    prev = redacted_failure(1, "suite", "code", "see test_mul_other_inputs", evidence,
                            [HIDDEN], names)
    assert prev.reason == WITHHELD
    assert prev.details.split("\n")[:2] == [WITHHELD, "tests.t::test_b failed"]



def test_a_visible_test_sharing_a_hidden_tests_name_is_shown_and_gives_nothing_away():
    """A planted (visible) test and a base test may share a function name with a hidden test.
    Withholding their lines told the agent that a hidden test of that name exists, and hid
    the visible failure it has to fix: names the agent can see are not secrets, and a test
    id qualified by a visible file is about that file; the hidden file's own id still is."""
    from andon.prompt import WITHHELD, hidden_names
    planted = {PLANTED: b"def test_mul_other_inputs():\n    assert mul(1, 2) == 2\n"}
    names = hidden_names({HIDDEN: HIDDEN_TEST.encode()}, planted)
    assert "test_mul_other_inputs" not in names and HIDDEN in names
    evidence = {"findings": [
        {"kind": "fail-to-pass", "message": "tests.test_mul_p1::test_mul_other_inputs failed: "
         "assert 3 == 2", "path": PLANTED, "test_id": "tests.test_mul_p1::test_mul_other_inputs"},
        {"kind": "regression", "message": "tests.test_old::test_old_inputs failed",
         "path": "tests/test_old.py", "test_id": "tests.test_old::test_old_inputs"}],
        "runs": [{"output_tail": "____ test_mul_other_inputs ____\n"
                  "FAILED tests/test_mul_p1.py::test_mul_other_inputs - assert 3 == 2\n"
                  "FAILED tests/test_old.py::test_old_inputs - assert 0\n"
                  "imported by test_old_inputs\n"
                  "FAILED tests/test_mul_hidden.py::test_x - assert 0\n"
                  "FAILED test_mul_hidden.py::test_old_inputs - assert 0"}]}
    hidden_text = HIDDEN_TEST + "\n\ndef test_old_inputs():\n    pass\n"
    prev = redacted_failure(1, "suite", "code", "2 failing tests", evidence, [HIDDEN],
                            hidden_names({HIDDEN: hidden_text.encode()}, planted))
    shown = prev.details.split("\n")
    assert "tests.test_mul_p1::test_mul_other_inputs failed: assert 3 == 2" in shown
    assert "tests.test_old::test_old_inputs failed" in shown
    assert "____ test_mul_other_inputs ____" in shown
    assert "FAILED tests/test_mul_p1.py::test_mul_other_inputs - assert 3 == 2" in shown
    assert "FAILED tests/test_old.py::test_old_inputs - assert 0" in shown
    # a bare mention of a name only the hidden file defines, and the hidden file's ids (the
    # last relative to a rootdir below the repository)
    assert shown.count(WITHHELD) == 3 and "test_mul_hidden" not in prev.details


# the tail of a real worktree suite run whose agent deleted tests/test_add.py (newcomer pass)
CANARY_TAIL = """\
F..FF.....                                                               [100%]
=================================== FAILURES ===================================
_______________________________ test_19e75dcb7c ________________________________
KeyError: 656
_______________________________ test_277ff00108 ________________________________
ValueError: 96
_______________________________ test_real_one __________________________________
assert 1 == 2
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_2fbfc8bcbf.py::test_f638ad7abd
PASSED tests/test_div.py::test_div
FAILED tests/test_2fbfc8bcbf.py::test_19e75dcb7c - KeyError: 656
FAILED tests/test_2fbfc8bcbf.py::test_277ff00108 - ValueError: 96
FAILED tests/test_sub.py::test_real_one - assert 1 == 2
3 failed, 2 passed in 0.04s"""


def test_the_harness_canary_tests_never_reach_the_agent():
    """Canaries (contain/canary.py) fail on purpose and exist only in the harness's run: the
    retry prompt showed them as failures to fix. Their lines, their failure blocks, and the
    progress line and totals that count them are left out; the agent's own failure stays."""
    canaries = {f"tests.test_2fbfc8bcbf::{f}": o for f, o in (
        ("test_f638ad7abd", "passed"), ("test_19e75dcb7c", "failed"),
        ("test_277ff00108", "failed"))}
    evidence = {"findings": [{"kind": "regression", "message": "tests.test_sub::test_real_one "
                              "failed", "path": "tests/test_sub.py",
                              "test_id": "tests.test_sub::test_real_one"}],
                "runs": [{"output_tail": CANARY_TAIL, "integrity": {"canaries": canaries}}]}
    prev = redacted_failure(1, "suite", "code", "1 failing test", evidence, [])
    text = prev.reason + prev.details
    for gone in ("2fbfc8bcbf", "test_19e75dcb7c", "KeyError", "ValueError: 96", "3 failed",
                 "F..FF"):
        assert gone not in text, f"{gone!r} reached the agent:\n{text}"
    for kept in ("FAILED tests/test_sub.py::test_real_one - assert 1 == 2", "test_real_one",
                 "assert 1 == 2", "PASSED tests/test_div.py::test_div"):
        assert kept in text, f"{kept!r} is missing:\n{text}"


def test_a_retry_prompt_after_a_deleted_test_names_no_canary(tmp_path):
    """Through the runner: attempt 1 deletes an existing test (the suite gate fails with the
    canaries in its run), attempt 2's prompt holds none of that run's canary ids."""
    root = make_project(tmp_path / "repo", {"P1": (packet_md("P1", "multiply", "Add mul.",
                                                             allowed_paths=["src/**", "tests/**"]),
                                                   {PLANTED: MUL_TEST})}, config=FAST)
    prompts: dict[int, str] = {}

    def agent(ctx):
        prompts[ctx.attempt] = ctx.prompt
        with open(ctx.worktree / OPS, "a") as f:
            f.write(RIGHT)
        if ctx.attempt == 1:
            (ctx.worktree / "tests" / "test_ops.py").unlink()
        return "done"

    runner = runner_for(root, agent)
    assert runner.run().merged == ["P1"]
    a1 = runner.store.attempts("P1")[0]
    ids = [tid for g in runner.store.gate_results(a1["id"])
           for run in g["evidence"].get("runs", [])
           for tid in ((run.get("integrity") or {}).get("canaries") or {})]
    assert ids, "the failing gate's runs had no canaries: nothing was checked"
    names = {part for tid in ids for part in (tid.split("::")[0].rsplit(".", 1)[-1],
                                              tid.rsplit("::", 1)[-1])}
    assert "The previous attempt failed" in prompts[2]
    assert not [n for n in names if n in prompts[2]], prompts[2]
