"""Builders shared by the end-to-end tests: real git repositories with real pytest suites.

``make_project`` writes a tiny package (``src/calc``) with passing tests, an andon.toml
(``FAST`` unless given: ``config_toml`` builds others) and the given packets, commits it on
``main`` and returns its root. ``runner_for`` builds an in-process Runner with scripted
agents; ``andon`` runs the real CLI in a subprocess.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import cli_fork

from andon.agents import ScriptedAgent, StageContext
from andon.config import DEFAULT_TOML, load_config
from andon.errors import AndonError
from andon.git.repo import Repo
from andon.runner import Runner
from andon.state import open_store
from andon.store import StoreProtocol

# The interpreter the tests' projects run their suites with (config_toml's default test
# command): made once per suite run by conftest.py (build_project_python, which says why).
# Unset outside the suite: then the command is andon's own "python".
PROJECT_PYTHON_ENV = "ANDON_TESTS_PROJECT_PYTHON"


def project_test_command() -> list[str]:
    """The default ``[test] command`` of config_toml: the suite's project venv when conftest
    made one, else ``python`` (andon's interpreter)."""
    return [os.environ.get(PROJECT_PYTHON_ENV, "python"), "-m", "pytest"]


GIT_ENV = {"GIT_AUTHOR_NAME": "Test User", "GIT_AUTHOR_EMAIL": "user@example.com",
           "GIT_COMMITTER_NAME": "Test User", "GIT_COMMITTER_EMAIL": "user@example.com"}

CALC = '''\
def add(a, b):
    return a + b


def div(a, b):
    return a / b
'''

CALC_TESTS = '''\
from calc.ops import add, div


def test_add():
    assert add(2, 3) == 5


def test_div():
    assert div(6, 3) == 2
'''

# A packet whose planted test fails on the base: calc.ops has no `mul` yet.
MUL_TEST = '''\
from calc.ops import mul


def test_mul():
    assert mul(3, 4) == 12


def test_mul_zero():
    assert mul(0, 9) == 0
'''

MUL_CODE = "\n\ndef mul(a, b):\n    return a * b\n"


def config_toml(*, red_runs: int = 3, hermetic_runs: int = 3,
                hermetic_random_order: bool = True, test_network: str = "off",
                agent_network: str = "allow", agent_history: str = "full",
                test_command: list[str] | None = None, worktree_root: Path | None = None,
                add: Mapping[str, str] | None = None) -> str:
    """An andon.toml text: ``DEFAULT_TOML`` with the named settings changed (the defaults are
    its own values, except ``test_command``: :func:`project_test_command` unless given, so
    ``config_toml(test_command=["python", "-m", "pytest"])`` is ``DEFAULT_TOML``; a test
    whose project needs a package of andon's own venv names that). ``add`` maps a section name
    (``"gates"``) to lines inserted right after that section's header. Raises AssertionError
    if ``DEFAULT_TOML`` no longer has a key this helper sets (a test must not silently run
    with the defaults)."""
    text = DEFAULT_TOML
    settings = {("gates", "red_runs"): red_runs, ("gates", "hermetic_runs"): hermetic_runs,
                ("gates", "hermetic_random_order"): hermetic_random_order,
                ("test", "network"): test_network, ("agent", "network"): agent_network,
                ("andon", "agent_history"): agent_history}
    settings["test", "command"] = test_command or project_test_command()
    for (section, key), value in settings.items():
        text = _set_key(text, section, key, json.dumps(value))
    if worktree_root is not None:
        text = _add_lines(text, "andon", f"worktree_root = {json.dumps(str(worktree_root))}\n")
    for section, lines in (add or {}).items():
        text = _add_lines(text, section, lines if lines.endswith("\n") else lines + "\n")
    return text


def _set_key(text: str, section: str, key: str, value: str) -> str:
    # the value up to the comment (or line end); the comment stays
    pattern = re.compile(rf"(\[{section}\]\n(?:(?!\[).*\n)*?){key} = [^#\n]*?( *(?:#.*)?)$",
                         re.MULTILINE)
    new, n = pattern.subn(lambda m: f"{m[1]}{key} = {value}{m[2]}", text, count=1)
    assert n == 1, f"DEFAULT_TOML has no {key} in [{section}]"
    return new


def _add_lines(text: str, section: str, lines: str) -> str:
    header = f"[{section}]\n"
    assert header in text, f"DEFAULT_TOML has no [{section}]"
    return text.replace(header, header + lines, 1)


def fast(test_command: list[str] | None = None) -> str:
    """FAST, with another ``[test] command`` when given (e.g. andon's own ``python``, for a
    project that needs a package of andon's venv, or a venv a test made)."""
    return config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                       test_command=test_command)


