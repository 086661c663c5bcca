"""End-to-end: the runner on real temporary git repositories with real pytest subprocesses.

Each test builds a small project (``tests/helpers.make_project``: ``src/calc`` with passing
tests), runs packets through ``Runner.run`` with scripted agents (plain functions editing
``ctx.worktree``), and asserts the *reason* for every outcome from the store — gate, status,
failure layer, finding kind, path or test id — not only the final state.

Most tests use ``FAST`` (2 red runs, 1 hermetic run + the random-order run) to stay quick;
the clean-merge test uses the shipped defaults.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from andon.exits import EXIT_HALTED, EXIT_OK, EXIT_PREFLIGHT
from andon.merge import ledger_value, merge_attempt, merge_lock
from andon.packet import load_packets

from helpers import (
    CALC,
    CALC_TESTS,
    MUL_CODE,
    MUL_TEST,
    SHIPPED,
    andon,
    config_toml,
    git,
    honest_mul,
    make_project,
    mul_packet,
    packet_md,
    project_test_command,
    runner_for,
    write,
)

FAST = config_toml(red_runs=2, hermetic_runs=1)
# For tests of what the suite gate itself catches: the patterns gate (which runs first and
# would reject skip calls, os._exit or copied literals by their source) is off.
NO_PATTERNS = FAST + "\n[gates.patterns]\nenabled = false\n"

INTEGRATION = "refs/heads/andon/integration"
PLANTED = "tests/test_mul_p1.py"

SUB_TEST = "from calc.ops import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
STUB_MUL = "\n\ndef mul(a, b):\n    raise NotImplementedError\n"
NEG_TEST = "from calc.ops import neg\n\n\ndef test_neg():\n    assert neg(4) == -4\n"


def sub_packet(pid: str = "P2", **fields: object) -> tuple[str, dict[str, str]]:
    fields.setdefault("allowed_paths", ["src/calc/**"])
    return packet_md(pid, "subtract", "calc.ops.sub subtracts.", **fields), {
        "tests/test_sub.py": SUB_TEST}


def neg_packet(pid: str = "P3", **fields: object) -> tuple[str, dict[str, str]]:
    fields.setdefault("allowed_paths", ["src/calc/**"])
    return packet_md(pid, "negate", "calc.ops.neg negates.", **fields), {
        "tests/test_neg.py": NEG_TEST}


def honest_sub(ctx) -> str:
    write(ctx, "src/calc/ops.py", "\n\ndef sub(a, b):\n    return a - b\n", append=True)
    return "done"


def honest_neg(ctx) -> str:
    write(ctx, "src/calc/ops.py", "\n\ndef neg(a):\n    return -a\n", append=True)
    return "done"


def wrong_mul(ctx) -> str:
    write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return a + b\n", append=True)
    return "implemented mul; all tests pass"  # a lie, recorded and ignored


def project(tmp_path: Path, packets, files=None, config: str = FAST) -> Path:
    return make_project(tmp_path / "repo", packets, files, config)


def attempt(runner, pid: str, n: int = 1) -> dict:
    return runner.store.attempts(pid)[n - 1]


def gates(runner, pid: str, n: int = 1) -> dict[str, dict]:
    """Gate name → stored gate result row, for attempt ``n`` of ``pid``."""
    rows = runner.store.gate_results(attempt(runner, pid, n)["id"])
    assert len({g["gate"] for g in rows}) == len(rows), rows
    return {g["gate"]: g for g in rows}


def findings(row: dict) -> list[dict]:
    return row["evidence"]["findings"]


def the_failure(runner, pid: str, n: int = 1) -> dict:
    """The single failing gate of an attempt (every gate before it passed or was skipped)."""
    rows = runner.store.gate_results(attempt(runner, pid, n)["id"])
    bad = [g for g in rows if g["status"] in ("fail", "error")]
    assert len(bad) == 1, [(g["gate"], g["status"], g["summary"]) for g in rows]
    assert rows[-1] == bad[0], "gates ran after a failing gate"
    assert all(g["status"] in ("pass", "skipped") for g in rows[:-1])
    return bad[0]


def rev(root: Path, name: str) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", name], cwd=root,
                         capture_output=True, text=True)
    return out.stdout.strip() or None


# -- 1. a clean merge ---------------------------------------------------------------------

def test_clean_merge_is_one_squash_commit_with_trailers_on_integration(tmp_path):
    """An honest agent: every gate passes (with the shipped default settings), the packet is
    done, and andon/integration gains exactly one squash commit on top of the old head with
    the Andon-Packet/Andon-Attempt trailers, holding the planted test and the agent's code;
    the attempt branch stays, the worktree is removed, the user's checkout is untouched."""
    root = project(tmp_path, {"P1": mul_packet("P1")}, config=SHIPPED)
    main = rev(root, "main")
    runner = runner_for(root, honest_mul)
    report = runner.run()

    assert (report.exit_status, report.merged) == (EXIT_OK, ["P1"]), report.message
    assert runner.store.packet("P1")["state"] == "done"
    g = gates(runner, "P1")
    assert [(k, v["status"]) for k, v in g.items()] == [
        ("red", "pass"), ("scope", "pass"), ("patterns", "pass"), ("suite", "pass"),
        ("hermetic", "pass"), ("static", "skipped"), ("flaky", "skipped"),
        ("mutation", "skipped"), ("review", "pass")]
    herm = g["hermetic"]["evidence"]
    # hermetic-1 is the suite gate's run, made in a fresh clone (the worktree holds exactly
    # the candidate: gates/joint.py); the hermetic gate judges the other three
    assert herm["first_run"] == "suite"
    assert len(herm["runs"]) == 3 and herm["runs"][-1]["seed"] == herm["seeds"][0]
    assert herm["not_run"] == []

    a = attempt(runner, "P1")
    head = rev(root, INTEGRATION)
    assert a["state"] == "merged" and a["merge_sha"] == head
    assert git(root, "rev-list", f"{main}..{head}").split() == [head]
    assert git(root, "rev-parse", f"{head}^").strip() == main
    assert git(root, "log", "-1", "--format=%P", head).split() == [main]  # one parent: a squash
    trailers = git(root, "log", "-1", "--format=%(trailers:only,unfold)", head)
    assert "Andon-Packet: P1" in trailers and "Andon-Attempt: 1" in trailers
    assert git(root, "show", f"{head}:{PLANTED}") == MUL_TEST
    assert git(root, "show", f"{head}:src/calc/ops.py").endswith(MUL_CODE)
    changed = git(root, "diff", "--name-only", main, head).split()
    assert sorted(changed) == sorted([PLANTED, "src/calc/ops.py"])

    assert rev(root, "refs/heads/andon/P1/1") == a["candidate_sha"]
    assert not Path(a["worktree"]).exists()
    assert Path(a["worktree"]) not in [Path(p) for p in git(root, "worktree", "list",
                                                              "--porcelain").split()]
    assert git(root, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert rev(root, "main") == main
    assert git(root, "status", "--porcelain") == ""


# -- 2. preflight -------------------------------------------------------------------------

def test_preflight_failure_stops_before_anything_changes(tmp_path):
    """The project's own suite fails on main: run returns exit status 3 naming the failing
    test, nothing is registered in the store (no packet, no event, no attempt) and the
    integration branch is not created. The CLI exits 3 too."""
    broken = CALC_TESTS + "\n\ndef test_broken():\n    assert 1 == 2\n"
    root = project(tmp_path, {"P1": mul_packet("P1")}, files={"tests/test_ops.py": broken})
    calls = []
    runner = runner_for(root, lambda ctx: calls.append(ctx) or honest_mul(ctx))
    report = runner.run()

    assert report.exit_status == EXIT_PREFLIGHT == 3
    assert "tests.test_ops::test_broken" in report.message
    pf = report.preflight
    assert (pf.gate, pf.status, pf.layer) == ("preflight", "fail", "environment")
    assert [(f.kind, f.test_id) for f in pf.findings] == [
        ("baseline-failure", "tests.test_ops::test_broken")]
    # one run-level record of the failure (the board names it); no packet was touched
    assert [(e["kind"], e["packet_id"], e["data"]["status"])
            for e in runner.store.events()] == [("preflight", None, "fail")]
    assert runner.store.packets() == []
    assert calls == []
    assert rev(root, INTEGRATION) is None

    cli = andon(root, "run", "--agent", "command", "--command", "true")
    assert cli.returncode == 3, cli.stdout + cli.stderr
    assert "test_broken" in cli.stdout + cli.stderr
    assert rev(root, INTEGRATION) is None


# -- 3./4. red ----------------------------------------------------------------------------

def test_red_blocks_a_planted_test_that_already_passes_and_never_runs_the_agent(tmp_path):
    """A planted test that passes on the base tests nothing: red fails with layer
    `specification` and finding `already-passes` naming the test id; the packet is blocked
    on the first attempt and the agent never ran (no stage run recorded)."""
    passes = "from calc.ops import add\n\n\ndef test_add_again():\n    assert add(1, 1) == 2\n"
    md = packet_md("P1", "again", "Nothing to do.", allowed_paths=["src/calc/**"])
    root = project(tmp_path, {"P1": (md, {"tests/test_add_again.py": passes})})
    calls = []
    runner = runner_for(root, lambda ctx: calls.append(ctx) or honest_mul(ctx))
    report = runner.run()

    assert report.exit_status == EXIT_HALTED and report.halted_by == "P1"
    assert runner.store.packet("P1")["state"] == "blocked"
    assert len(runner.store.attempts("P1")) == 1
    red = the_failure(runner, "P1")
    assert (red["gate"], red["status"], red["failure_layer"]) == ("red", "fail",
                                                                  "specification")
    assert [(f["kind"], f["test_id"], f["path"]) for f in findings(red)] == [
        ("already-passes", "tests.test_add_again::test_add_again", "tests/test_add_again.py")]
    assert calls == []
    assert runner.store.stage_runs(attempt(runner, "P1")["id"]) == []
    assert rev(root, INTEGRATION) == rev(root, "main")


def test_red_blocks_a_flaky_planted_test(tmp_path):
    """A planted test red only sometimes (deterministically: it passes when a counter kept
    outside the repository is even, and counts each run) is `flaky`: red fails, layer
    `specification`, packet blocked, agent never ran."""
    counter = tmp_path / "counter" / "n"
    counter.parent.mkdir()
    flaky = f'''\
from pathlib import Path

COUNTER = Path({str(counter)!r})


def test_sometimes():
    n = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(n))
    assert n % 2 == 0
'''
    md = packet_md("P1", "flaky", "Nothing reliable.", allowed_paths=["src/calc/**"])
    root = project(tmp_path, {"P1": (md, {"tests/test_flaky.py": flaky})})
    calls = []
    runner = runner_for(root, lambda ctx: calls.append(ctx) or honest_mul(ctx))
    report = runner.run()

    assert report.exit_status == EXIT_HALTED
    assert counter.read_text() == "2"  # red_runs = 2: red, then green
    assert runner.store.packet("P1")["state"] == "blocked"
    red = the_failure(runner, "P1")
    assert (red["gate"], red["failure_layer"]) == ("red", "specification")
    assert [(f["kind"], f["test_id"]) for f in findings(red)] == [
        ("flaky", "tests.test_flaky::test_sometimes")]
    assert calls == []


# -- 5./6. scope --------------------------------------------------------------------------

def _edit_planted(ctx):
    honest_mul(ctx)
    text = (ctx.worktree / PLANTED).read_text()
    write(ctx, PLANTED, text.replace("assert mul(3, 4) == 12", "assert True"))  # line 5


def _delete_planted(ctx):
    honest_mul(ctx)
    (ctx.worktree / PLANTED).unlink()


def _edit_packet(ctx):
    honest_mul(ctx)
    write(ctx, "packets/P1/packet.md", "\n<!-- easier now -->\n", append=True)


def _edit_config(ctx):
    honest_mul(ctx)
    toml = ctx.worktree / "andon.toml"
    toml.write_text(toml.read_text().replace("red_runs = 2", "red_runs = 1"))


def _line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


@pytest.mark.parametrize("agent, path, verb, line", [
    (_edit_planted, PLANTED, "modified", lambda root: _line_of(MUL_TEST, "mul(3, 4)")),
    (_delete_planted, PLANTED, "deleted", lambda root: None),
    (_edit_packet, "packets/P1/packet.md", None,  # the appended text: one past the old end
     lambda root: len((root / "packets/P1/packet.md").read_text().splitlines()) + 1),
    (_edit_config, "andon.toml", None,
     lambda root: _line_of((root / "andon.toml").read_text(), "red_runs = 2")),
], ids=["edit-planted", "delete-planted", "edit-packet", "edit-config"])
def test_scope_tamper(tmp_path, agent, path, verb, line):
    """Changing a planted test (edit or delete), the packet folder or andon.toml is a
    `tamper` finding naming the path, layer `permission`, whatever the tests say; nothing
    merges (max_attempts = 1, so the packet blocks). A modified file's finding carries the
    first line that differs from the harness's version; a deleted one has no line."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)})
    runner = runner_for(root, agent)
    report = runner.run()

    assert report.exit_status == EXIT_HALTED and report.merged == []
    scope = the_failure(runner, "P1")
    assert (scope["gate"], scope["status"], scope["failure_layer"]) == ("scope", "fail",
                                                                        "permission")
    assert [(f["kind"], f["path"]) for f in findings(scope)] == [("tamper", path)]
    if verb:
        assert verb in findings(scope)[0]["message"]
    assert findings(scope)[0]["line"] == line(root)
    assert path in scope["summary"]
    assert "attempts exhausted" in attempt(runner, "P1")["reason"]
    assert rev(root, INTEGRATION) == rev(root, "main")


def _forbidden(ctx):
    honest_mul(ctx)
    write(ctx, "src/calc/secret_settings.py", "DEBUG = True\n")


def _outside(ctx):
    honest_mul(ctx)
    write(ctx, "README.md", "# calc\n")


@pytest.mark.parametrize("agent, kind, path, layer", [
    (_forbidden, "forbidden-path", "src/calc/secret_settings.py", "permission"),
    (_outside, "outside-allowed", "README.md", "permission"),
    (lambda ctx: "did nothing, all good", "no-change", None, "code"),
], ids=["forbidden", "outside-allowed", "no-change"])
def test_scope_paths(tmp_path, agent, kind, path, layer):
    """A forbidden path → `forbidden-path`; a path outside allowed_paths →
    `outside-allowed` (both layer permission); no change at all → `no-change` (layer code).
    The finding names the offending path."""
    root = project(tmp_path, {"P1": mul_packet(
        "P1", max_attempts=1, forbidden_paths=["src/calc/secret*.py"])})
    runner = runner_for(root, agent)
    runner.run()

    scope = the_failure(runner, "P1")
    assert (scope["gate"], scope["status"], scope["failure_layer"]) == ("scope", "fail", layer)
    assert [(f["kind"], f["path"]) for f in findings(scope)] == [(kind, path)]
    assert runner.store.packet("P1")["state"] == "blocked"


# -- 7. refs ------------------------------------------------------------------------------

@pytest.mark.parametrize("ref", [INTEGRATION, "refs/heads/andon/P0/1"])
def test_agent_moving_refs_is_tamper_and_the_ref_is_restored(tmp_path, ref):
    """An agent that reaches the user's repository by absolute path (its worktree is a
    separate repository) and runs `git update-ref <ref> <its plant commit>` on a ref andon
    owns is rejected by scope with a `tamper` finding naming the ref, layer permission, and
    the ref is back at its old value (or gone, if it made it) afterwards."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)})
    main = rev(root, "main")

    def mover(ctx):
        honest_mul(ctx)
        plant = rev(ctx.worktree, "HEAD")
        subprocess.run(["git", "-C", str(root), "update-ref", ref, plant], check=True)
        assert rev(root, ref) != main  # it really moved

    runner = runner_for(root, mover)
    runner.run()

    scope = the_failure(runner, "P1")
    assert (scope["gate"], scope["failure_layer"]) == ("scope", "permission")
    assert [(f["kind"], f["path"]) for f in findings(scope)] == [("tamper", ref)]
    assert rev(root, ref) == (main if ref == INTEGRATION else None)
    assert rev(root, INTEGRATION) == main
    assert runner.store.packet("P1")["state"] == "blocked"
    assert git(root, "status", "--porcelain") == ""


