"""What every command shares: the two consoles (``out`` for results, ``err`` for errors and
notes; made on first use, so that ``--help`` loads no rich; tests swap them), opening the
repository, the configuration and a runner, and failing with a clear message and a stable
exit status (:mod:`andon.cli`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from ..errors import AndonError, UsageError
from ..exits import EXIT_BROKEN_PIPE, EXIT_USAGE
from ..safe_text import markup_safe, visible

if TYPE_CHECKING:
    from rich.console import Console

    from ..config import Config
    from ..git.repo import Repo
    from ..runner import Runner

    out: Console  # results, on standard output (see _console)
    err: Console  # errors and notes, on standard error

# Failure layers whose remedy lies outside the packet (what to fix, for the message).
NOT_THE_PACKET = {"verifier": "reviewer", "environment": "environment",
                  "harness": "cause in the evidence"}

def broken_pipe() -> NoReturn:
    """Exit EXIT_BROKEN_PIPE: the reader of standard output went away. What is still buffered
    goes to /dev/null, so it cannot fail again at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)


def _console(name: str) -> Console:
    """The console ``out`` or ``err``: the one a test set, else made now, once. Made on first
    use, not at import: rich costs ~20 ms to import, and ``--help`` (click's own printing)
    never needs it (tests/test_cli_start.py, benchmarks/cli_start.py)."""
    made = globals().get(name)
    if made is None:
        from rich.console import Console

        class _Out(Console):
            def on_broken_pipe(self) -> None:  # rich's own would exit 1: "line halted"
                broken_pipe()

        made = _Out(highlight=False) if name == "out" else Console(stderr=True,
                                                                    highlight=False)
        globals()[name] = made
    return made


def __getattr__(name: str) -> Console:
    # ``common.out`` and ``common.err`` before anything printed (PEP 562)
    if name in ("out", "err"):
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_repo(ctx: click.Context, require_commit: bool = True) -> Repo:
    from ..git.repo import Repo

    return Repo(Path(ctx.obj["repo"]), require_commit)


def fail(message: str, status: int = EXIT_USAGE) -> NoReturn:
    """Say ``message`` on standard error and exit ``status``. Under ``--json`` standard
    output gets one JSON document too, ``{"error": message, "exit_status": status}``: a
    script that parses what it asked for reads why there is nothing else. The message
    often quotes a path, a command or a packet's text: shown visible (:mod:`safe_text`)."""
    _console("err").print(f"[red]error:[/red] {markup_safe(message, lines=True)}",
                          markup=True, soft_wrap=True)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("as_json"):
        print(json.dumps({"error": message, "exit_status": status}), flush=True)
    sys.exit(status)


def repo_or_fail(ctx: click.Context, require_commit: bool = True) -> Repo:
    try:
        return open_repo(ctx, require_commit)
    except AndonError as exc:
        fail(str(exc))
        raise  # unreachable


def config_or_fail(repo: Repo) -> Config:
    from ..config import load_config

    try:
        return load_config(repo.root)
    except UsageError as exc:
        fail(str(exc))
        raise


def trees_in_temp(repo: Repo, config: Config, workers: int = 1) -> None:
    """Put the trees this command makes where ``[andon] temp_dir`` says (andon/tempdir.py):
    called before anything makes one (the worktree root's default is read from it)."""
    from ..tempdir import use

    try:
        use(repo, config.andon.temp_dir, workers)
    except UsageError as exc:
        fail(str(exc))


def check_command_path(repo: Repo, command: str | None, what: str) -> None:
    """A command runs at the root of the attempt's worktree: a relative script must be
    committed there (``git ls-files`` at the repository's root), or it exits 127 in every
    worktree. One that exists here but is untracked, or exists nowhere, is refused before
    anything runs (exit 2). A path out of the repository (``../x``) is not checked."""
    if not command:
        return
    try:
        first = shlex.split(command)[0]
    except (ValueError, IndexError):
        return
    if "/" not in first or first.startswith(("/", "$")):
        return
    rel = os.path.normpath(first)
    if rel.startswith(".."):
        return
    if repo.git("ls-files", "--", rel).strip():
        return
    here = (Path.cwd() / first).resolve()
    if here.exists():
        fail(f"{what} {command!r}: {first} is not committed, and the command runs in the "
             f"attempt's worktree, where it will not exist; use the absolute path {here}")
    fail(f"{what} {command!r}: {first} does not exist (not here, not committed in the "
         "repository, at whose root the command runs in the attempt's worktree); give the "
         "script's absolute path")


# first words /bin/sh reads as syntax, not as a program to start
_SHELL_SYNTAX = frozenset({"if", "for", "while", "until", "case", "time"})
_PLAIN_WORD = re.compile(r"[\w./+@%:,~-]+")