# Fewest repeated runs: 1 red run, 1 hermetic run, no random-order run.
FAST = fast()


def wrapper_config(where: Path) -> str:
    """FAST with a ``[test] command`` andon cannot see through (``uv run pytest``, ``tox``):
    a shell script, written into ``where``, that runs the tests' interpreter."""
    import stat
    wrapper = where / "run-tests.sh"
    wrapper.write_text(f'#!/bin/sh\nexec {project_test_command()[0]} -m pytest "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return fast([str(wrapper)])

# The shipped gate settings (DEFAULT_TOML's) with the tests' lean interpreter: DEFAULT_TOML
# itself runs the tests with andon's own venv, whose 16,000 files every environment walk
# reads (six times a run); for a test of what the settings catch, not of that venv.
SHIPPED = config_toml()


def packet_md(pid: str, slug: str = "work", goal: str = "Do the work.", **fields: object) -> str:
    """A packet.md text; extra fields are written as TOML (strings, ints, bools, lists)."""
    def toml(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return str(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(toml(x) for x in v) + "]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    lines = ["+++", f'id = "{pid}"', f'slug = "{slug}"', f"goal = {toml(goal)}"]
    lines += [f"{k} = {toml(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n+++\n\n## Context\n\nA test packet.\n"


# The tests' own git commands (building projects, committing as a person would) start no
# `git maintenance run --auto` after each commit: thousands of processes a suite run. Only
# here: andon's own git commands and the agents' keep git's defaults.
QUIET_GIT = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "maintenance.auto",
             "GIT_CONFIG_VALUE_0": "false", "GIT_CONFIG_KEY_1": "gc.auto",
             "GIT_CONFIG_VALUE_1": "0"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV, **QUIET_GIT},
                          check=True, capture_output=True, text=True).stdout


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    """Write each ``{relative path: text}`` of ``files`` under ``root`` (folders made, text
    dedented) and return ``root``: a project of plain files, no git repository."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def make_project(root: Path, packets: Mapping[str, tuple[str, Mapping[str, str]]] = (),
                 files: Mapping[str, str] | None = None, config: str = FAST) -> Path:
    """Write and commit a project at ``root``; ``packets`` maps folder name →
    (packet.md text, {planted relpath: text}). ``files`` adds or overrides project files.
    ``config`` is the andon.toml text: by default ``FAST`` (one red and one hermetic run, no
    random-order run: the repetitions are tested where they are the subject, with their own
    config, e.g. ``config_toml()`` or ``DEFAULT_TOML``)."""
    base = {
        "src/calc/__init__.py": "",
        "src/calc/ops.py": CALC,
        "tests/test_ops.py": CALC_TESTS,
        ".gitignore": "__pycache__/\n*.pyc\n",
        "andon.toml": config,
    }
    base.update(files or {})
    for rel, text in base.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "packets").mkdir(parents=True, exist_ok=True)
    for folder, (md, plant) in dict(packets).items():
        d = root / "packets" / folder
        d.mkdir(parents=True)
        (d / "packet.md").write_text(md)
        for rel, text in plant.items():
            (d / "plant" / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / "plant" / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def baseline_ids(store, key: str) -> set[str] | None:
    """The ids a ``preflight`` row of ``store`` keeps under ``key`` (Store.set_baseline), or
    None: read as the rows are, without baseline.py's checks."""
    row = store.cached(key)
    return set(row["data"]["passed_ids"]) if row and row["kind"] == "preflight" else None


def mul_packet(pid: str = "P1", **fields: object) -> tuple[str, dict[str, str]]:
    fields.setdefault("allowed_paths", ["src/calc/**"])
    return packet_md(pid, "multiply", "calc.ops.mul multiplies.", **fields), {
        f"tests/test_mul_{pid.lower()}.py": MUL_TEST}


def write(ctx: StageContext, rel: str, text: str, append: bool = False) -> None:
    path = ctx.worktree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        text = path.read_text() + text
    path.write_text(text)


def honest_mul(ctx: StageContext) -> str:
    write(ctx, "src/calc/ops.py", MUL_CODE, append=True)
    return "implemented mul; all tests pass"


def review_document(ctx: StageContext, verdict: str = "held", decision: str = "accept",
                    findings: list | None = None, evidence: str | None = None,
                    revise_stage: str | None = None) -> str:
    """A contract-valid review (one verdict per invariant, citing a line that exists unless
    ``evidence`` says otherwise), written to ``ctx.review_file``."""
    where = evidence or _some_line(ctx)
    doc = {"verdicts": [{"invariant": inv.id, "verdict": verdict, "evidence": where,
                         "reason": "checked"} for inv in ctx.packet.invariants],
           "findings": findings or [], "decision": decision, "revise_stage": revise_stage}
    text = json.dumps(doc)
    if ctx.review_file:
        ctx.review_file.write_text(text)
    return text


def _some_line(ctx: StageContext) -> str:
    for rel in ("src/calc/ops.py", *sorted(ctx.packet.plant_files)):
        if (ctx.worktree / rel).is_file():
            return f"{rel}:1"
    raise AssertionError("no file to cite")


def accept_review(ctx: StageContext) -> str:
    """The default reviewer of these tests: accepts (the tests that need a real review give
    their own reviewer)."""
    return review_document(ctx)


# The same for CLI runs: the command adapter's reviewer writes this to $ANDON_REVIEW_FILE
# (valid for packets without invariants, like mul_packet's).
ACCEPT_REVIEW_COMMAND = ("printf '%s' '{\"verdicts\": [], \"findings\": [], "
                         "\"decision\": \"accept\"}' > \"$ANDON_REVIEW_FILE\"")

Behaviour = Callable[[StageContext], str | None]


def runner_for(root: Path, agents: Mapping[str, Behaviour] | Behaviour, echo=None,
               reviewer: Behaviour = accept_review, shared_preflight: bool = True,
               shared_red: bool = False) -> Runner:
    """An in-process Runner; ``agents`` is one behaviour or a dict packet id → behaviour for
    the atdd/implement stages; ``reviewer`` reviews (default: accepts). With
    ``shared_preflight`` the run finds its base preflighted (:func:`share_preflight`); a
    test of the preflight itself passes False. With ``shared_red`` red's passes are shared
    with this process's other such runs (:func:`share_red`): only for a test that neither
    reads red's own runs, counts them nor waits on one (the red-team's scenarios)."""
    repo = Repo(root)
    config = load_config(root)
    store = open_store(repo)
    review = ScriptedAgent(reviewer)
    if callable(agents):
        table = None
        agent = ScriptedAgent(agents)
    else:
        table = {k: ScriptedAgent(v) for k, v in agents.items()}

    def pick(packet, stage):
        if stage.startswith("review"):
            return review
        return agent if table is None else table[packet.id]
    runner = Runner(repo, config, store, pick, echo=echo or (lambda s: None))
    if shared_preflight:
        share_preflight(runner)
    if shared_red:
        share_red(runner.store)
    return runner


# results-cache key -> (ids that passed, evidence) of a preflight this process ran
_PREFLIGHTS: dict[str, tuple[set[str], dict]] = {}


def share_preflight(runner: Runner) -> None:
    """Give ``runner``'s store the preflight result of its base when this process already
    ran the real preflight on the same key (tree, test settings, environment:
    gates/cache.py), else run it now: the run then always finds it cached, as a user's
    second ``andon run`` does. Most tests' projects share a few bases; each distinct one is
    still preflighted for real (a failing one is not kept, so the run meets it as before).
    The key is content: a result kept for one project holds for any with the same tree."""
    b = runner.baseline
    try:
        head = b.head()
        key = b.key(runner.repo.resolve(f"{head}^{{tree}}"))
    except AndonError:  # no base to preflight yet: the run meets it and says so
        return
    if key in _PREFLIGHTS:
        runner.store.set_baseline(key, *_PREFLIGHTS[key])
    elif b.preflight(head).status == "pass":
        row = runner.store.cached(key)
        if row is not None:  # a run-scoped key (a wrapper command) is simply never met again
            _PREFLIGHTS[key] = (set(row["data"]["passed_ids"]), row["evidence"])
        b.env = None  # the base's tests ran since that walk: the run walks anew, as later ones
    else:
        b.env = None


# red-cache key -> (data, evidence) of a red pass a shared_red run of this process kept
_REDS: dict[str, tuple[dict, dict]] = {}


def share_red(store: StoreProtocol) -> None:
    """Let ``store`` find a red pass that another ``share_red`` store of this process kept
    under the same key (gates/cache.py ``red_key``: base tree, planted and hidden bytes,
    test settings, environment), and keep its own for the others: the red-team's scenarios
    (redteam/scenarios.py ``play``) plant the same test on the same base hundreds of times,
    and red's outcome is the same each time. Whichever test meets a key first runs red for
    real; the others record the cached pass, as a user's second attempt on that base does.
    Either way the gates after red see the same. Which one a test meets depends on the
    order the tests ran in: a test that reads red's own runs, counts them or waits on one (a
    test that syncs with the first red run hangs on a cached red) must not share. A failure is never
    cached (red.py), so a test whose red fails always runs it."""
    found, keep = store.cached, store.set_cached

    def cached(key: str) -> dict | None:
        row = found(key)
        if row is None and key in _REDS:
            keep(key, "red", *_REDS[key])
            row = found(key)
        return row

    def set_cached(key: str, kind: str, data: dict, evidence: dict) -> None:
        keep(key, kind, data, evidence)
        if kind == "red":
            _REDS[key] = (data, evidence)
    store.cached, store.set_cached = cached, set_cached


def with_reviewer(args: tuple[str, ...]) -> tuple[str, ...]:
    """``run`` arguments with the accepting reviewer command added unless a reviewer is given."""
    if args and args[0] == "run" and not any(a.startswith("--reviewer") for a in args):
        return (*args, "--reviewer-command", ACCEPT_REVIEW_COMMAND)
    return args


# Commands that only read, parse and print: run in this process (click's CliRunner, about
# 0.01 s instead of 0.5 s for a new interpreter). `run`, `demo`, `unblock` and `doctor` start
# agents, suites or subreapers, install signal handlers or time out: those get a real process.
IN_PROCESS = frozenset({"init", "check", "status", "show"})


def andon(root: Path, *args: str, env: Mapping[str, str] | None = None,
          timeout: float = 300, real_process: bool = False, fresh: bool = False
          ) -> subprocess.CompletedProcess:
    """Run the CLI against ``root`` (as ``andon -C root ARGS``); ``run`` gets the accepting
    reviewer unless the test names one (see ``with_reviewer``). Commands in ``IN_PROCESS``,
    and ``--help``, run in this process unless ``real_process`` or ``fresh``; everything else
    in a process of its own, `python -m andon`: forked from a server with andon imported
    (tests/cli_fork.py), or a fresh interpreter with ``fresh``. Either way: returncode, stdout
    and stderr as text, the environment being os.environ + GIT_ENV + COLUMNS=200 + ``env``."""
    args = with_reviewer(args)
    env = {**GIT_ENV, "COLUMNS": "200", **(env or {})}
    if not (real_process or fresh) and args and (args[0] in IN_PROCESS or "--help" in args):
        return _in_process(root, args, env)
    argv, full_env = ["-C", str(root), *args], {**os.environ, **env}
    forked = (None if fresh or os.environ.get("ANDON_TESTS_FRESH_CLI")
              else cli_fork.run(argv, full_env, timeout))
    if forked is not None:
        return forked
    return subprocess.run([sys.executable, "-m", "andon", *argv], capture_output=True,
                          text=True, timeout=timeout, check=False, env=full_env)


def _in_process(root: Path, args: tuple[str, ...], env: Mapping[str, str]
                ) -> subprocess.CompletedProcess:
    # Imported here: the CLI pulls in every module, and most users of helpers need few.
    import traceback

    from click.testing import CliRunner
    from rich.console import Console

    from andon import cli
    from andon.cli import common
    argv = ["-C", str(root), *args]
    saved = common.out, common.err
    # As at the start of a real process whose output is a pipe: the width from COLUMNS, no
    # terminal (so no colour), whatever this process's own streams and environment are.
    width = int(env["COLUMNS"])
    common.out = Console(highlight=False, width=width, force_terminal=False)
    common.err = Console(stderr=True, highlight=False, width=width, force_terminal=False)
    try:
        # CliRunner forces help texts to 80 columns; a real process fits them to COLUMNS
        # (click's formula: at most 80, less a margin of 2, at least 50)
        result = CliRunner(env=dict(env)).invoke(cli.main, argv, prog_name="python -m andon",
                                                 terminal_width=max(min(width, 80) - 2, 50))
    finally:
        common.out, common.err = saved
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # what the interpreter would print before exiting 1
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess([sys.executable, "-m", "andon", *argv],
                                       result.exit_code, result.stdout, stderr)


def process_alive(pid: int, within_s: float = 10.0) -> bool:
    """True if ``pid`` is still running after ``within_s`` seconds. SIGKILL is delivered
    asynchronously, so a killed process may need a moment to die; a zombie counts as dead
    (an orphan may wait for a PID 1 that never reaps it)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        if time.monotonic() >= deadline:
            return True
        os.sched_yield()


def chromium_offline_dom(tmp_path: Path, page: str, probe: str, attribute: str) -> object:
    """Open ``page`` (HTML text) with ``probe`` (a ``<script>`` that writes JSON into
    ``attribute`` of some element) inserted before ``</body>``, in Debian's headless
    ``chromium`` with the network cut (andon.contain.netless), and return that JSON decoded.

    Skips when chromium is not installed (fails instead with CI=true, where scripts/test
    installs it) or the network cannot be cut here; fails when chromium exits non-zero or
    the attribute is missing from the dumped DOM."""
    import html

    import pytest

    from andon.contain import netless
    if shutil.which("chromium") is None:
        why = "Debian's chromium is not installed (scripts/test installs it as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    ok, why = netless.available()
    if not ok:
        pytest.skip(f"cannot cut the network here: {why}")
    page_file = tmp_path / "probe.html"
    page_file.write_text(page.replace("</body>", probe + "</body>"))
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    argv = netless.wrap(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                         "--no-first-run", f"--user-data-dir={home / 'profile'}",
                         "--window-size=1200,2000", "--dump-dom", page_file.as_uri()])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False,
                          env={**os.environ, "HOME": str(home)})
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(rf'{re.escape(attribute)}="([^"]*)"', done.stdout)
    assert found, done.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


# -- a real CLI that writes over the planted test (docs/sandbox.md, "Tamper under a sandbox")
TAMPER_LEVELS = ["none", "auto"]


def with_sandbox(config: str, level: str) -> str:
    """``config`` with ``[agent] sandbox = level``."""
    return _add_lines(config, "agent", f'sandbox = "{level}"\n')


def assert_tamper_outcome(root: Path, show: dict, level: str) -> None:
    """At ``none`` the write lands and the scope gate rejects it as tamper (layer
    permission); at ``auto`` (``fs`` here) the OS refuses it: the planted test is unchanged,
    the stage's evidence names it as locked read-only, no tamper finding, and the packet's
    verdict follows the rest of the work (merged only with the real ``mul``)."""
    attempt = show["attempts"][-1]
    scope = next((g for g in attempt["gates"] if g["gate"] == "scope"), None)
    tampers = [f for f in (scope or {}).get("evidence", {}).get("findings", [])
               if f["kind"] == "tamper" and f["path"] == "tests/test_mul_p1.py"]
    if level == "none":
        assert show["packet"]["state"] == "blocked"
        assert scope is not None and scope["status"] == "fail" and tampers, attempt["reason"]
        return
    implement = next(s for s in attempt["stages"] if s["stage"] == "implement")
    note = implement["usage"]["notes"][0]
    assert note.startswith("sandbox fs") and "tests/test_mul_p1.py" in note, note
    assert not tampers
    if show["packet"]["state"] == "done":
        assert git(root, "show", "andon/integration:tests/test_mul_p1.py") == MUL_TEST
        assert "def mul" in git(root, "show", "andon/integration:src/calc/ops.py")


def skip_without_fs(level: str) -> None:
    """Skip a case at a sandbox ``level`` this machine cannot give (``andon doctor``)."""
    import pytest

    from andon.sandbox import probe
    ok, why = probe.capabilities().fs
    if level != "none" and not ok:
        pytest.skip(f"no fs sandbox here: {why}")


def nest_deep(top, depth=3000):
    """Folders nested ``depth`` deep under ``top`` (made if missing), by relative mkdirs, so
    no path limit stops it: deeper than Python's recursion limit, where shutil.rmtree
    raises RecursionError (what an agent or the code under test can leave behind)."""
    import os
    os.makedirs(top, exist_ok=True)
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


# the same function as source, for a script or a project's test file run in another process
NEST_DEEP_PY = inspect.getsource(nest_deep)


def forged_cache(source: Path, code: str) -> Path:
    """Write the byte-code cache Python loads for ``source`` (its header matches the source's
    mtime and size, so it is used in place of the source, -B or not) holding the compiled
    ``code`` instead of the source's; return its path. What contain/bytecode.py catches."""
    import importlib.util
    import marshal
    st = source.stat()
    cache = Path(importlib.util.cache_from_source(str(source)))
    cache.parent.mkdir(exist_ok=True)
    header = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
              + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
              + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    cache.write_bytes(header + marshal.dumps(compile(code, str(source), "exec", dont_inherit=True)))
    return cache


# -- a throwaway interpreter (the environment fingerprint's tests and red-team scenarios) --

def venv_site() -> Path:
    """The site-packages of andon's own interpreter (the one the test suite runs in): only
    ever read by the tests that reach it."""
    import site
    return Path(site.getsitepackages()[0])


_FACTS = """
import json, os, sys, sysconfig
base = sys.base_prefix
print(json.dumps({
    "base_prefix": base,
    "base_executable": os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
    "stdlib": sysconfig.get_paths(vars={"base": base, "platbase": base,
                                        "installed_base": base})["stdlib"],
    "libdir": sysconfig.get_config_var("LIBDIR"),
    "soname": sysconfig.get_config_var("INSTSONAME"),
    "shared": bool(sysconfig.get_config_var("Py_ENABLE_SHARED"))}))
"""


def interpreter_facts(python: str) -> dict:
    """What :func:`private_base` and the tests of a build's own files need to know of the
    interpreter ``python`` (asked in a fresh isolated process of it): ``base_prefix``,
    ``base_executable`` (symlinks resolved), ``stdlib``, ``libdir``, ``soname`` (libpython's
    file name), ``shared`` (built with ``--enable-shared``). Raises CalledProcessError."""
    out = subprocess.run([python, "-I", "-c", _FACTS], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def machine_python(check: str) -> str | None:
    """An interpreter of this machine, 3.11 or later, for which the Python code ``check``
    runs without an error, ``sys.executable`` first, then the ``python3*`` on ``PATH``, then
    pyenv's versions, newest first: its path, or None when none does. For the tests of what
    only some builds have — scripts/test makes the suite's venv from Debian's python3.11 (no
    PEP 706 extraction filters before 3.11.4; a static executable, no shared libpython), and
    the machine's other Pythons have what it lacks."""
    seen: set[str] = set()
    candidates = [sys.executable]
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidates += sorted(str(p) for p in Path(folder or ".").glob("python3*"))
    # pyenv's, newest first (3.13 before 3.9: not the order of their names)
    pyenvs = Path.home().glob(".pyenv/versions/3.*/bin/python3")
    candidates += sorted((str(p) for p in pyenvs), reverse=True,
                         key=lambda p: [int(n) for n in re.findall(r"\d+", p.split("/")[-3])])
    # only a Python andon supports (pyproject's requires-python)
    check = "import sys\nassert sys.version_info >= (3, 11)\n" + check
    for python in candidates:
        real = os.path.realpath(python)
        if real in seen or not os.access(python, os.X_OK) or python.endswith("-config"):
            continue
        seen.add(real)
        try:
            ok = subprocess.run([python, "-I", "-c", check], capture_output=True,
                                timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok:
            return python
    return None


def needs_python(check: str, why: str) -> str:
    """:func:`machine_python` for ``check``, or the test skipped saying ``why`` — failed
    with ``CI=true``: CI's machine has such a Python (pyenv's), so its absence there is a
    broken set-up, not a reason to test less (as tests/realcli.py does for agent CLIs)."""
    import pytest
    python = machine_python(check)
    if python is None:
        message = f"no Python on this machine has {why}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return python


class NoPrivateBase(RuntimeError):
    """This machine's interpreter cannot be relocated into a throwaway prefix."""


def private_base(tmp: Path, python: str | None = None) -> tuple[Path, Path]:
    """(python, site-packages) of a throwaway *base* interpreter under ``tmp``: a copy of
    the real interpreter's executable in ``tmp/base/bin`` and a ``lib`` folder whose entries
    (the standard library
    file by file, ``lib-dynload``, the shared ``libpython``) are symlinks to the real ones —
    except the site-packages folders, which are new and empty. Python finds its prefix from
    where its executable is, so this interpreter's *system* site-packages (its
    ``site.getsitepackages()``, not a virtualenv's) is a folder in ``tmp``: a cheat can write
    there as it would into ``/usr/lib/python3/dist-packages``, and the machine's interpreter is
    never written. Its site-packages reaches andon's own (pytest) through a path-only ``.pth``.
    ``python``: another interpreter of the machine to copy (default: the suite's own base,
    see :func:`machine_python`).

    Raises:
        NoPrivateBase: the copied executable does not start, or starts with its real prefix
            (a build that does not compute its prefix from the executable's place).
    """
    facts = interpreter_facts(python or sys.executable)
    real, exe = Path(facts["base_prefix"]), Path(facts["base_executable"])
    stdlib = Path(facts["stdlib"])
    base = tmp / "base"
    (base / "bin").mkdir(parents=True)
    shutil.copy2(exe, base / "bin" / exe.name)
    for entry in (real / "lib").iterdir():
        if entry.name == stdlib.name:
            continue
        (base / "lib" / entry.name).parent.mkdir(parents=True, exist_ok=True)
        (base / "lib" / entry.name).symlink_to(entry)
    link_stdlib(stdlib, base / "lib" / stdlib.name)
    python = base / "bin" / exe.name
    probe = subprocess.run(
        [str(python), "-I", "-c", "import site, sys; print(sys.prefix); "
         "print(*site.getsitepackages(), sep='\\n')"],
        capture_output=True, text=True, check=False)
    lines = probe.stdout.splitlines()
    if probe.returncode or not lines or Path(lines[0]) != base:
        raise NoPrivateBase(f"{python}: prefix {lines[:1]}, exit {probe.returncode}: "
                            f"{probe.stderr.strip()[-300:]}")
    sp = next((Path(p) for p in lines[1:] if _inside(Path(p), base)), None)
    if sp is None:
        raise NoPrivateBase(f"{python}: no site-packages under {base}: {lines[1:]}")
    sp.mkdir(parents=True, exist_ok=True)
    (sp / "zz_andon_host.pth").write_text(f"{venv_site()}\n")
    return python, sp


def _inside(path: Path, root: Path) -> bool:
    """``path`` (existing or not) is really under ``root``: its nearest existing folder,
    symlinks resolved — a site folder reached through one of the base's symlinks (Debian's
    ``lib/python3/dist-packages``) is the machine's, never written."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path.resolve().is_relative_to(root.resolve())


def link_stdlib(stdlib: Path, own: Path) -> None:
    """Make ``own`` a standard library folder of links to ``stdlib``'s entries, less its
    site folders (a relocated interpreter's own, new and empty)."""
    own.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name not in ("site-packages", "dist-packages"):
            (own / entry.name).symlink_to(entry)


def fake_layout(tmp_path: Path, interpreter: str | None = None):
    """A Layout of folders under ``tmp_path`` (nothing runs there): a venv's site-packages
    holding ``somepkg`` (``X = 1``) with its dist-info and RECORD, a user site that does not
    exist, a stand-in standard library folder with ``os.py`` and ``json/``. ``interpreter``
    (default: a venv python that does not exist) is the one the byte-code probe runs."""
    from andon.contain.envprint import Layout
    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / "somepkg").mkdir(parents=True)
    (site / "somepkg" / "__init__.py").write_text("X = 1\n")
    dist = site / "somepkg-1.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: somepkg\nVersion: 1.2\n\nbody\n")
    (dist / "RECORD").write_text("somepkg/__init__.py,sha256=x,6\nsomepkg-1.2.dist-info/RECORD,,\n")
    top = tmp_path / "stdlib"
    (top / "json").mkdir(parents=True)
    (top / "os.py").write_text("")
    return Layout(interpreter or str(tmp_path / "venv" / "bin" / "python"),
                  str(tmp_path / "venv"), (str(site),),
                  str(tmp_path / "home" / ".local" / "site"), (str(top),))


def unblock(fifos: list[Path]) -> None:
    """Open each of ``fifos`` for writing, at once, and close it: a reader blocked opening
    one (a hang a test caught, or did not) goes on and reads an empty file. Emptied."""
    for fifo in fifos:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    fifos.clear()


def within_deadline(fn: Callable[[], object], seconds: float) -> object:
    """``fn()``'s value, or what it raised, run in a daemon thread that must end within
    ``seconds``: a read that waits on a FIFO or copies ``/dev/zero`` fails the test instead
    of hanging the suite. Whatever ``fn`` opens of SQLite must be made and closed in it."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s: it waits, or reads without end"
    if "error" in out:
        raise out["error"]
    return out["value"]
