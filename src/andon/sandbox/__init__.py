"""The agent sandbox (issue 11): what an agent stage's process can reach.

``[agent] sandbox`` asks for a level — ``"auto"`` (default: the strongest this machine
gives), ``"none"``, ``"fs"`` or ``"fs+net"`` — and :func:`level_for` answers with the level
achieved, or refuses (``InvalidValue``, so ``andon run`` exits 2 with nothing claimed)
naming what is missing. :func:`plan_for` builds one stage's :class:`~.plan.Plan`; the
modules: ``probe`` (what the machine can do, once per process), ``plan`` (the bubblewrap
mounts), ``limits`` (cgroup caps on memory and processes, watched), ``launch`` (the script
that enters them before exec). See docs/sandbox.md.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidValue
from .installs import installation_of, tools_for
from .plan import Plan
from .probe import Capabilities, capabilities

if TYPE_CHECKING:
    from ..config import Config

LEVELS = ("none", "fs", "fs+net")
# the project's virtualenv, when it lives in the checkout: the agent runs the tests with it
VENV_NAMES = (".venv", "venv", ".tox")


def level_for(config: Config | None, in_process: bool = False) -> str:
    """The level every agent stage of this run gets: ``"none"``, ``"fs"`` or ``"fs+net"``.

    ``auto`` takes the strongest the machine gives: ``fs+net`` when ``[agent] network`` is
    ``"allow"`` (the default: the model API and ``allow_hosts`` through andon's proxy) or
    ``"off"`` (no network), ``fs`` with ``"on"``; ``in_process`` (the scripted adapter runs
    inside andon) can only be ``none``.

    Raises:
        InvalidValue: the asked level cannot be had here or with these settings; the
            message names what is missing and how to get it, or to lower the level.
    """
    asked = config.agent.sandbox if config is not None else "auto"
    cut = config is None or config.agent.network in ("allow", "off")
    if asked == "none":
        return "none"
    if in_process:
        if asked == "auto":
            return "none"
        raise InvalidValue(f'[agent] sandbox = "{asked}" cannot contain the scripted adapter: '
                           'it runs inside andon; use a command agent, or sandbox = "none"')
    caps = capabilities()
    if asked == "auto":
        return caps.best(cut)
    if asked == "fs+net" and not cut:
        raise InvalidValue('[agent] sandbox = "fs+net" needs [agent] network = "allow" or '
                           '"off" (the agent has its own network namespace); not "on", or '
                           'sandbox = "fs"')
    ok, why = caps.works(asked)
    if not ok:
        raise InvalidValue(f'[agent] sandbox = "{asked}" in andon.toml, but this machine '
                           f'cannot give it: {why}. Install what is missing (see `andon '
                           f'doctor`), or lower it explicitly: sandbox = "none"')
    return asked


def plan_for(level: str, config: Config, repo_root: Path, worktree: Path,
             hidden: Iterable[Path] = (), readonly: Iterable[Path] = (),
             writable: Iterable[Path] = (), locked: Iterable[Path] = ()) -> Plan:
    """One stage's plan at ``level`` (at ``"none"`` only its caps apply). ``repo_root``: the user's
    checkout, hidden (with ``hidden``); the project's venv inside it and ``[agent]
    sandbox_paths`` are bound back (``ro:`` / ``rw:`` prefixes, relative paths from the
    checkout); ``locked``: paths in the worktree made read-only. Paths are resolved. At
    ``fs+net`` with ``network = "allow"`` the plan has ``allow_hosts`` (the adapter adds
    its model API's with ``Plan.with_hosts``)."""
    ro = [repo_root / v for v in VENV_NAMES if (repo_root / v).is_dir()]
    rw: list[Path] = []
    for spec in config.agent.sandbox_paths:
        mode, _, name = spec.partition(":")
        p = Path(os.path.expanduser(name))
        (rw if mode == "rw" else ro).append(p if p.is_absolute() else repo_root / p)
    r = _real
    allow = (tuple(config.agent.allow_hosts)
             if level == "fs+net" and config.agent.network == "allow" else None)
    return Plan(level, r(worktree), tuple(map(r, (repo_root, *hidden))),
                tuple(map(r, (*ro, *readonly))), tuple(map(r, (*rw, *writable))),
                tuple(map(r, locked)), memory_mb=config.agent.memory_mb,
                max_processes=config.agent.max_processes, allow_hosts=allow)


def stage_plan(level: str, config: Config, repo_root: Path, stage: str, wt: Path,
               worktree_root: Path, prompt_file: Path, review_file: Path | None,
               planted: list[str], command: str | None = None) -> Plan:
    """The plan of one stage of an attempt: the checkout (with ``.andon/``) and the worktree
    root hidden; the prompt's folder read-only, and so are the files in the checkout that the
    agent's ``command`` names (``--command "$PWD/agent.sh"``: it must run, and must not
    rewrite itself for the next stage), and the installations the command and the project's
    test interpreter run from, wherever they live (``installs.tools_for``); during
    ``implement`` the worktree's ``.git`` and the ``planted`` files (repo-relative) locked
    read-only; a reviewer (``review_file`` set) sees
    its export ``wt`` read-only, with the review file's folder writable."""
    locked = [wt / ".git", *(wt / p for p in planted)] if stage == "implement" else []
    writable: list[Path] = []
    if review_file is not None:  # the export lives beside the review file: bound on top
        writable, locked = [review_file.parent], [wt]
    tools = (tools_for(command, os.environ.get("PATH"), config.test.command)
             if level != "none" else [])
    return plan_for(level, config, repo_root, wt, hidden=[worktree_root],
                    readonly=[prompt_file.parent, *command_files(command, repo_root), *tools],
                    writable=writable, locked=locked)


def command_files(command: str | None, repo_root: Path) -> list[Path]:
    """The files inside ``repo_root`` that ``command`` names by absolute path (the words
    /bin/sh would split it into); [] for a command it cannot split. Never a file below
    ``.andon/`` (the store, evidence, other attempts) or a ``hidden`` folder (the packets'
    hidden tests): naming one in the command does not show it to the agent."""
    try:
        words = shlex.split(command) if command else []
    except ValueError:
        return []
    root = _real(repo_root)
    found = []
    for p in map(Path, words):
        if not (p.is_absolute() and p.is_file() and _real(p).is_relative_to(root)):
            continue
        parts = _real(p).relative_to(root).parts
        if parts[0] != ".andon" and "hidden" not in parts[:-1]:
            found.append(p)
    return found


def _real(p: Path) -> Path:
    return Path(os.path.realpath(p))


__all__ = ["LEVELS", "Capabilities", "Plan", "capabilities", "installation_of", "level_for",
           "plan_for", "stage_plan"]
