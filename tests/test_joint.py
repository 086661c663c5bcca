"""The suite gate's full run and the hermetic runs planned as one (gates/joint.py, issue 18):
a worktree that holds exactly the candidate commit does not run the suite a second time in the
same state; a worktree holding anything more (ignored, untracked, changed) still runs it there.

Real git repositories, real pytest subprocesses, the real Runner with scripted agents. Each
adversary writes what the worktree-only run exists for, and an honest agent must still merge.
"""

from __future__ import annotations

from pathlib import Path

from andon.gates.joint import strays
from andon.git.repo import Repo

from helpers import (
    MUL_TEST,
    config_toml,
    git,
    honest_mul,
    make_project,
    nest_deep,
    packet_md,
    runner_for,
    write,
)

LANES = config_toml(red_runs=1, hermetic_runs=3, add={"test": "jobs = 2\n"})


def project(tmp_path: Path, extra_paths: list[str] = (), config: str = LANES) -> Path:
    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", max_attempts=1,
                   allowed_paths=["src/calc/**", *extra_paths])
    return make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py": MUL_TEST})},
                        config=config)


def rows(runner) -> dict[str, dict]:
    att = runner.store.attempts("P1")[0]
    return {g["gate"]: g for g in runner.store.gate_results(att["id"])}


# -- strays: what the worktree holds beyond the commit ----------------------------------------