def test_an_integration_branch_made_a_link_to_the_users_branch_never_moves_the_users_branch(
        tmp_path):
    """The agent, by absolute path, turns the integration branch into a symbolic ref to the
    branch the user has checked out, at the same commit: no ref's sha moved, so scope has
    nothing to restore. The merge then moves the integration branch itself (git update-ref
    --no-deref), never the user's branch through the link (which would leave their tree
    looking dirty)."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)})
    main = rev(root, "main")

    def linker(ctx):
        honest_mul(ctx)
        subprocess.run(["git", "-C", str(root), "symbolic-ref", INTEGRATION,
                        "refs/heads/main"], check=True)
    runner = runner_for(root, linker)
    assert runner.run().merged == ["P1"]
    assert rev(root, "main") == main
    assert rev(root, INTEGRATION) != main
    assert git(root, "status", "--porcelain") == ""


def _deletes_worktree(ctx):
    shutil.rmtree(ctx.worktree)


def _links_worktree_elsewhere(ctx):
    """Replaces its worktree by a link to the directory named in $VICTIM."""
    shutil.rmtree(ctx.worktree)
    ctx.worktree.symlink_to(os.environ["VICTIM"])


def _nested_empty_repository(ctx):
    honest_mul(ctx)
    (ctx.worktree / "src/calc/nested").mkdir()
    git(ctx.worktree / "src/calc/nested", "init", "-q")
    (ctx.worktree / "src/calc/nested/x.py").write_text("x = 1\n")


@pytest.mark.parametrize("agent,message,path", [
    (_deletes_worktree, "is no longer a directory", None),
    (_links_worktree_elsewhere, "replaced by a symbolic link", None),
    (_nested_empty_repository, "could not read the worktree", "src/calc/nested")])
def test_a_worktree_andon_cannot_read_is_a_recorded_failure_not_a_crash(tmp_path, agent,
                                                                        message, path,
                                                                        monkeypatch):
    """Whatever the agent does to its worktree, the runner records a scope failure with an
    ``unreadable-worktree`` finding and goes on; a link's target is never touched."""
    victim = tmp_path / "victim" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("keep me\n")
    monkeypatch.setenv("VICTIM", str(victim.parent))
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)})
    runner = runner_for(root, agent)
    report = runner.run()

    assert report.exit_status == EXIT_HALTED and runner.store.packet("P1")["state"] == "blocked"
    g = the_failure(runner, "P1")
    assert (g["gate"], g["status"], g["failure_layer"]) == ("scope", "fail", "permission")
    assert message in g["summary"]
    assert [(f["kind"], f["path"]) for f in findings(g)] == [("unreadable-worktree", path)]
    assert victim.read_text() == "keep me\n"  # the worktree (a link) is gone, not its target
    assert git(root, "status", "--porcelain") == ""


