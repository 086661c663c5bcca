"""Setting a project up and looking before running: ``init``, ``check``, ``doctor``, ``demo``."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import AndonError, ConfigError, Problem, UsageError
from ..exits import EXIT_USAGE
from ..safe_text import visible
from . import common
from .common import (
    fail,
    open_repo,
    repo_or_fail,
)

if TYPE_CHECKING:
    from ..agents import Agent
    from ..git.repo import Repo


@click.command()
@click.option("--force", is_flag=True, help="Overwrite an existing andon.toml.")
@click.pass_context
def init(ctx: click.Context, force: bool) -> None:
    """Write andon.toml with defaults for a pytest project and create packets/.

    The store (.andon/) is kept out of git through .git/info/exclude, so nothing andon
    writes ever shows in `git status`.
    """
    from .. import detect
    from ..config import CONFIG_NAME, DEFAULT_TOML, PACKETS_CONFTEST
    from ..state import open_store

    repo = repo_or_fail(ctx, require_commit=False)  # `git init && andon init` works
    path = repo.root / CONFIG_NAME
    if path.exists() and not force:
        fail(f"{path} exists; use --force to overwrite it")
    found = detect.detect(repo.root)
    path.write_text(detect.apply(DEFAULT_TOML, found), encoding="utf-8")
    packets = repo.root / "packets"
    packets.mkdir(exist_ok=True)
    if not (packets / "conftest.py").exists():
        (packets / "conftest.py").write_text(PACKETS_CONFTEST)
    open_store(repo).close()
    common.out.print(f"wrote {path}\n"
                     f"created {packets}/ (one folder per packet: packet.md, plant/), with a "
                     "conftest.py that keeps plain pytest runs from collecting planted tests\n"
                     f"the store is {repo.root / '.andon'}/ (excluded from git)",
                     markup=False, soft_wrap=True)
    for d in found:
        common.out.print(f"detected: {d.why}; wrote [test] {d.key} = {json.dumps(d.value)}",
                         markup=False, soft_wrap=True)
    if any(d.key == "setup" and d.value == detect.WHEEL_SETUP for d in found):
        common.out.print("note: [test] setup builds without network or build isolation: the "
                         "build backend (e.g. hatchling and hatch-vcs, or setuptools-scm) must "
                         "be installed for the test interpreter", markup=False, soft_wrap=True)
    if warning := _setup_cannot_start(repo):
        common.out.print(warning, markup=False, soft_wrap=True)
    if any(d.key == "setup" and d.value == detect.ISOLATED_SETUP for d in found):
        common.out.print("note: [test] setup builds with build isolation: pip needs the package "
                         "index when a clone is set up (pip's global configuration applies; "
                         "~/.config/pip does not: set-up runs with a fresh HOME)",
                         markup=False, soft_wrap=True)
    if note := detect.discovery_note(repo.root):
        common.out.print(note, markup=False, soft_wrap=True)
    common.out.print("next: write a packet, then `andon check` and `andon run`")


# pip's name for a module a detected set-up runs with `python -m`, where the two differ
_PIP_NAME = {"setuptools_scm": "'setuptools-scm>=8'"}


def _setup_cannot_start(repo: Repo) -> str | None:
    """A warning when the ``[test] setup`` just written runs ``python -m MOD`` and the test
    interpreter cannot import MOD: every run would stop at preflight (found on iniconfig's
    project venv, issue 9). None when it can, or when that cannot be asked."""
    from ..config import CONFIG_NAME, load_config
    from ..contain.interpreter import python_of

    try:
        config = load_config(repo.root)
    except AndonError:
        return None
    setup, python = config.test.setup, python_of(config.test_argv())
    if python is None or len(setup) < 3 or setup[:2] != ["python", "-m"]:
        return None
    mod = setup[2]
    ask = "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
    try:
        found = subprocess.run([python, "-I", "-B", "-c", ask, mod], capture_output=True,
                               timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    if found:
        return None
    return (f"warning: {python} cannot import {mod}, which [test] setup runs: every run "
            f"would stop at preflight. Install it there ({python} -m pip install "
            f"{_PIP_NAME.get(mod, mod)}), or change [test] setup in {CONFIG_NAME}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print problems as JSON.")
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Validate every packet and andon.toml; print each problem as file:line: message.

    A packet whose spec changed since its spec_commit is reported as stale. Problems in
    andon.toml do not stop the packets from being checked. Exits 2 if anything is wrong.
    Reads only; the store is not touched.
    """
    from ..config import CONFIG_NAME, Andon, load_config, packets_dir_despite_errors
    from ..packet import check_packets, solution_problems

    def report(problems: list[Problem], packets: list, places: list[str]) -> None:
        if as_json:  # always one JSON document, whatever went wrong
            common.out.print_json(json.dumps({
                "ok": not problems, "packets": [p.id for p in packets],
                "problems": [{"path": str(p.path), "line": p.line, "message": p.message}
                             for p in problems]}), ensure_ascii=True)
        else:
            for p in problems:
                # globs like src/[ab].py; a draft's text is an agent's
                common.out.print(visible(p), soft_wrap=True, markup=False)
            if problems:
                common.out.print(f"{len(problems)} problem(s) in {' and '.join(places)}",
                                 markup=False)
            else:
                names = (p.id + (" (draft)" if p.status == "draft" else "") for p in packets)
                common.out.print(visible(f"{len(packets)} packet(s) OK: {', '.join(names)}")
                                 if packets else "no packets yet: write one (docs/packets.md), "
                                 "then `andon check` again", markup=False)
        sys.exit(EXIT_USAGE if problems else 0)

    try:
        repo = open_repo(ctx)
    except AndonError as exc:
        if not as_json:
            fail(str(exc))
        report([Problem(Path(ctx.obj["repo"]), None, str(exc))], [], [])
    config, config_problems = None, []
    try:
        config = load_config(repo.root)
        packets_dir = config.andon.packets_dir
    except ConfigError as exc:
        config_problems = exc.problems or [Problem(repo.root / CONFIG_NAME, None, str(exc))]
        found = packets_dir_despite_errors(repo.root)
        packets_dir = found if found is not None else Andon().packets_dir
        if found is None:
            common.err.print(f"note: {CONFIG_NAME} could not be read; checked the packets in the "
                             f"default folder {packets_dir}/", markup=False, soft_wrap=True)
        else:
            common.err.print(f"note: {CONFIG_NAME} is invalid; checked the packets in "
                             f"{packets_dir}/ (tiers and stale specs are checked once it is valid)",
                             markup=False, soft_wrap=True)
    packets, problems = check_packets(repo.root / packets_dir, repo.root)
    # a reference solution the scope gate would reject (`andon validate`); `run` ignores it
    problems += [s for p in packets for s in solution_problems(p, packets_dir)]
    if config is not None:
        problems += _stale_problems(repo, config, packets, problems)
        problems += _clash_problems(repo, config, packets)
        if not as_json:
            for p in packets:
                if p.tests == "none":
                    why = ("it waits for a person (gate = \"human\")" if p.gate == "human"
                           else "gate = \"auto\" merges it on the other gates alone")
                    common.err.print(f"note: {p.id} has no tests (tests = \"none\"): nothing is "
                                     "red before the agent and no test must pass after it; "
                                     + why, markup=False, soft_wrap=True)
    problems = sorted(problems, key=lambda pr: (str(pr.path), pr.line or 0, pr.message))
    places = ([CONFIG_NAME] if config_problems else []) + ([f"{packets_dir}/"] if problems
                                                           else [])
    report(config_problems + problems, packets, places)