def test_strays_names_ignored_untracked_changed_and_deleted_paths_and_nothing_else(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text("*.log\n")
    (root / "a.py").write_text("a = 1\n")
    (root / "b.py").write_text("b = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    repo = Repo(root)
    head = repo.rev_parse("HEAD")
    wt = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(wt), head)
    assert strays(repo, wt, head) == []
    (wt / "x.log").write_text("ignored\n")
    (wt / "new.py").write_text("untracked\n")
    (wt / "cache").mkdir()
    (wt / "cache" / "c.log").write_text("ignored in a folder\n")
    (wt / "empty").mkdir()
    (wt / "a.py").write_text("a = 2\n")
    (wt / "b.py").unlink()
    assert strays(repo, wt, head) == ["a.py", "b.py", "cache/", "empty/", "new.py", "x.log"]


def test_strays_sees_a_change_of_mode_and_a_same_size_rewrite(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.py").write_text("a = 1\n")
    (root / "s.sh").write_text("echo\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    repo = Repo(root)
    head = repo.rev_parse("HEAD")
    wt = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(wt), head)
    (wt / "a.py").write_text("a = 2\n")  # same size, same second
    (wt / "s.sh").chmod(0o755)
    assert strays(repo, wt, head) == ["a.py", "s.sh"]


# -- the honest agent: one suite run fewer ----------------------------------------------------

def test_a_clean_worktree_runs_the_suite_once_in_a_fresh_clone_as_hermetic_1(tmp_path):
    """Nothing but the candidate in the worktree: the suite gate's full run is made in a fresh
    clone, first in the first lane, and the hermetic gate makes no run of its own — 4 full
    runs (suite = hermetic-1, hermetic-2, hermetic-3, random) in two lanes instead of 5."""
    root = project(tmp_path)
    runner = runner_for(root, honest_mul)
    assert runner.run().merged == ["P1"]
    r = rows(runner)
    suite, herm = r["suite"], r["hermetic"]
    assert suite["status"] == "pass" and "worktree_differs" not in suite["evidence"]
    assert suite["evidence"]["where"].startswith("a fresh clone, as hermetic-1")
    [run] = suite["evidence"]["runs"]
    assert run["name"] == "suite" and run["counts"]["passed"] == 4
    assert herm["status"] == "pass"
    assert herm["evidence"]["lanes"] == [["suite", "hermetic-2"],
                                         ["hermetic-3", "hermetic-random"]]
    runs = {x["name"]: x for x in herm["evidence"]["runs"]}
    assert list(runs) == ["hermetic-2", "hermetic-3", "hermetic-random"]
    assert run["cwd"] == runs["hermetic-2"]["cwd"] != runs["hermetic-3"]["cwd"]
    assert "hermetic-1 is the suite gate's run" in herm["summary"]
    assert "4 full-suite runs passed in 2 fresh clones" in herm["summary"]


# -- adversaries: what the worktree run is for is still caught -------------------------------

def test_a_test_that_passes_only_with_an_ignored_file_fails_in_a_fresh_clone(tmp_path):
    """mul reads a git-ignored file left in the worktree: the worktree differs (the file is
    named), the suite runs there and passes, every fresh clone lacks the file."""
    root = project(tmp_path)

    def reads_ignored(ctx):
        write(ctx, "src/calc/.gitignore", "_factor.txt\n")
        write(ctx, "src/calc/_factor.txt", "1\n")
        write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    import pathlib\n"
              "    f = pathlib.Path(__file__).with_name('_factor.txt')\n"
              "    return a * b * int(f.read_text())\n", append=True)

    runner = runner_for(root, reads_ignored)
    runner.run()
    r = rows(runner)
    assert r["suite"]["status"] == "pass"
    assert r["suite"]["evidence"]["where"] == "the worktree"
    assert r["suite"]["evidence"]["worktree_differs"] == ["src/calc/_factor.txt"]
    assert r["hermetic"]["status"] == "fail" and "run hermetic-1" in r["hermetic"]["summary"]


BREAKS_IF_PRESENT = '''\
from pathlib import Path

import calc


def test_no_stale_file():
    assert not (Path(calc.__file__).parent / "{name}").exists()
'''


def test_a_test_that_fails_only_with_an_ignored_file_present_fails_in_the_worktree(tmp_path):
    """The agent leaves an ignored file that breaks one of its own tests: the fresh clone would
    pass, so only the worktree run catches it — and it still runs there."""
    root = project(tmp_path, ["tests/test_stale.py"])

    def leaves_stale(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/.gitignore", "_stale.txt\n")
        write(ctx, "src/calc/_stale.txt", "x\n")
        write(ctx, "tests/test_stale.py", BREAKS_IF_PRESENT.format(name="_stale.txt"))

    runner = runner_for(root, leaves_stale)
    runner.run()
    suite = rows(runner)["suite"]
    assert (suite["status"], suite["failure_layer"]) == ("fail", "code")
    assert suite["evidence"]["worktree_differs"] == ["src/calc/_stale.txt"]
    assert {(f["kind"], f["test_id"]) for f in suite["evidence"]["findings"]} == {
        ("failing-test", "tests.test_stale::test_no_stale_file")}
    assert "hermetic" not in rows(runner)


def test_a_file_written_after_the_snapshot_keeps_the_run_in_the_worktree(tmp_path):
    """mul writes a file beside itself when called (not ignored, so untracked): the
    plain-first run leaves it in the worktree after the candidate was committed; the worktree
    no longer equals the candidate, so the full suite runs there, where the agent's own test
    sees the file and fails."""
    root = project(tmp_path, ["tests/test_stale.py"])
    writes_late = ("\n\ndef mul(a, b):\n    import pathlib\n"
                   "    pathlib.Path(__file__).with_name('_late.txt').write_text('x')\n"
                   "    return a * b\n")

    def agent(ctx):
        write(ctx, "src/calc/ops.py", writes_late, append=True)
        write(ctx, "tests/test_stale.py", BREAKS_IF_PRESENT.format(name="_late.txt"))

    runner = runner_for(root, agent)
    runner.run()
    suite = rows(runner)["suite"]
    assert suite["status"] == "fail"
    assert suite["evidence"]["worktree_differs"] == ["src/calc/_late.txt"]
    assert suite["evidence"]["runs"][0]["name"] == "suite"
    assert any(f["test_id"] == "tests.test_stale::test_no_stale_file"
               for f in suite["evidence"]["findings"])


SECOND_OF_THREE = '''\
from pathlib import Path

COUNT = Path(__file__).with_name("_runs.txt")


def test_not_on_the_second_run():
    n = len(COUNT.read_text()) if COUNT.exists() else 0
    COUNT.write_text("x" * (n + 1))
    assert n + 1 != 2
'''


def test_a_test_that_fails_only_on_the_second_of_three_runs_is_caught(tmp_path):
    """A test that counts its runs in a file beside itself and fails only on the second: the
    plain-first run in the worktree is its first, so the worktree differs and the worktree's
    full run (its second) fails it. (In a clone, the second run of every lane sees it too.)"""
    root = project(tmp_path, ["tests/test_count.py"])

    def agent(ctx):
        honest_mul(ctx)
        write(ctx, "tests/test_count.py", SECOND_OF_THREE)

    runner = runner_for(root, agent)
    runner.run()
    suite = rows(runner)["suite"]
    assert suite["status"] == "fail"
    assert {(f["kind"], f["test_id"]) for f in suite["evidence"]["findings"]} == {
        ("failing-test", "tests.test_count::test_not_on_the_second_run")}


def test_a_failing_suite_run_in_the_clone_fails_the_suite_gate(tmp_path):
    """A clean worktree whose candidate breaks an old test: the joint plan's suite run (in a
    fresh clone) is judged by the suite gate as ever (pass-to-pass, layer code), and the
    hermetic gate does not run."""
    root = project(tmp_path)

    def breaks_add(ctx):
        honest_mul(ctx)
        write(ctx, "src/calc/ops.py", "\n\ndef add(a, b):\n    return a - b\n", append=True)

    runner = runner_for(root, breaks_add)
    runner.run()
    r = rows(runner)
    assert (r["suite"]["status"], r["suite"]["failure_layer"]) == ("fail", "code")
    assert r["suite"]["evidence"]["where"].startswith("a fresh clone")
    assert "pass-to-pass" in {f["kind"] for f in r["suite"]["evidence"]["findings"]}
    assert "hermetic" not in r


def test_one_lane_runs_the_joint_plan_in_one_clone(tmp_path):
    """jobs = 1: suite, hermetic-2, hermetic-3 and the random run one after the other in one
    fresh clone (a test failing only on its second, third or fourth run there is seen)."""
    root = project(tmp_path, config=config_toml(red_runs=1, hermetic_runs=3,
                                                add={"test": "jobs = 1\n"}))
    runner = runner_for(root, honest_mul)
    assert runner.run().merged == ["P1"]
    herm = rows(runner)["hermetic"]
    assert herm["evidence"]["lanes"] == [["suite", "hermetic-2", "hermetic-3",
                                          "hermetic-random"]]
    assert "4 full-suite runs passed in 1 fresh clone (" in herm["summary"]


# -- red: the last run at the same time, in a fresh clone ------------------------------------

GREEN_ON_SECOND_RUN = '''\
from pathlib import Path

MARK = Path(__file__).with_name("_red_ran.txt")


def test_mul():
    seen = MARK.exists()
    MARK.write_text("x")
    if seen:  # green once a run before it left the mark, without touching calc
        return
    from calc.ops import mul
    assert mul(2, 3) == 6
'''


def red_row(runner) -> dict:
    att = runner.store.attempts("P1")[0]
    return next(g for g in runner.store.gate_results(att["id"]) if g["gate"] == "red")


def test_red_runs_its_last_run_in_a_fresh_clone_at_the_same_time(tmp_path):
    """red_runs = 3, jobs = 2: red-1 and red-2 one after the other in the worktree, red-3 in a
    fresh clone of the plant commit beside them; all three red, the honest change merges."""
    root = project(tmp_path, config=config_toml(red_runs=3, hermetic_runs=1,
                                                add={"test": "jobs = 2\n"}))
    runner = runner_for(root, honest_mul)
    assert runner.run().merged == ["P1"]
    red = red_row(runner)
    runs = {r["name"]: r for r in red["evidence"]["runs"]}
    assert list(runs) == ["red-1", "red-2", "red-3"]
    assert runs["red-1"]["cwd"] == runs["red-2"]["cwd"] != runs["red-3"]["cwd"]
    # the planted module does not import on the base: the same red outcome in each run
    assert all(r["counts"] == runs["red-1"]["counts"] for r in runs.values())
    assert all(r["counts"]["passed"] == 0 for r in runs.values())
    assert red["status"] == "pass" and "red in 3 of 3 runs" in red["summary"]


def test_a_planted_test_green_on_its_second_run_in_the_same_tree_is_still_flaky(tmp_path):
    """A planted test that passes once it finds a file its first run left: red-2 in the
    worktree sees it (red-3, in a fresh clone, does not): flaky, layer specification."""
    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", max_attempts=1,
                   allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo",
                        {"P1": (md, {"tests/test_mul_p1.py": GREEN_ON_SECOND_RUN})},
                        config=config_toml(red_runs=3, add={"test": "jobs = 2\n"}))
    runner = runner_for(root, honest_mul)
    runner.run()
    red = red_row(runner)
    assert (red["status"], red["failure_layer"]) == ("fail", "specification")
    assert {f["kind"] for f in red["evidence"]["findings"]} == {"flaky"}
    assert "failed, passed, failed" in red["summary"]


def test_strays_of_a_commit_nested_deeper_than_the_recursion_limit_is_an_answer(tmp_path,
                                                                                deep_ok):
    """A candidate may track a file 1,500 folders deep (the agent committed it): the walk for
    ``.git`` names below the top still answers — nothing when the worktree is the commit, the
    path when a ``.git`` hides in the deep folder (it used to raise RecursionError)."""
    root = tmp_path / "r"
    nest_deep(root / "deep", 1500)
    git(root, "init", "-q")
    leaf = Path(root / "deep", *["d"] * 1500)
    (leaf / "f.txt").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "deep")
    repo = Repo(root)
    head = repo.rev_parse("HEAD")
    wt = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(wt), head)
    assert strays(repo, wt, head) == []
    hidden = Path(wt / "deep", *["d"] * 1500, ".git")
    hidden.write_text("gitdir: /elsewhere\n")
    assert strays(repo, wt, head) == ["deep/" + "d/" * 1500 + ".git"]