def check_command_starts(command: str, what: str) -> None:
    """The program a command starts must exist and be executable: one that cannot start exits
    126 or 127 in every worktree, blocking each packet given to it and halting the line on a
    typo. Checked here, before anything is claimed (exit 2): an absolute path that is missing,
    a folder or not executable; a bare name that is neither on PATH nor known to /bin/sh
    (``command -v``: builtins such as ``cd``). A first word that is not a plain word
    (assignments, ``$VAR``, a function definition, a subshell) and shell keywords are left to
    the shell; a relative path is check_command_path's."""
    try:
        words = shlex.split(command)
    except ValueError:
        return
    first = words[0] if words else ""
    # only a plain word names a program: `b() { …; }`, `(cmd &)`, `FOO=1 cmd`, `$X` are the
    # shell's to read
    if not _PLAIN_WORD.fullmatch(first) or first in _SHELL_SYNTAX:
        return
    if first.startswith("/"):
        path = Path(first)
        if not path.exists():
            fail(f"{what} {command!r}: {first} does not exist")
        if path.is_dir():
            fail(f"{what} {command!r}: {first} is a folder, not a program")
        if not os.access(path, os.X_OK):
            fail(f"{what} {command!r}: {first} is not executable (chmod +x {first})")
    elif "/" not in first and shutil.which(first) is None and subprocess.run(
            ["/bin/sh", "-c", 'command -v -- "$1" >/dev/null', "sh", first],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            check=False).returncode != 0:
        fail(f"{what} {command!r}: no program {first!r} on PATH; the command runs through "
             "/bin/sh -c in the attempt's worktree: give a script's absolute path")


def _status(repo: Repo, untracked: str) -> list[tuple[str, str]]:
    """(XY status, path) of each entry of ``git status`` with ``--untracked-files=untracked``."""
    fields = iter(repo.git("status", "--porcelain", "-z", f"--untracked-files={untracked}",
                           check=False).split("\0"))
    entries = []
    for entry in fields:
        if len(entry) > 3:
            entries.append((entry[:2], entry[3:]))
            if "R" in entry[:2] or "C" in entry[:2]:
                next(fields, None)  # a rename's source path follows as its own field
    return entries


def left_out_note(repo: Repo, owned: tuple[str, ...]) -> str | None:
    """The one line ``andon run`` prints when uncommitted work in the checkout is not part of
    the run, or None. ``owned``: paths or folder prefixes read from the checkout as they are
    (andon.toml, the packets folder), left out of it. Changed files and untracked ones are
    told apart, and a wholly untracked folder is one entry with its file count: an untracked
    ``.venv/`` is not '998 files with uncommitted changes' (issue 9's newcomer pass)."""
    def mine(path: str) -> bool:
        return any(path == o or path.startswith(o) for o in owned)
    every = [(xy, path) for xy, path in _status(repo, "all") if not mine(path)]
    if not every:
        return None
    changed = [path for xy, path in every if xy != "??"]
    loose = [path for xy, path in every if xy == "??"]
    parts = []
    if changed:
        parts.append(f"{len(changed)} changed ({_some(changed)})")
    if loose:
        names = []
        for xy, path in _status(repo, "normal"):
            if xy == "??" and not mine(path):
                inside = sum(p.startswith(path) for p in loose) if path.endswith("/") else 1
                names.append(f"{path} ({inside} files)" if path.endswith("/") else path)
        parts.append(f"untracked: {_some(names)}")
    return (f"note: uncommitted changes in {repo.root} are not part of this run, andon works "
            f"from commits only ({' and '.join(owned)} are read as they are): {'; '.join(parts)}")


def _some(items: list[str], shown: int = 3) -> str:
    more = f", … {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def make_runner(repo: Repo, config, agent_spec: str | None = None, command: str | None = None,
                reviewer_spec: str | None = None, reviewer_command: str | None = None,
                keep_worktrees: bool = False) -> Runner:
    from ..agents import make_agent
    from ..agents.command import CommandAgent
    from ..runner import Runner
    from ..state import open_store

    check_command_path(repo, command or config.agent.command, "--command")
    check_command_path(repo, reviewer_command or config.agent.reviewer_command,
                       "--reviewer-command")
    try:
        agent = make_agent(agent_spec or config.agent.default, command or config.agent.command,
                           config)
        rspec = reviewer_spec or config.agent.reviewer
        rcommand = reviewer_command or config.agent.reviewer_command
        if rspec:
            reviewer = make_agent(rspec, rcommand or command or config.agent.command, config)
        elif rcommand:
            reviewer = make_agent("command", rcommand, config)
        else:
            reviewer = agent
    except AndonError as exc:
        fail(str(exc))
    for built, what in ((agent, "--command"), (reviewer, "--reviewer-command")):
        if isinstance(built, CommandAgent):
            check_command_starts(built.command, what)
    try:
        store = open_store(repo, config)
    except AndonError as exc:  # unreachable, refused, newer schema, no psycopg: exit 2
        fail(str(exc))
    return Runner(repo, config, store,
                  lambda p, stage: reviewer if stage.startswith("review") else agent,
                  echo=echo, keep_worktrees=keep_worktrees)


def decision_runner(repo: Repo, config) -> Runner:
    from ..decisions import person_runner  # the one implementation (decisions.py)
    return person_runner(repo, config, echo=echo)


def echo(text: str) -> None:
    """A line of a run's progress on ``out``: it quotes gates' summaries and agents'
    claims, so it is shown visible (multi-line text keeps its lines)."""
    _console("out").print(visible(text, lines=True), soft_wrap=True, markup=False)


def who() -> str:
    import getpass
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "a person"