def test_agent_creating_a_future_attempt_branch_does_not_crash_the_runner(tmp_path):
    """Attempt 1 creates the branch andon's next attempt will need (andon/P1/2) from inside
    the user's repository (by absolute path). The runner must not crash: attempt 1 is
    rejected as tamper naming that ref, the ref is deleted, and attempt 2 (honest) runs and
    merges."""
    root = project(tmp_path, {"P1": mul_packet("P1")})

    def squatter(ctx):
        if ctx.attempt == 1:
            wrong_mul(ctx)
            subprocess.run(["git", "-C", str(root), "branch", "andon/P1/2", "main"],
                           check=True)
        else:
            honest_mul(ctx)

    runner = runner_for(root, squatter)
    report = runner.run()

    assert attempt(runner, "P1", 1)["state"] == "failed"
    scope = next(g for g in runner.store.gate_results(attempt(runner, "P1", 1)["id"])
                 if g["status"] == "fail")
    assert [(f["kind"], f["path"]) for f in findings(scope)] == [
        ("tamper", "refs/heads/andon/P1/2")]
    assert report.merged == ["P1"] and attempt(runner, "P1", 2)["state"] == "merged"


@pytest.mark.parametrize("history,expected", [("full", 2), ("shallow", 1)])
def test_agent_history_setting_decides_how_much_history_the_worktree_holds(tmp_path, history,
                                                                          expected):
    """The project has one commit, the plant commit makes two; shallow keeps only the tip."""
    config = config_toml(red_runs=2, hermetic_runs=1, agent_history=history)
    assert f'agent_history = "{history}"' in config
    root = project(tmp_path, {"P1": mul_packet("P1")}, config=config)
    seen = []

    def counter(ctx):
        seen.append(len(git(ctx.worktree, "log", "--format=%H").split()))
        honest_mul(ctx)

    assert runner_for(root, counter).run().merged == ["P1"]
    assert seen == [expected]


