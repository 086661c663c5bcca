"""``andon doctor``: which agent CLIs andon can start here, their versions, credentials.

For each adapter of an agent CLI (claude-code, codex, aider, gemini): whether its executable
is on PATH (the PATH the adapter would give the agent), what ``<executable> --version``
prints (in its own process group, 10 s at most, with the adapter's clean environment),
and which of its credential variables and ``env_passthrough`` names are set. Values are
never read out, only whether a variable is set and non-empty. Warnings (``AgentCheck.warnings``)
for what would stop the agent before it does anything: running as root with permission args
the CLI refuses as root (Claude Code's bypass flag), no credentials (no variable set and no
login file), a version older than the one the adapter is tested with, a base-URL variable
set here that andon would not pass to the agent. Also the price library
andon uses when an agent reports no cost, and whether this machine can run a process without
network (``netless.available()``: test runs with ``[test] network = "off"``, agents with
``[agent] network = "off"``), and the git on PATH (:func:`check_git`: the squash merge needs
``git merge-tree --write-tree``, git 2.38 or later). Reads only; changes nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .agents import EXTERNAL, external_class
from .agents.claude_code import ROOT_BYPASS_ENV, refused_as_root
from .agents.external import clean_env, tail_text
from .agents.process import run_process
from .config import Config
from .contain import netless
from .tempdir import Choice
from .usage import PRICES_LIBRARY, library_version

VERSION_TIMEOUT_S = 10.0
LOGINS = {"claude-code": "$HOME/.claude", "codex": "$CODEX_HOME (default $HOME/.codex)",
          "gemini": "$HOME/.gemini"}
# The file a CLI's own login leaves: with none of them and no credential variable, the agent
# stops at its first request.
LOGIN_FILES = {"claude-code": "$HOME/.claude/.credentials.json",
               "codex": "$CODEX_HOME/auth.json",
               "gemini": "$HOME/.gemini/oauth_creds.json"}
# Variables that point a CLI at another API endpoint: set here, they only reach the agent
# through env_passthrough.
BASE_URLS = {"claude-code": ("ANTHROPIC_BASE_URL",), "codex": ("OPENAI_BASE_URL",),
             "gemini": ("GOOGLE_GEMINI_BASE_URL",),
             "aider": ("OPENAI_API_BASE", "ANTHROPIC_BASE_URL")}


# `git merge-tree --write-tree` (merge.py, git/repo.py) arrived in git 2.38.0.
GIT_MIN = (2, 38)


@dataclass
class GitCheck:
    """The git on PATH: ``version`` as ``git --version`` prints it (None if there is no git
    or it failed), ``problem`` what stops andon with it (None if it is recent enough)."""

    path: str | None
    version: str | None = None
    problem: str | None = None


@dataclass
class AgentCheck:
    """What doctor found for one adapter. ``credentials`` maps a variable name to whether
    it is set; ``version`` is the first line ``--version`` printed (None if not installed or
    it failed: then ``problem`` says why)."""

    adapter: str
    executable: str
    path: str | None
    version: str | None = None
    problem: str | None = None
    credentials: dict[str, bool] = field(default_factory=dict)
    passthrough: dict[str, bool] = field(default_factory=dict)
    docs: str = ""
    warnings: list[str] = field(default_factory=list)


def check_agents(config: Config | None = None, environ: Mapping[str, str] | None = None,
                 timeout_s: float = VERSION_TIMEOUT_S, euid: int | None = None
                 ) -> list[AgentCheck]:
    """One :class:`AgentCheck` per CLI adapter. ``euid``: the user id to judge root by
    (default this process's effective id)."""
    environ = dict(os.environ if environ is None else environ)
    euid = os.geteuid() if euid is None else euid
    checks = []
    for name in EXTERNAL:
        cls = external_class(name)
        settings = config.agents.get(name) if config is not None else None
        passthrough = list(settings.env_passthrough or []) if settings else []
        env = clean_env([*cls.credential_env, *passthrough], environ)
        path = _which(cls.executable, env.get("PATH", os.defpath))
        c = AgentCheck(name, cls.executable, path, docs=cls.docs,
                       credentials={k: bool(environ.get(k)) for k in cls.credential_env},
                       passthrough={k: bool(environ.get(k)) for k in passthrough})
        if path:
            c.version, c.problem = _version(path, env, timeout_s)
            c.warnings = _warnings(name, cls, settings, env, environ, c, euid)
        checks.append(c)
    return checks


def check_git(environ: Mapping[str, str] | None = None,
              timeout_s: float = VERSION_TIMEOUT_S) -> GitCheck:
    """Find ``git`` on ``environ``'s PATH (default: this process's) and judge its version
    against :data:`GIT_MIN`."""
    environ = dict(os.environ if environ is None else environ)
    path = _which("git", environ.get("PATH", os.defpath))
    if path is None:
        return GitCheck(None, problem="no `git` on PATH: andon needs git 2.38 or later")
    c = GitCheck(path)
    c.version, c.problem = _version(path, environ, timeout_s)
    have = _version_tuple(c.version or "")
    if have and have[:2] < GIT_MIN:
        need = ".".join(map(str, GIT_MIN))
        c.problem = (f"git {'.'.join(map(str, have))} is older than {need}: andon's squash "
                     f"merge uses `git merge-tree --write-tree` (git {need} and later); "
                     "upgrade git")
    return c


def _warnings(name: str, cls, settings, env: dict[str, str], environ: dict[str, str],
              c: AgentCheck, euid: int) -> list[str]:
    out = []
    if name == "claude-code":
        args = (settings.permission_args if settings and settings.permission_args is not None
                else None)
        if args is not None and refused_as_root(args, euid, env):
            out.append(f"you are root and permission_args {args} ask for bypass mode, which "
                       "Claude Code refuses as root (it exits 1 before doing anything): drop "
                       "the setting (andon's default as root is `--permission-mode acceptEdits "
                       f"--allowedTools=Bash`), or in a disposable container pass "
                       f"{' or '.join(ROOT_BYPASS_ENV)}=1 through env_passthrough")
    if cls.credential_env and not any(environ.get(k) for k in cls.credential_env):
        login = LOGIN_FILES.get(name)
        home = environ.get("HOME", "")
        dirs = {"$HOME": home, "$CODEX_HOME": environ.get("CODEX_HOME") or f"{home}/.codex"}
        file = login and next((login.replace(k, v, 1) for k, v in dirs.items()
                               if login.startswith(k)), None)
        if not (file and os.path.isfile(file)):
            where = f" and there is no login file ({login})" if login else ""
            out.append(f"no credentials: none of {', '.join(cls.credential_env)} is set{where}"
                       " — the agent would stop at its first request")
    if name == "gemini" and environ.get("GEMINI_API_KEY") and not _gemini_auth(environ):
        out.append("GEMINI_API_KEY is set but no auth method is chosen in "
                   "$HOME/.gemini/settings.json (security.auth.selectedType, e.g. "
                   '"gemini-api-key"): Gemini CLI 0.61 exits 41, "Invalid auth method '
                   'selected.", before doing anything')
    known = getattr(cls, "tested_version", None)
    have = _version_tuple(c.version or "")
    tested = _version_tuple(known) if known else None
    if have and tested and have < tested:
        out.append(f"version {'.'.join(map(str, have))} is older than {known}, the version "
                   f"andon's adapter is tested with ({cls.docs}): its flags or output may "
                   "differ; upgrade it")
    for var in BASE_URLS.get(name, ()):
        if environ.get(var) and var not in env:
            out.append(f"{var} is set here but andon does not pass it to the agent: add it to "
                       f"[agents.{name}] env_passthrough")
    return out


def _gemini_auth(environ: dict[str, str]) -> str | None:
    """The auth method the Gemini CLI's user settings choose (``security.auth.selectedType``,
    older: ``selectedAuthType``), or None."""
    import json
    path = os.path.join(environ.get("HOME", ""), ".gemini", "settings.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    auth = (data.get("security") or {}).get("auth") or {}
    return (auth.get("selectedType") if isinstance(auth, dict) else None) \
        or data.get("selectedAuthType")


def _version_tuple(text: str) -> tuple[int, ...] | None:
    m = re.search(r"\d+(?:\.\d+)+", text)
    return tuple(int(x) for x in m.group().split(".")) if m else None


def _which(exe: str, path: str) -> str | None:
    return shutil.which(exe, path=path)


def _version(path: str, env: dict[str, str], timeout_s: float) -> tuple[str | None, str | None]:
    with tempfile.TemporaryDirectory(prefix="andon-doctor-") as tmp:
        t = Path(tmp)
        (t / "stdin").write_bytes(b"")
        try:
            p = run_process([path, "--version"], t, env, t / "stdin", t / "out", timeout_s,
                            max_bytes=64 * 1024)
        except OSError as exc:
            return None, f"cannot run: {exc}"
        text = tail_text(t / "out", 4000).strip()
    first = text.splitlines()[0].strip() if text else ""
    if p.timed_out:
        return None, f"`--version` did not answer within {timeout_s:g} s"
    if p.exit_status != 0:
        return None, f"`--version` exited {p.exit_status}: {first[:200]}"
    return first[:200] or "(printed nothing)", None


def report_json(checks: list[AgentCheck], git: GitCheck, trees: Choice | None = None) -> dict:
    cut, why = netless.available()
    return {"git": asdict(git), "agents": [asdict(c) for c in checks],
            "price_library": {"name": PRICES_LIBRARY, "version": library_version()},
            "network_namespaces": {"available": cut, "reason": why},
            "contained_runs": dict(zip(("available", "reason"), netless.contain_available(),
                                       strict=True)),
            "temp_dir": {"path": str(trees.path), "why": trees.why} if trees else None}


def trees_choice(root: Path, config: Config | None) -> Choice | str:
    """Where ``andon run`` in ``root`` would make its trees (andon/tempdir.py), or why that
    cannot be said (a bad ``[andon] temp_dir``)."""
    from .errors import AndonError, UsageError
    from .git.repo import Repo
    from .tempdir import choose, tree_bytes
    setting = config.andon.temp_dir if config else "auto"
    try:
        tree = tree_bytes(Repo(root, require_commit=False)) if setting == "auto" else 0
    except (AndonError, OSError):  # no repository, or a git doctor reports as broken
        tree = 0
    try:
        return choose(setting, tree, config.run.workers if config else 1)
    except UsageError as exc:
        return str(exc)


def render(out: Console, checks: list[AgentCheck], git: GitCheck,
           trees: Choice | str | None = None) -> None:
    out.print("[bold]andon doctor[/] — git and the agent CLIs andon can start (looked up on "
              "PATH)")
    if git.problem:
        out.print(f"  [red]git: {escape(git.problem)}[/]"
                  + (f" — {escape(git.path)}" if git.path else ""), soft_wrap=True)
    else:
        out.print(f"  git: {escape(git.version or '')} — {escape(git.path or '')}",
                  soft_wrap=True)
    for c in checks:
        if c.path is None:
            state = f"[yellow]not installed[/] (no `{c.executable}` on PATH)"
        elif c.problem:
            state = f"[red]installed, but {c.problem}[/] — {c.path}"
        else:
            state = f"[green]{c.version}[/] — {c.path}"
        out.print(f"  [bold]{c.adapter:<12}[/] {state}", soft_wrap=True)
        creds = ", ".join(f"{k} {'set' if v else 'not set'}" for k, v in c.credentials.items())
        login = LOGINS.get(c.adapter)
        out.print(f"  {'':<12} credentials: {creds}"
                  + (f"; or a login kept in {login}" if login else ""), soft_wrap=True,
                  markup=False)
        if c.passthrough:
            names = ", ".join(f"{k} {'set' if v else 'not set'}" for k, v in c.passthrough.items())
            out.print(f"  {'':<12} env_passthrough: {names}", soft_wrap=True, markup=False)
        for w in c.warnings:
            out.print(f"  {'':<12} [yellow]warning:[/] {escape(w)}", soft_wrap=True)
        out.print(f"  {'':<12} how andon runs it: {_docs_path(c.docs)}", markup=False)
    version = library_version()
    out.print(f"price library: {PRICES_LIBRARY} {version}" if version else
              f"price library: {PRICES_LIBRARY} is not installed: costs an agent does not "
              "report stay unknown", markup=False)
    if not any(c.path for c in checks):
        out.print("None of the agent CLIs is installed. The command adapter runs any agent: "
                  "`andon run --agent command --command '...'`; install one of the CLIs above "
                  "to use its adapter.", soft_wrap=True, markup=False)
    out.print("The command and scripted adapters need nothing installed.", markup=False)
    cut, why = netless.available()
    if cut:
        out.print("network namespaces: available — harness test runs ([test] network = "
                  '"off", the default) and, if asked, agents ([agent] network = "off") run '
                  "with loopback only", soft_wrap=True, markup=False)
    else:
        out.print(f"network namespaces: not available here ({why}) — test runs keep the "
                  'network and their evidence says so; [agent] network = "off" is refused',
                  soft_wrap=True, markup=False)
    can, why = netless.contain_available()
    out.print("test runs contained: yes — the code under test cannot write your checkout, its "
              ".git, .andon/, other worktrees or your home (docs/gates.md)" if can else
              f"test runs contained: no ({why}) — the code under test can write your checkout "
              "by path; each run's evidence says so", soft_wrap=True, markup=False)
    if isinstance(trees, Choice):
        out.print(f"temp dir: {trees.path} ({trees.why}) — the gates' clones and the test "
                  "runs' HOME and TMPDIR ([andon] temp_dir)",
                  soft_wrap=True, markup=False)
    elif trees:
        out.print(f"temp dir: {trees}", soft_wrap=True, markup=False)
    render_sandbox(out)


def sandbox_lines() -> list[str]:
    """What ``andon doctor`` says about the agent sandbox (andon.sandbox): which levels
    work here and why not, what ``auto`` reaches, Landlock, how the caps are enforced."""
    from .sandbox import probe

    caps = probe.capabilities()
    lines = [f"agent sandbox: bubblewrap {caps.bwrap or 'not found'}"]
    for level in ("fs", "fs+net"):
        ok, why = caps.works(level)
        lines.append(f"  {level:<7} {'works' if ok else 'not available: ' + why}")
    lines.append(f'  auto    ([agent] sandbox, the default) reaches "{caps.best(True)}" with '
                 '[agent] network = "allow" (the default: only the model API and allow_hosts, '
                 f'through andon\'s proxy) or "off"; "{caps.best(False)}" with network = "on"')
    if caps.best(True) != "fs+net":
        lines.append('  network = "allow" is not enforced here (needs fs+net): agents reach any '
                     "host")
    if caps.best(False) == "none":  # the level actually achieved, said where it is lowest
        lines.append("  auto falls back to none: agents would run unsandboxed here, as andon's "
                     "user; install bubblewrap (apt-get install bubblewrap) to contain them")
    lines.append(f"  landlock ABI {caps.landlock} (reported only: andon enforces with "
                 "bubblewrap)" if caps.landlock else "  landlock: not available")
    lines.append("  caps: pids cgroup " + (str(caps.cgroup_pids) if caps.cgroup_pids else
                 "none") + "; memory cgroup " + (str(caps.cgroup_memory) if caps.cgroup_memory
                                                 else "none"))
    lines += [f"  note: {n}" for n in caps.notes]
    return lines


def render_sandbox(out: Console) -> None:
    for line in sandbox_lines():
        out.print(line, soft_wrap=True, markup=False)


def _docs_path(rel: str) -> str:
    """Where to read ``rel`` (a path in andon's repository, e.g. ``docs/agents/codex.md``):
    the file itself when andon runs from its checkout, else the path named as andon's, since
    doctor runs in the user's repository, where a bare ``docs/...`` leads nowhere."""
    here = Path(__file__).resolve().parents[2] / rel
    return str(here) if here.is_file() else f"{rel} in andon's repository"