def _clash_problems(repo: Repo, config, packets) -> list[Problem]:
    """Planted (or hidden) test files that can never be collected with the suite at HEAD
    (gates/clash.py): the red gate would block them before any agent ran."""
    from ..gates import clash
    from ..packet import planted_test_files

    head = repo.rev_parse("HEAD")
    if head is None:
        return []
    problems = []
    for p in packets:
        for f in clash.of_packet(repo, head, config, repo.root, planted_test_files(p),
                                 sorted(p.hidden_files)):
            problems.append(Problem(p.source, None, f.message))
    return problems


def _no_agent(packet, stage: str) -> Agent:
    raise UsageError("`andon check` runs no agent")


def _stale_problems(repo: Repo, config, packets, found: list[Problem]) -> list[Problem]:
    """Packets whose spec changed since their ``spec_commit``: `andon run` refuses them as
    stale. The same test as the runner's (git only; the store is not opened). Also a tier
    andon.toml lacks, and (for a packet with no other problem in ``found``: its fields
    decide it) a packet without tests or an opt-in."""
    from ..gates.hermetic import committed_hidden, committed_hidden_problem
    from ..packet import tests_problem
    from ..runner import Runner

    # no store: only the runner's git test for stale specs is used
    runner = Runner(repo, config, None, _no_agent)  # type: ignore[arg-type]
    problems = []
    for p in packets:
        try:
            stages = config.stages_of(p.stages, p.tier)
        except AndonError as exc:
            problems.append(Problem(p.source, p.line_of("tier"), str(exc)))
        else:
            why = tests_problem(p, stages)
            if why and not any(f.path == p.source for f in found):
                problems.append(why)
        try:
            stale = runner._stale_reason(p)
        except AndonError as exc:  # git could not answer: say so, and check the rest
            problems.append(Problem(p.source, p.line_of("spec_commit"), str(exc)))
            stale = None
        if stale:
            problems.append(Problem(p.source, p.line_of("spec_commit"),
                                    f"stale (`andon run` refuses it until spec_commit names "
                                    f"the spec you read): {stale.rstrip()}"))
        # a committed hidden test is in every agent's worktree: `andon run` refuses it too
        problems += [committed_hidden_problem(repo.root / rel, rel)
                     for rel in committed_hidden(repo, "HEAD", p)]
    return problems