def test_the_user_committing_while_an_agent_works_is_their_business(tmp_path):
    """The person goes on working in their checkout during a stage (a commit on main): it is
    neither undone nor blamed on the agent, and the agent's work is merged."""
    root = project(tmp_path, {"P1": mul_packet("P1")})

    def agent(ctx):
        (root / "NOTES.md").write_text("the user's own work\n")
        git(root, "add", "NOTES.md")
        git(root, "commit", "-qm", "user commit during the stage")
        return honest_mul(ctx)

    runner = runner_for(root, agent)
    assert runner.run().merged == ["P1"]
    assert git(root, "log", "-1", "--format=%s", "main").strip() == "user commit during the stage"
    assert git(root, "status", "--porcelain") == ""


def test_refs_the_agent_makes_in_its_own_worktree_touch_nothing(tmp_path):
    """Branches, tags and commits an honest agent makes in its worktree stay there: the user's
    refs are as they were, the work is merged, and nothing is reported."""
    root = project(tmp_path, {"P1": mul_packet("P1")})
    refs = git(root, "for-each-ref", "--format=%(refname) %(objectname)")

    def committer(ctx):
        honest_mul(ctx)
        for argv in (["add", "-A"], ["commit", "-qm", "mul"], ["branch", "andon/P1/2"],
                     ["tag", "v9"], ["checkout", "-qb", "scratch"]):
            git(ctx.worktree, *argv)

    runner = runner_for(root, committer)
    assert runner.run().merged == ["P1"]
    after = git(root, "for-each-ref", "--format=%(refname) %(objectname)")
    added = set(after.splitlines()) - set(refs.splitlines())
    assert {r.split()[0] for r in added} == {INTEGRATION, "refs/heads/andon/P1/1"}


# -- 8./9./10. suite ----------------------------------------------------------------------

def test_suite_fail_to_pass_names_the_planted_test(tmp_path):
    """A wrong implementation: suite fails, layer code, `fail-to-pass` findings naming both
    planted test ids; hermetic never ran."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)})
    runner = runner_for(root, wrong_mul)
    runner.run()

    suite = the_failure(runner, "P1")
    assert (suite["gate"], suite["status"], suite["failure_layer"]) == ("suite", "fail", "code")
    assert sorted((f["kind"], f["test_id"]) for f in findings(suite)) == [
        ("fail-to-pass", "tests.test_mul_p1::test_mul"),
        ("fail-to-pass", "tests.test_mul_p1::test_mul_zero")]
    assert "hermetic" not in gates(runner, "P1")


def test_suite_pass_to_pass_names_the_broken_existing_test(tmp_path):
    """An agent that adds mul but breaks `div`: `pass-to-pass` naming
    tests.test_ops::test_div, layer code; the planted tests themselves pass."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)})

    def breaks_div(ctx):
        ops = ctx.worktree / "src/calc/ops.py"
        ops.write_text(ops.read_text().replace("return a / b", "return a * b") + MUL_CODE)

    runner = runner_for(root, breaks_div)
    runner.run()

    suite = the_failure(runner, "P1")
    assert (suite["gate"], suite["failure_layer"]) == ("suite", "code")
    assert [(f["kind"], f["test_id"]) for f in findings(suite)] == [
        ("pass-to-pass", "tests.test_ops::test_div")]
    assert "tests.test_ops::test_div" in suite["summary"]


