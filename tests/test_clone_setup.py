"""`[test] setup` (issue 9): a project whose version file is written by its build (hatch-vcs,
git-ignored `_version.py`) is set up in every clone before its tests, timed, cached, and a
failing set-up is an environment problem with its output. `andon init` writes the setting.
Real git repositories, a real offline wheel build, real pytest runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from andon.config import DEFAULT_TOML
from andon.detect import (
    EXT_SETUP,
    ISOLATED_SETUP,
    SCM_SETUP,
    WHEEL_SETUP,
    Detected,
    apply,
    detect,
    setup_step,
)
from andon.exits import EXIT_OK, EXIT_PREFLIGHT

from helpers import andon, git, packet_md, runner_for, write

needs_hatch = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("hatchling", "hatch_vcs")),
    reason="hatchling and hatch-vcs must be installed for an offline build")

PYPROJECT = """\
[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "verpkg"
dynamic = ["version"]

[tool.hatch.version]
source = "vcs"

[tool.hatch.build.hooks.vcs]
version-file = "src/verpkg/_version.py"

[tool.hatch.build.targets.wheel]
packages = ["src/verpkg"]
"""
TRIPLE = "from verpkg import triple\n\n\ndef test_triple():\n    assert triple(2) == 6\n"


def vcs_project(root: Path, setup: list[str] | None = None) -> Path:
    """A hatch-vcs project whose _version.py is ignored; `andon init` writes andon.toml
    (its detected setup replaced by ``setup`` when given), with one packet."""
    files = {"pyproject.toml": PYPROJECT, ".gitignore": "src/verpkg/_version.py\n__pycache__/\n",
             "src/verpkg/__init__.py": "from ._version import __version__\n\n\n"
                                       "def double(x):\n    return 2 * x\n",
             "tests/test_verpkg.py": "import verpkg\n\n\ndef test_version():\n"
                                     "    assert verpkg.__version__\n\n\ndef test_double():\n"
                                     "    assert verpkg.double(2) == 4\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    r = andon(root, "init")
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = root / "andon.toml"
    text = cfg.read_text().replace("red_runs = 3", "red_runs = 1").replace(
        "hermetic_runs = 3", "hermetic_runs = 1")
    if setup is not None:
        text = text.replace(f"setup = {json.dumps(WHEEL_SETUP)}", f"setup = {json.dumps(setup)}")
    cfg.write_text(text)
    d = root / "packets" / "P1"
    (d / "plant" / "tests").mkdir(parents=True)
    (d / "packet.md").write_text(packet_md("P1", "triple", "verpkg.triple triples.",
                                           allowed_paths=["src/verpkg/**"]))
    (d / "plant" / "tests" / "test_triple.py").write_text(TRIPLE)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def honest_triple(ctx) -> str:
    write(ctx, "src/verpkg/__init__.py", "\n\ndef triple(x):\n    return 3 * x\n", append=True)
    return "done"


@needs_hatch
def test_init_detects_hatch_vcs_and_the_honest_agent_is_merged(tmp_path):
    """init writes [test] setup from [tool.hatch.version]; preflight, red, suite and hermetic
    run after it; the first clone builds, later clones with the same inputs reuse the
    generated _version.py from the cache; the honest agent is merged with no hand edits."""
    root = vcs_project(tmp_path / "repo")
    assert f"setup = {json.dumps(WHEEL_SETUP)}" in (root / "andon.toml").read_text()
    runner = runner_for(root, honest_triple)
    report = runner.run()
    assert (report.exit_status, report.merged) == (EXIT_OK, ["P1"]), report.message
    [log] = (root / ".andon" / "evidence" / "_preflight").glob("*/preflight.setup.log")
    assert "Error" not in log.read_text()
    rows = {g["gate"]: g for g in runner.store.gate_results(
        runner.store.attempts("P1")[0]["id"])}
    red = rows["red"]["evidence"]["runs"][0]["setup"]
    # the preflight clone built it; the worktree (same inputs) got the files from the cache
    assert red["cached"] is True and "src/verpkg/_version.py" in red["files"]
    herm = rows["hermetic"]["evidence"]["runs"][0]["setup"]
    assert herm["cached"] is True and "src/verpkg/_version.py" in herm["files"]
    assert not (root / "src" / "verpkg" / "_version.py").exists()  # the user's tree untouched


def test_without_setup_preflight_fails_and_a_failing_setup_is_environment(tmp_path):
    """No setup: the fresh clone cannot import verpkg (the old failure). A set-up command that
    fails: preflight errors with layer environment, the set-up's output and exit status."""
    root = vcs_project(tmp_path / "a", setup=[])
    report = runner_for(root, honest_triple).run()
    assert report.exit_status == EXIT_PREFLIGHT
    pf = report.preflight
    assert (pf.status, pf.layer) == ("fail", "environment")
    assert "No module named 'verpkg._version'" in pf.summary and "[test] setup" in pf.summary
    assert pf.findings[0].kind == "missing-module"

    root = vcs_project(tmp_path / "b", setup=[
        "python", "-c", "import sys; print('error: no build backend'); sys.exit(3)"])
    report = runner_for(root, honest_triple).run()
    pf = report.preflight
    assert (report.exit_status, pf.status, pf.layer) == (EXIT_PREFLIGHT, "error",
                                                         "environment")
    assert "[test] setup" in pf.summary and "exit status 3" in pf.summary
    assert "error: no build backend" in pf.summary
    # and it names the fix: where the whole output is, and the setting that changes the step
    assert "andon.toml" in pf.summary and str(pf.runs[0].log_path) in pf.summary
    assert pf.runs[0].setup["exit_status"] == 3
    assert Path(pf.runs[0].log_path).read_text().strip() == "error: no build backend"


def test_an_isolated_build_that_cannot_fetch_its_backend_names_the_offline_fix(tmp_path):
    """The isolated build init writes when the venv lacks the backend needs the package index;
    where it cannot be reached (here: an index that does not exist) preflight is an environment
    error whose summary names the fix — the backend installed for the test interpreter and
    `andon init --force` — not only pip's error line."""
    nowhere = (tmp_path / "no-index").as_uri()
    setup = [*ISOLATED_SETUP[:-3], "--index-url", nowhere, *ISOLATED_SETUP[-3:]]
    root = vcs_project(tmp_path / "a", setup=setup)
    report = runner_for(root, honest_triple).run()
    pf = report.preflight
    assert (report.exit_status, pf.status, pf.layer) == (EXIT_PREFLIGHT, "error",
                                                         "environment")
    assert "[test] setup" in pf.summary and "hatchling" in pf.summary
    assert "fetches the build backend from the package index" in pf.summary
    assert "andon init --force" in pf.summary
    # the offline build failing is not told this (it fetches nothing)
    root = vcs_project(tmp_path / "b", setup=[
        "python", "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-such-flag"])
    pf = runner_for(root, honest_triple).run().preflight
    assert pf.status == "error" and "package index" not in pf.summary


def test_detect_reads_the_build_declarations(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n')
    assert setup_step(tmp_path).value == WHEEL_SETUP
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools_scm]\nversion_file = "src/x/_version.py"\n')
    assert setup_step(tmp_path).value == SCM_SETUP
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert setup_step(tmp_path) is None
    (tmp_path / "setup.py").write_text("from setuptools import setup, Extension\n"
                                       "setup(ext_modules=[Extension('m', ['m.c'])])\n")
    assert setup_step(tmp_path).value == EXT_SETUP
    assert [d.key for d in detect(tmp_path)] == ["setup"]


def test_apply_writes_keys_into_the_test_table_and_stays_valid_toml():
    import tomllib
    text = apply(DEFAULT_TOML, [Detected("setup", ["python", "x"], "why"),
                                Detected("command", ["/v/bin/python", "-m", "pytest"], "venv")])
    doc = tomllib.loads(text)
    assert doc["test"]["setup"] == ["python", "x"]
    assert doc["test"]["command"] == ["/v/bin/python", "-m", "pytest"]
    assert "# detected: why" in text
    assert doc["gates"] == tomllib.loads(DEFAULT_TOML)["gates"]


def test_a_set_up_that_cannot_start_or_times_out_names_the_setting(tmp_path):
    from andon import clone_setup
    from andon.config import load_config

    root = vcs_project(tmp_path / "c", setup=["no-such-build-tool-4f1c"])
    config = load_config(root)
    r = clone_setup.ensure(config, root, tmp_path / "ev", "preflight")
    assert r is not None and "could not start" in r.problem
    assert "[test] setup in andon.toml" in r.problem

    config.test.setup = ["python", "-c", "import time; time.sleep(30)"]
    config.test.setup_timeout_s = 0.5
    r = clone_setup.ensure(config, root, tmp_path / "ev", "preflight")
    assert r is not None and "timed out after 0.5 s" in r.problem
    assert "[test] setup_timeout_s" in r.problem


def test_a_set_up_in_a_clone_of_agent_code_is_never_kept_for_other_clones(tmp_path):
    """The cache's key names the set-up inputs, not every file a build reads (an extension's
    C source the agent changed, a file the build imports). Kept from a clone of agent code,
    its output would be copied into a later clone of the base — the next preflight or red
    judged against the agent's build. A set-up in a run of agent code reads the cache and
    writes nothing to it; one of trusted code (the base, a merge) keeps its output."""
    from andon import clone_setup
    from andon.config import load_config

    setup = ["python", "-c", "open('built.txt', 'w').write(open('src/verpkg/__init__.py')"
                             ".read())"]
    root = vcs_project(tmp_path / "c", setup=setup)
    config = load_config(root)
    ev = root / ".andon" / "evidence" / "P1" / "1"
    ev.mkdir(parents=True)
    cache = root / ".andon" / "setup-cache"
    r = clone_setup.ensure(config, root, ev, "suite", "digest", agent_code=True)
    assert r is not None and r.problem is None and (root / "built.txt").exists()
    assert not cache.exists() or not any(cache.iterdir())
    (root / "built.txt").unlink()
    r = clone_setup.ensure(config, root, ev, "preflight", "digest")
    assert r is not None and r.problem is None and not r.cached
    assert [p.name for p in cache.iterdir() if (p / "files.json").is_file()] == [r.key]