@click.command()
@click.option("--json", "as_json", is_flag=True, help="The findings as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Which agent CLIs are installed (on PATH), their versions, and whether their
    credential variables are set (values are never shown); whether the git on PATH is recent
    enough (2.38). Exits 0: it only reports."""
    from ..config import load_config
    from ..doctor import check_agents, check_git, render, report_json, trees_choice
    config = None
    try:
        config = load_config(Path(ctx.obj["repo"]))
    except AndonError as exc:  # no (valid) andon.toml here: report with the defaults
        if (Path(ctx.obj["repo"]) / "andon.toml").exists():
            common.err.print(f"note: {exc}; reporting without its [agents] settings",
                             markup=False, soft_wrap=True)
    checks, git = check_agents(config), check_git()
    trees = trees_choice(Path(ctx.obj["repo"]), config)
    if as_json:
        common.out.print_json(json.dumps(report_json(
            checks, git, trees if not isinstance(trees, str) else None)), ensure_ascii=True)
    else:
        render(common.out, checks, git, trees)


@click.command()
@click.option("--dir", "where", type=click.Path(path_type=Path), default=None,
              help="Build the demo here instead of a temporary directory (must not exist).")
@click.option("--agent", type=click.Choice(["scripted", "claude-code"]), default="scripted",
              help="claude-code: the packets go through the real Claude Code, against a "
                   "scripted model server on 127.0.0.1 (no account needed).")
@click.option("--serve", "serve_after", is_flag=True,
              help="Then serve the dashboard on it (andon serve), with B06 left awaiting "
                   "a person so that you can approve it in the page.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="With --serve: the port on 127.0.0.1 (0: a free one).")
@click.option("--experiment", is_flag=True,
              help="Instead: the example experiment, conditions A-H (staged prompt controls) "
                   "on the demo packets with seeded scripted agents, ending with the HTML "
                   "report (docs/experiments.md).")
@click.option("--plan", "plan_first", is_flag=True,
              help="Instead: a scripted interview of a feature request (decisions committed "
                   "on their own branch), then a scripted planner drafts packets, the checks "
                   "send one mistake back, the drafts are accepted and run (docs/plan.md).")
def demo(where: Path | None, agent: str, serve_after: bool, port: int,
         experiment: bool, plan_first: bool) -> None:
    """Build a small example project with packets and run it with scripted agents:
    honest ones merged, cheats caught, a repeated failure halting the line.

    Exits 0 only if every outcome is the expected one.
    """
    if experiment and serve_after:
        fail("--experiment and --serve do not combine: the experiment ends with its HTML "
             "report; `andon serve` shows a run's board")
    if plan_first:
        from ..demo.plan import run_plan_demo
        sys.exit(run_plan_demo(common.out, where))
    if experiment:
        from ..demo.experiment import run_experiment_demo
        sys.exit(run_experiment_demo(common.out, where))
    from ..demo import run_demo
    if serve_after:
        from ..web import missing
        if lacking := missing():
            fail(f"andon demo --serve needs the web extra: pip install 'andon[web]' "
                 f"(missing: {', '.join(lacking)})")
    root = where or Path(tempfile.mkdtemp(prefix="andon-demo-")) / "ledger"
    status = run_demo(common.out, root, agent, approve=not serve_after)
    if not serve_after or status:
        sys.exit(status)
    from .serve import run_dashboard
    run_dashboard(root, port, False, [])