@pytest.mark.parametrize("stub", [False, True], ids=["no-mul-on-base", "stub-mul-on-base"])
def test_skip_from_inside_the_code_under_test_is_a_fail_to_pass(tmp_path, stub):
    """`pytest.skip()` inside `mul` makes the planted tests skip, not pass: rejected with
    `fail-to-pass` findings that say 'skipped' — both when the planted module did not import
    on the base (judged by file) and when it did (a stub mul: judged by red test id)."""
    files = {"src/calc/ops.py": CALC + STUB_MUL} if stub else None
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)}, files=files,
                   config=NO_PATTERNS)

    def skipper(ctx):
        write(ctx, "src/calc/ops.py",
              "\n\ndef mul(a, b):\n    import pytest\n    pytest.skip('later')\n", append=True)

    runner = runner_for(root, skipper)
    runner.run()

    suite = the_failure(runner, "P1")
    assert (suite["gate"], suite["failure_layer"]) == ("suite", "code")
    got = sorted((f["kind"], f["test_id"]) for f in findings(suite))
    assert got == [("fail-to-pass", "tests.test_mul_p1::test_mul"),
                   ("fail-to-pass", "tests.test_mul_p1::test_mul_zero")]
    assert all("skipped" in f["message"] for f in findings(suite))
    red_ids = gates(runner, "P1")["red"]["evidence"]["red_ids"]
    assert red_ids == (["tests.test_mul_p1::test_mul", "tests.test_mul_p1::test_mul_zero"]
                       if stub else [])


def test_os_exit_at_import_is_no_report(tmp_path):
    """`os._exit(0)` at import of calc.ops ends pytest with status 0 and no JUnit report:
    the suite gate fails with `no-report` — an exit status of 0 is not a pass."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)}, config=NO_PATTERNS)

    def exits(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/ops.py", "\nimport os\nos._exit(0)\n", append=True)

    runner = runner_for(root, exits)
    runner.run()

    suite = the_failure(runner, "P1")
    assert (suite["gate"], suite["status"], suite["failure_layer"]) == ("suite", "fail", "code")
    assert [f["kind"] for f in findings(suite)] == ["no-report"]
    assert suite["evidence"]["runs"][0]["exit_status"] == 0


def test_a_new_failing_test_outside_the_planted_ones_is_rejected(tmp_path):
    """The agent solves the packet but adds (in an allowed path) a test that fails: the
    integration branch must stay green, so suite fails with `failing-test` naming it."""
    root = project(tmp_path, {"P1": mul_packet(
        "P1", max_attempts=1, allowed_paths=["src/calc/**", "tests/test_extra.py"])})

    def adds_red_test(ctx):
        honest_mul(ctx)
        write(ctx, "tests/test_extra.py", "def test_new():\n    assert 2 + 2 == 5\n")

    runner = runner_for(root, adds_red_test)
    runner.run()

    suite = the_failure(runner, "P1")
    assert (suite["gate"], suite["failure_layer"]) == ("suite", "code")
    assert [(f["kind"], f["test_id"], f["path"]) for f in findings(suite)] == [
        ("failing-test", "tests.test_extra::test_new", "tests/test_extra.py")]
    assert gates(runner, "P1")["scope"]["status"] == "pass"


# -- 11./12. hermetic ---------------------------------------------------------------------

def test_hermetic_catches_code_that_reads_an_ignored_file_from_the_worktree(tmp_path):
    """mul reads `src/calc/_cache.json`, a file the agent created and git-ignored: the suite
    passes in the worktree (the file is there) but the hermetic gate fails in a fresh clone
    (it is not) with `fail-to-pass` on the planted tests."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=1)})

    def reads_ignored(ctx):
        write(ctx, "src/calc/.gitignore", "_cache.json\n")
        write(ctx, "src/calc/_cache.json", '{"factor": 1}\n')
        write(ctx, "src/calc/ops.py", '''

def mul(a, b):
    import json
    import pathlib
    cache = pathlib.Path(__file__).with_name("_cache.json")
    return a * b * json.loads(cache.read_text())["factor"]
''', append=True)

    runner = runner_for(root, reads_ignored)
    runner.run()

    g = gates(runner, "P1")
    assert g["suite"]["status"] == "pass"
    herm = the_failure(runner, "P1")
    assert (herm["gate"], herm["status"], herm["failure_layer"]) == ("hermetic", "fail", "code")
    assert sorted((f["kind"], f["test_id"]) for f in findings(herm)) == [
        ("fail-to-pass", "tests.test_mul_p1::test_mul"),
        ("fail-to-pass", "tests.test_mul_p1::test_mul_zero")]
    assert "FileNotFoundError" in " ".join(f["message"] for f in findings(herm))
    cand = attempt(runner, "P1")["candidate_sha"]
    assert rev(root, f"{cand}:src/calc/_cache.json") is None  # never committed


CHAIN_LEN = 20
CHAIN_TESTS = "SEEN = []\n" + "".join(f'''

def test_step_{i:02d}():
    assert SEEN == list(range({i}))
    SEEN.append({i})
''' for i in range(CHAIN_LEN))


def test_hermetic_random_order_catches_order_dependent_tests(tmp_path):
    """The agent adds 20 tests that pass only in file order (each checks, through a module
    global, that every earlier one ran just before it). The worktree suite and the in-order
    hermetic run pass; the seeded random-order run fails with `failing-test`, and the seed is
    recorded in the evidence and the summary. (A shuffle keeps all 20 in order with
    probability 1/20! ≈ 4e-19, so this is deterministic in practice.)"""
    root = project(tmp_path, {"P1": mul_packet(
        "P1", max_attempts=1, allowed_paths=["src/calc/**", "tests/test_chain.py"])})

    def order_dependent(ctx):
        honest_mul(ctx)
        write(ctx, "tests/test_chain.py", CHAIN_TESTS)

    runner = runner_for(root, order_dependent)
    runner.run()

    assert gates(runner, "P1")["suite"]["status"] == "pass"
    herm = the_failure(runner, "P1")
    assert (herm["gate"], herm["failure_layer"]) == ("hermetic", "code")
    runs = herm["evidence"]["runs"]
    # the in-order run that passed is the suite gate's, made in a fresh clone as hermetic-1
    # (the worktree holds exactly the candidate: gates/joint.py)
    assert [r["name"] for r in runs] == ["hermetic-random"]
    assert gates(runner, "P1")["suite"]["evidence"]["runs"][0]["counts"]["failed"] == 0
    seed = runs[-1]["seed"]
    assert isinstance(seed, int) and f"seed {seed}" in herm["summary"]
    kinds = {(f["kind"], f["path"]) for f in findings(herm)}
    assert kinds == {("failing-test", "tests/test_chain.py")}


# -- 13.-15. retry ------------------------------------------------------------------------

def test_retry_carries_the_failing_evidence_into_the_next_prompt(tmp_path):
    """Attempt 1 fails the suite, attempt 2 is honest and merges; attempt 2's prompt file
    names the failing test id of attempt 1 (and attempt 1's prompt did not)."""
    root = project(tmp_path, {"P1": mul_packet("P1")})
    runner = runner_for(root, lambda ctx: (wrong_mul if ctx.attempt == 1 else honest_mul)(ctx))
    report = runner.run()

    assert report.merged == ["P1"]
    a1, a2 = runner.store.attempts("P1")
    assert (a1["state"], a2["state"]) == ("failed", "merged")
    assert the_failure(runner, "P1", 1)["gate"] == "suite"
    p1 = (Path(a1["evidence_dir"]) / "implement.prompt.md").read_text()
    p2 = (Path(a2["evidence_dir"]) / "implement.prompt.md").read_text()
    assert "tests.test_mul_p1::test_mul" not in p1
    assert "tests.test_mul_p1::test_mul" in p2
    assert "Attempt 1 was rejected by the `suite` gate" in p2
    assert rev(root, INTEGRATION) == a2["merge_sha"]


def test_same_failure_twice_blocks_and_halts_the_queue(tmp_path):
    """The same wrong implementation twice → same fingerprint → blocked "same failure as
    attempt 1"; the next packet (no requires) is never started (ready, no attempts); run
    exits 1 naming the blocked packet; a fresh runner refuses at once while it is blocked."""
    root = project(tmp_path, {"P1": mul_packet("P1"), "P2": sub_packet("P2")})
    runner = runner_for(root, {"P1": wrong_mul, "P2": honest_sub})
    report = runner.run()

    assert report.exit_status == EXIT_HALTED == 1
    assert report.halted_by == "P1" and "P1" in report.message
    a1, a2 = runner.store.attempts("P1")
    assert a1["fingerprint"] == a2["fingerprint"]
    assert a2["reason"].startswith("same failure as attempt 1")
    assert a2["reason"] in report.message
    assert runner.store.packet("P1")["state"] == "blocked"
    assert runner.store.packet("P2")["state"] == "ready"
    assert runner.store.attempts("P2") == []

    events_before = len(runner.store.events())
    again = runner_for(root, {"P1": honest_mul, "P2": honest_sub}).run()
    assert again.exit_status == EXIT_HALTED and again.halted_by == "P1"
    assert len(runner.store.attempts("P1")) == 2 and runner.store.attempts("P2") == []
    assert len(runner.store.events()) == events_before
    assert rev(root, INTEGRATION) == rev(root, "main")


def test_attempts_exhausted_blocks(tmp_path):
    """Two different failures with max_attempts = 2 → blocked "attempts exhausted"."""
    root = project(tmp_path, {"P1": mul_packet("P1", max_attempts=2)}, config=NO_PATTERNS)

    def differently_wrong(ctx):
        if ctx.attempt == 1:
            return wrong_mul(ctx)
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return 12\n", append=True)

    runner = runner_for(root, differently_wrong)
    report = runner.run()

    assert report.exit_status == EXIT_HALTED
    a1, a2 = runner.store.attempts("P1")
    assert a1["fingerprint"] != a2["fingerprint"]
    assert [(f["kind"], f["test_id"]) for f in findings(the_failure(runner, "P1", 2))] == [
        ("fail-to-pass", "tests.test_mul_p1::test_mul_zero")]
    assert a2["reason"].startswith("attempts exhausted (2)")
    assert runner.store.packet("P1")["state"] == "blocked"


# -- 16. the user's tree ------------------------------------------------------------------

def test_the_users_dirty_working_tree_is_untouched(tmp_path):
    """With another branch checked out, an unstaged edit, a staged edit and an untracked
    file, a run that merges one packet and rejects another leaves `git status`, both diffs,
    the untracked file, HEAD and the checked-out branch byte-identical."""
    root = project(tmp_path, {"P1": mul_packet("P1"), "P2": sub_packet("P2", max_attempts=1)})
    git(root, "checkout", "-q", "-b", "feature")
    (root / "src/calc/ops.py").write_text(
        (root / "src/calc/ops.py").read_text() + "\n# unstaged thought\n")
    (root / "src/calc/__init__.py").write_text("# staged\n")
    git(root, "add", "src/calc/__init__.py")
    (root / "scratch.txt").write_bytes(b"untracked \x00 bytes\n")

    def look() -> dict:
        return {
            "status": git(root, "status", "--porcelain=v2", "--branch", "--untracked-files=all"),
            "diff": git(root, "diff"),
            "cached": git(root, "diff", "--cached"),
            "head": git(root, "rev-parse", "HEAD"),
            "branch": git(root, "symbolic-ref", "HEAD"),
            "scratch": (root / "scratch.txt").read_bytes(),
            "ops": (root / "src/calc/ops.py").read_bytes(),
            "init": (root / "src/calc/__init__.py").read_bytes(),
            "stash": git(root, "stash", "list"),
        }

    before = look()

    def tamper(ctx):
        honest_sub(ctx)
        write(ctx, "tests/test_sub.py", "def test_sub():\n    pass\n")

    runner = runner_for(root, {"P1": honest_mul, "P2": tamper})
    report = runner.run()

    assert report.merged == ["P1"] and report.halted_by == "P2"
    assert findings(the_failure(runner, "P2"))[0]["kind"] == "tamper"
    assert look() == before
    # and the merge was based on the checked-out branch's commit, not on its dirty tree
    assert git(root, "show", f"{INTEGRATION}:src/calc/__init__.py") == ""


# -- 17. green at every commit ------------------------------------------------------------

def test_integration_branch_is_green_at_every_commit(tmp_path):
    """Three packets merge one after another, each based on the previous merge; then every
    commit on andon/integration since main, checked out in a fresh clone, passes the full
    suite (a plain pytest subprocess, not the harness's runner)."""
    root = project(tmp_path, {"P1": mul_packet("P1"), "P2": sub_packet("P2"),
                              "P3": neg_packet("P3")})
    runner = runner_for(root, {"P1": honest_mul, "P2": honest_sub, "P3": honest_neg})
    report = runner.run()
    assert report.merged == ["P1", "P2", "P3"], report.message

    merges = [attempt(runner, p)["merge_sha"] for p in ("P1", "P2", "P3")]
    assert [attempt(runner, p)["base_sha"] for p in ("P1", "P2", "P3")] == [
        rev(root, "main"), merges[0], merges[1]]
    commits = git(root, "rev-list", "--reverse", "--first-parent", f"main..{INTEGRATION}").split()
    assert commits == merges

    counts = []
    for i, sha in enumerate(commits):
        clone = tmp_path / f"clone{i}"
        git(tmp_path, "clone", "-q", "--no-checkout", str(root), str(clone))
        git(clone, "checkout", "-q", "--detach", sha)
        proc = subprocess.run(
            [*project_test_command(), "-q", "-p", "no:cacheprovider", "--ignore=packets",
             "-o", "addopts="],
            cwd=clone, capture_output=True, text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(clone / "src"),
                 "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(tmp_path),
                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        assert proc.returncode == 0, f"commit {i + 1} ({sha[:10]}):\n{proc.stdout}{proc.stderr}"
        counts.append(proc.stdout)
    assert ["4 passed" in counts[0], "5 passed" in counts[1], "6 passed" in counts[2]] == [
        True, True, True], counts


# -- 18. merging onto a moved integration branch ------------------------------------------

def _passed_attempt(tmp_path: Path, agent):
    """A project whose packet P1 passed every gate but waits for a person (gate = human),
    so its attempt can be merged by hand."""
    root = project(tmp_path, {"P1": mul_packet("P1", gate="human")})
    runner = runner_for(root, agent)
    runner.run()
    assert runner.store.packet("P1")["state"] == "awaiting_human"
    a = attempt(runner, "P1")
    assert a["state"] == "passed"
    red_ids = set(gates(runner, "P1")["red"]["evidence"].get("red_ids", []))
    packet = {p.id: p for p in load_packets(root / "packets", root)}["P1"]
    return root, runner, a, red_ids, packet


def _advance_integration(root: Path, tmp_path: Path, files: dict[str, str], msg: str) -> str:
    """Commit ``files`` on top of andon/integration in a separate worktree (never the
    user's tree) and move the branch there; return the new head."""
    other = tmp_path / "other-wt"
    git(root, "worktree", "add", "-q", "--detach", str(other), INTEGRATION)
    for rel, text in files.items():
        (other / rel).parent.mkdir(parents=True, exist_ok=True)
        (other / rel).write_text(text)
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", msg)
    sha = git(other, "rev-parse", "HEAD").strip()
    git(root, "update-ref", INTEGRATION, sha)
    git(root, "worktree", "remove", "--force", str(other))
    return sha


def test_merge_onto_a_moved_integration_branch_checks_the_merged_result(tmp_path):
    """After an attempt passed, andon/integration gains an unrelated commit: merge_attempt
    squashes on top of it (parent = the new head), and the merged result was run
    (`check.status == "pass"`); the merged tree has both changes."""
    root, runner, a, red_ids, packet = _passed_attempt(tmp_path, honest_mul)
    other = _advance_integration(root, tmp_path, {
        "src/calc/extra.py": "def neg(x):\n    return -x\n",
        "tests/test_extra.py": "from calc.extra import neg\n\n\ndef test_neg():\n"
                               "    assert neg(2) == -2\n"}, "unrelated: neg")
    baseline = {"tests.test_ops::test_add", "tests.test_ops::test_div",
                "tests.test_extra::test_neg"}

    out = merge_attempt(runner.repo, runner.config, packet, a, red_ids,
                        lambda tree: baseline, tmp_path / "merge-ev")

    assert out.merged_sha is not None and out.check is not None
    assert (out.check.gate, out.check.status) == ("merge", "pass"), out.check.summary
    assert rev(root, INTEGRATION) == out.merged_sha
    assert git(root, "log", "-1", "--format=%P", out.merged_sha).split() == [other]
    assert git(root, "show", f"{out.merged_sha}:src/calc/ops.py").endswith(MUL_CODE)
    assert git(root, "show", f"{out.merged_sha}:{PLANTED}") == MUL_TEST
    assert rev(root, f"{out.merged_sha}:src/calc/extra.py")
    assert baseline | {"tests.test_mul_p1::test_mul"} <= out.passed_ids
    assert "Andon-Packet: P1" in git(root, "log", "-1", "--format=%B", out.merged_sha)


def test_the_ledger_holds_what_the_merge_set_not_where_the_branch_went_after(tmp_path):
    """Another worker's agent moves the integration branch right after the merge set it: the
    ledger (what pool_refs judges the branch against) holds the merge's commit, so that move
    is still seen as a move, not taken for the merge."""
    root, runner, a, red_ids, packet = _passed_attempt(tmp_path, honest_mul)
    base = rev(root, INTEGRATION)
    set_ref = runner.repo.set_ref

    def then_moved(ref, new, expected_old):
        set_ref(ref, new, expected_old)
        if ref == INTEGRATION:
            git(root, "update-ref", INTEGRATION, base)  # behind the harness's back

    runner.repo.set_ref = then_moved
    out = merge_attempt(runner.repo, runner.config, packet, a, red_ids, lambda tree: set(),
                        tmp_path / "merge-ev")
    assert out.merged_sha is not None and rev(root, INTEGRATION) == base
    with merge_lock(runner.repo) as lock:
        assert ledger_value(lock) == out.merged_sha


def test_a_merge_onto_a_moved_branch_says_that_the_merged_result_ran(tmp_path):
    """The run's live output names the merge check when the branch had moved: a newcomer
    pass with --workers 2 saw the board count one more gate for P01 than for P02, with no
    line in the output saying why."""
    said: list[str] = []
    root = project(tmp_path, {"P1": mul_packet("P1", gate="human")})
    runner = runner_for(root, honest_mul, echo=said.append)
    runner.run()
    _advance_integration(root, tmp_path, {"src/calc/extra.py": "X = 1\n"}, "unrelated")
    said.clear()
    assert runner.approve("P1", "me") == "done"
    head = rev(root, INTEGRATION)
    assert [s for s in said if s.startswith("P1:")] == [
        f"P1: merged as {head[:10]} onto andon/integration (it had moved since the attempt "
        "started: the merged result passes the full suite)"], said


def test_merge_onto_a_moved_branch_that_breaks_the_change_leaves_the_ref(tmp_path):
    """The attempt's mul uses `add`; meanwhile the integration branch renames `add` to
    `plus` (green on its own). The merge applies cleanly but the merged result fails the
    planted tests: merged_sha is None, the check fails with `fail-to-pass`, the ref is
    unchanged."""
    def mul_via_add(ctx):
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    total = 0\n"
              "    for _ in range(b):\n        total = add(total, a)\n    return total\n",
              append=True)

    root, runner, a, red_ids, packet = _passed_attempt(tmp_path, mul_via_add)
    ops = (root / "src/calc/ops.py").read_text()
    other = _advance_integration(root, tmp_path, {
        "src/calc/ops.py": ops.replace("def add(", "def plus("),
        "tests/test_ops.py": CALC_TESTS.replace("add", "plus")}, "rename add to plus")

    out = merge_attempt(runner.repo, runner.config, packet, a, red_ids,
                        lambda tree: {"tests.test_ops::test_plus", "tests.test_ops::test_div"},
                        tmp_path / "merge-ev")

    assert out.merged_sha is None
    assert (out.check.gate, out.check.status, out.check.layer) == ("merge", "fail", "code")
    assert {(f.kind, f.test_id) for f in out.check.findings} == {
        ("fail-to-pass", "tests.test_mul_p1::test_mul"),
        ("fail-to-pass", "tests.test_mul_p1::test_mul_zero")}
    assert all("NameError" in f.message for f in out.check.findings)
    assert rev(root, INTEGRATION) == other


# -- 19./20. requires and stale specs -----------------------------------------------------

def test_requires_runs_the_required_packet_first(tmp_path):
    """P1 requires P2: although P1 sorts first, P2 is claimed, merged, and only then P1 is
    claimed, based on P2's merge."""
    root = project(tmp_path, {"P1": mul_packet("P1", requires=["P2"]), "P2": sub_packet("P2")})
    runner = runner_for(root, {"P1": honest_mul, "P2": honest_sub})
    report = runner.run()

    assert report.merged == ["P2", "P1"]
    order = [(e["packet_id"], e["kind"]) for e in runner.store.events()
             if e["kind"] in ("claimed", "merged")]
    assert order == [("P2", "claimed"), ("P2", "merged"), ("P1", "claimed"), ("P1", "merged")]
    assert attempt(runner, "P1")["base_sha"] == attempt(runner, "P2")["merge_sha"]


def test_a_stale_spec_pin_is_never_run(tmp_path):
    """P1 pins docs/spec.md at a commit after which the spec changed: P1 goes to `stale`
    (the event says why) and is never claimed. P2 pins the same file at the current commit
    and runs normally."""
    root = project(tmp_path, {}, files={"docs/spec.md": "mul multiplies.\n"})
    old = rev(root, "HEAD")
    (root / "docs/spec.md").write_text("mul multiplies, and saturates at 100.\n")
    git(root, "commit", "-qam", "spec change")
    new = rev(root, "HEAD")
    for pid, pin, make in (("P1", old, mul_packet), ("P2", new, sub_packet)):
        md, plant = make(pid, spec_path="docs/spec.md", spec_commit=pin)
        d = root / "packets" / pid
        for rel, text in {"packet.md": md, **{f"plant/{k}": v for k, v in plant.items()}}.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "packets")

    calls = []
    runner = runner_for(root, lambda ctx: calls.append(ctx.packet.id) or (
        honest_mul if ctx.packet.id == "P1" else honest_sub)(ctx))
    report = runner.run()

    assert report.exit_status == EXIT_OK and report.merged == ["P2"]
    assert runner.store.packet("P1")["state"] == "stale"
    assert runner.store.attempts("P1") == [] and calls == ["P2"]
    ev = [e for e in runner.store.events("P1") if e["to_state"] == "stale"]
    assert len(ev) == 1 and "docs/spec.md changed since" in ev[0]["data"]["why"]
    assert not [e for e in runner.store.events("P1") if e["kind"] == "claimed"]


def test_a_stale_worktree_folder_from_an_earlier_repository_does_not_crash_the_run(tmp_path):
    """A repository re-created at the same path finds a kept worktree folder of the old one
    where its attempt 1 goes (worktree folders are named from the repository's path): the
    folder is not a worktree of this repository, so it is cleared and the run merges."""
    root = project(tmp_path, {"P1": mul_packet("P1")})
    runner = runner_for(root, honest_mul)
    stale = runner._worktree_path("P1", 1)
    stale.mkdir(parents=True)
    (stale / "leftover.txt").write_text("from another repository")
    try:
        assert runner.run().merged == ["P1"]
        assert not stale.exists()
    finally:
        shutil.rmtree(stale, ignore_errors=True)
