"""``scope`` gate: the change stays where the packet allows, and touches nothing the harness owns.

Read from git, not from the agent: every path that differs between the plant commit and the
candidate commit. A changed planted file, a change under the packets folder, or to andon.toml
is a **tamper** finding whatever the tests say. Outside those, a path must match
``allowed_paths`` (when the packet gives any) and must not match ``forbidden_paths``.

Some changes steer how the harness's own test run behaves, so they are findings even inside
``allowed_paths``:

- ``runner-config``: a ``conftest.py`` anywhere, a file pytest reads its configuration from
  (``pytest.ini``, ``.pytest.ini``, ``pytest.toml``, ``.pytest.toml``, ``tox.ini``,
  ``setup.cfg``: ``CONFIG_NAMES`` of runners/rootdir.py), ``noxfile.py``, ``Makefile``,
  ``sitecustomize.py`` / ``usercustomize.py`` (or such a package; they run at interpreter
  start-up, before the runner), or a change to the parsed ``[tool.pytest…]`` table of
  ``pyproject.toml`` — unless ``allowed_paths`` names the file itself
  (``"tests/conftest.py"`` or ``"**/conftest.py"``, not ``"tests/**"``);
- ``runner-config`` too: an ``__init__.py`` of a test package (:func:`in_test_package`) with
  anything that runs (more than comments and a docstring): pytest imports it before every
  test module below it, planted and hidden ones, and it may patch the code or rewrite the
  test files on disk — unless ``allowed_paths`` names it; an empty one stays allowed;
- ``shadowing-module``: an added ``.py`` file or package that would be importable as a
  top-level module named like a standard-library module, the runner's, andon's, an
  installed distribution's or one of the project's own (see shadowing.py) — unless
  ``allowed_paths`` names it;
- ``entry-point``: a change to ``[project.entry-points]`` (a ``pytest11`` plugin loads into
  every pytest run of an installed package) — always;
- ``new-dependency``: a change to ``[project] dependencies`` / ``optional-dependencies``
  unless ``allowed_paths`` names ``pyproject.toml`` itself;
- ``git-attributes``: any change to a ``.gitattributes`` file — a conversion
  (``working-tree-encoding``, ``filter``, ``ident``, ``eol``…), or a macro that sets one,
  makes every checkout differ from the blob the gates and the reviewer read — unless
  ``allowed_paths`` names the file itself;
- ``bytecode`` (``*.pyc``, ``__pycache__/``), ``extension-module`` (a name ending in ``.so``
  or ``.pyd``, or in one of this interpreter's ``EXTENSION_SUFFIXES``: imported before a
  ``.py`` of the same name), ``native-code`` (a changed file whose first bytes are an ELF,
  PE or Mach-O file, or a Java class, under any name: native.py), ``packaging-metadata``
  (``*.dist-info``, ``*.egg-info``, ``*.pth``), ``symlink`` (mode 120000) and ``submodule``
  (mode 160000) — always.
"""

from __future__ import annotations

import ast
import importlib.machinery
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..config import CONFIG_NAME
from ..contain.interpreter import python_of
from ..git.hazards import describe, in_work_tree, shown
from ..packet import path_matches
from ..runners.rootdir import CONFIG_NAMES
from .base import Finding, GateContext, GateResult
from .native import heads, native_format
from .shadowing import installed_names, own_modules, shadowed, top_level

NAME = "scope"


def skip_reason(ctx: GateContext) -> str | None:
    """Always applies: every candidate's change is checked."""
    return None


def run(ctx: GateContext) -> GateResult:
    """The implement stage's change: from the atdd commit (or the plant commit) to the
    candidate. With an atdd stage, any change to a test path is tamper."""
    assert ctx.candidate_sha, "scope runs on a candidate commit"
    base = ctx.atdd_sha or ctx.plant_sha
    return check(ctx, NAME, base, ctx.candidate_sha,
                  frozen_tests=ctx.atdd_sha is not None, only_tests=False)


def check(ctx: GateContext, gate: str, base: str, head: str, frozen_tests: bool,
          only_tests: bool) -> GateResult:
    """The change base..head judged as gate ``gate`` (``scope`` here, ``atdd-scope`` in
    :mod:`andon.gates.atdd_scope`): ``frozen_tests``, a test path changed is tamper;
    ``only_tests``, a change outside the test paths is out of scope."""
    packet = ctx.packet
    packets_dir = ctx.config.andon.packets_dir.strip("/")
    test_paths = ctx.config.stages.test_paths
    changes = ctx.repo.changes(base, head)
    files = [c.path for c in changes if c.new_mode in FILE_MODES]  # not deleted, not links
    compiled = {p: f for p, h in heads(ctx.repo, head, files).items()
                if (f := native_format(h)) is not None}
    findings: list[Finding] = []
    for c in changes:
        p = c.path
        is_test = path_matches(p, test_paths)
        special = _special(ctx, c, base, head, compiled.get(p))
        n = len(findings)
        if p in packet.plant_files:
            findings.append(Finding("tamper", f"planted file {p} was changed ({_verb(c.status)})",
                                    path=p))
        elif p == packets_dir or p.startswith(packets_dir + "/"):
            findings.append(Finding("tamper", f"{p} is in the packets folder, which belongs "
                                    "to the harness", path=p))
        elif p == CONFIG_NAME:
            findings.append(Finding("tamper", f"{p} is andon's configuration", path=p))
        elif frozen_tests and is_test:
            findings.append(Finding("tamper", f"test path {p} was changed by the implement "
                                    "stage, which writes code only", path=p))
        elif only_tests and not is_test:
            findings.append(Finding("not-a-test", f"{p} is not a test path; the atdd stage "
                                    f"writes tests only ({', '.join(test_paths)})", path=p))
        elif path_matches(p, packet.forbidden_paths):
            findings.append(Finding("forbidden-path", f"{p} matches forbidden_paths "
                                    f"{packet.forbidden_paths}", path=p))
        elif special:
            findings += special
        elif (not only_tests and packet.allowed_paths
              and not path_matches(p, packet.allowed_paths)):
            findings.append(Finding("outside-allowed", f"{p} is outside allowed_paths "
                                    f"{packet.allowed_paths}", path=p))
        if c.status == "M" and any(f.kind == "tamper" for f in findings[n:]):
            line = _first_changed_line(ctx, base, head, p)  # a protected file edited: where
            findings[n:] = [replace(f, line=line) if f.kind == "tamper" else f
                            for f in findings[n:]]
    details = {"changed": [f"{c.status} {c.path}" for c in changes]}
    if findings:
        tamper = [f for f in findings if f.kind == "tamper"]
        head_msg = (tamper or findings)[0].message
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        return GateResult(gate, "fail", head_msg + more, "permission", findings,
                          details=details)
    if not changes:
        return GateResult(gate, "fail", "the agent changed nothing", "code",
                          [Finding("no-change", "no file differs from the commit it started "
                                   "from")], details=details)
    return GateResult(gate, "pass", f"{len(changes)} changed path(s), all allowed",
                      details=details)


# every file pytest reads its configuration from (pyproject.toml only by its [tool.pytest…]
# table: _pyproject), and the files that say how the tests are run
RUNNER_CONFIG = (*(n for n in CONFIG_NAMES if n != "pyproject.toml"), "conftest.py",
                 "noxfile.py", "Makefile")
STARTUP = ("sitecustomize", "usercustomize")  # run by the interpreter's site module at start
# what CPython imports as an extension module on any platform (.cpython-311-….so, .abi3.so,
# .so; .cp311-win_amd64.pyd, .pyd), and whatever else this interpreter's import system takes
EXTENSION_SUFFIXES = tuple(sorted({".so", ".pyd", *importlib.machinery.EXTENSION_SUFFIXES}))
FILE_MODES = ("100644", "100755")  # a regular file's blob, whose first bytes native.py reads


def named_explicitly(path: str, allowed: list[str]) -> bool:
    """``allowed`` has a pattern that matches ``path`` and whose last part is the file name
    itself (``tests/conftest.py``, ``**/conftest.py``), not a wildcard (``tests/**``)."""
    name = path.rsplit("/", 1)[-1]
    return any(pat.rsplit("/", 1)[-1] == name and path_matches(path, [pat]) for pat in allowed)


def only_docstring(data: bytes | None) -> bool:
    """``data`` is Python in which nothing runs: empty, comments, a docstring. False for None
    and for what does not parse or is too deep for the parser (decoded by its coding line,
    as Python reads it)."""
    if data is None:
        return False
    try:
        body = ast.parse(data).body
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # the parser's stack too
        return False
    return not body or (len(body) == 1 and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant)
                        and isinstance(body[0].value.value, str))


def in_test_package(ctx: GateContext, rev: str, folder: str) -> bool:
    """``folder`` (repo-relative, "" for the top) is a test package in ``rev``: a test module
    (a planted or hidden file, a ``test_*.py`` or ``*_test.py``) lies in it or below, and its
    ``__init__.py`` is a test path (``[stages] test_paths``) or sits beside a test module.
    A package above the tests that is not a test path (``src/calc/`` over ``src/calc/tests/``)
    is code, which the patterns gate reads with every code rule."""
    prefix = f"{folder}/" if folder else ""
    listing = [e.path for e in ctx.repo.entries(rev) if e.path.startswith(prefix)]
    known = {*ctx.packet.plant_files, *ctx.packet.hidden_files}
    tests = [t for t in {*listing, *known} if t.startswith(prefix) and t.endswith(".py")
             and (t in known or t.rsplit("/", 1)[-1].startswith("test_")
                  or t.endswith("_test.py"))]
    beside = any("/" not in t[len(prefix):] for t in tests)
    return bool(tests) and (beside or path_matches(f"{prefix}__init__.py",
                                                   ctx.config.stages.test_paths))


def _special(ctx: GateContext, c: Any, base: str, head: str,
             compiled: str | None) -> list[Finding]:
    """Findings for a change that can steer the harness (see the module docstring);
    ``compiled``: the compiled-code format the changed file's bytes start, if any."""
    p, name = c.path, c.path.rsplit("/", 1)[-1]
    parts = p.split("/")
    allowed = ctx.packet.allowed_paths
    if c.new_mode == "120000" or (c.old_mode == "120000" and c.status != "D"):
        return [Finding("symlink", f"{p} is a symbolic link (mode 120000): links can reach "
                        "files outside the allowed paths", path=p)]
    if "160000" in (c.new_mode, c.old_mode):
        return [Finding("submodule", f"{p} is a submodule (mode 160000)", path=p)]
    if name.endswith((".pyc", ".pyo")) or "__pycache__" in parts:
        return [Finding("bytecode", f"{p} is compiled bytecode: it can run code no diff "
                        "shows", path=p)]
    if name.endswith(EXTENSION_SUFFIXES):
        return [Finding("extension-module", f"{p} is a compiled extension module: Python "
                        "imports it before a .py of the same name, and no diff shows its "
                        "code", path=p)]
    if compiled is not None:
        return [Finding("native-code", f"{p} is compiled code ({compiled}): ctypes loads it "
                        "and a subprocess runs it whatever its name, and no diff shows its "
                        "code", path=p)]
    if name == ".gitattributes" and not named_explicitly(p, allowed):
        return [Finding("git-attributes", f"{p} sets git attributes: a conversion "
                        "(working-tree-encoding, filter, ident, eol…) makes every checkout "
                        "differ from what the gates and the reviewer read; off limits unless "
                        "allowed_paths names it", path=p)]
    if (name == "__init__.py" and c.status in ("A", "M") and not named_explicitly(p, allowed)
            and not only_docstring(ctx.repo.file_bytes(head, p))
            and in_test_package(ctx, head, p.rpartition("/")[0])):
        return [Finding("runner-config", f"{p} runs when pytest imports its test package, "
                        "before every test module in it (planted and hidden ones too); off "
                        "limits unless empty (or a docstring) or allowed_paths names it", path=p)]
    if name.endswith(".pth") or any(x.endswith((".dist-info", ".egg-info")) for x in parts):
        return [Finding("packaging-metadata", f"{p} is packaging metadata (.pth / dist-info "
                        "/ egg-info): it can load code into every Python run", path=p)]
    if name in RUNNER_CONFIG and not named_explicitly(p, allowed):
        return [Finding("runner-config", f"{p} configures the test runner; off limits unless "
                        "allowed_paths names it", path=p)]
    startup = [x for x in parts[:-1] if x in STARTUP] or (
        [name[:-3]] if name.endswith(".py") and name[:-3] in STARTUP else [])
    if startup and not named_explicitly(p, allowed):
        return [Finding("runner-config", f"{p}: {startup[0]} runs at interpreter start-up in "
                        "every test run, before the runner; off limits unless allowed_paths "
                        "names it", path=p)]
    if c.status == "A" and not named_explicitly(p, allowed):
        found = _shadowing(ctx, p, base, head)
        if found:
            return [found]
    if p == "pyproject.toml":
        return _pyproject(ctx, base, head, named_explicitly(p, allowed))
    return []


def _shadowing(ctx: GateContext, p: str, base: str, head: str) -> Finding | None:
    """A ``shadowing-module`` finding when the added file ``p`` makes a new top-level module
    whose name shadows one the test process relies on (see shadowing.py)."""
    top = top_level(p, lambda d: ctx.repo.file_bytes(head, f"{d}/__init__.py") is not None)
    if top is None:
        return None
    name, where = top
    if ctx.repo.rev_parse(f"{base}:{where}") is not None:
        return None  # the project's own module, already there at the base: not new
    own = frozenset(own_modules(ctx.repo, base, ctx.config.test.pythonpath))
    why = shadowed(name, frozenset(), own)
    if why is None:
        argv = ctx.config.test_argv()
        installed, _ = installed_names(python_of(argv) or sys.executable)
        why = shadowed(name, installed)
    if why is None:
        return None
    return Finding("shadowing-module", f"{p} makes a new top-level module {name!r}, the name "
                   f"of {why}: a test run would import it instead (rename it or put it in "
                   "the project's package)", path=p)


def _toml(ctx: GateContext, rev: str) -> dict | None:
    data = ctx.repo.file_bytes(rev, "pyproject.toml")
    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError:
        return None


def _pyproject(ctx: GateContext, base: str, head: str, named: bool) -> list[Finding]:
    before, after = _toml(ctx, base), _toml(ctx, head)
    p = "pyproject.toml"
    if after is None:
        return [Finding("runner-config", f"{p} is not valid TOML any more", path=p)]
    before = before or {}
    found = []

    def get(d: dict, *keys: str) -> Any:
        for k in keys:
            d = d.get(k, {}) if isinstance(d, dict) else {}
        return d

    pytest_keys = {k for k in (*get(before, "tool"), *get(after, "tool"))
                   if k == "pytest" or k.startswith("pytest")}
    changed_tables = sorted(k for k in pytest_keys
                            if get(before, "tool", k) != get(after, "tool", k))
    if changed_tables and not named:
        found.append(Finding("runner-config", f"{p}: the [tool.{changed_tables[0]}] table "
                             "changed; it configures the test runner", path=p))
    eb, ea = get(before, "project", "entry-points"), get(after, "project", "entry-points")
    if eb != ea:
        groups = sorted(g for g in {*eb, *ea} if eb.get(g) != ea.get(g))
        plugin = " (pytest11: a pytest plugin that loads itself)" if "pytest11" in groups else ""
        found.append(Finding("entry-point", f"{p}: [project.entry-points] changed: "
                             f"{', '.join(groups)}{plugin}", path=p))
    for key in ("dependencies", "optional-dependencies"):
        db, da = get(before, "project", key), get(after, "project", key)
        if db != da and not named:
            found.append(Finding("new-dependency", f"{p}: [project] {key} changed "
                                 f"({db or []} -> {da or []}); allowed only when the packet's "
                                 f"allowed_paths names {p}", path=p))
    return found


def _first_changed_line(ctx: GateContext, base: str, head: str, path: str) -> int | None:
    """1-based line of the first line of ``path`` that differs between ``base`` and ``head``
    (for appended text, the first new line; for truncated text, the candidate's last line);
    None for binary content or when either side is not a file."""
    before, after = ctx.repo.file_bytes(base, path), ctx.repo.file_bytes(head, path)
    if before is None or after is None or b"\0" in before or b"\0" in after:
        return None
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    for i, (a, b) in enumerate(zip(old, new, strict=False), start=1):
        if a != b:
            return i
    if len(old) == len(new):
        return None  # the same text: only the file's mode changed
    return min(len(old), len(new)) + 1 if len(new) > len(old) else max(len(new), 1)


def _verb(status: str) -> str:
    return {"D": "deleted", "A": "added", "T": "type changed"}.get(status, "modified")


def reached_outside(stage: str, changed: list[tuple[str, str]], moved: list[str]
                    ) -> GateResult | None:
    """The failing result (layer ``permission``) that ends an attempt whose ``stage`` agent
    reached into the user's repository: watched files ``changed`` ((path, how) pairs:
    ``outside-worktree``) or refs ``moved`` (``tamper``; already put back); None if neither."""
    findings = [Finding("outside-worktree", f"{p} was {how} outside the worktree while "
                        f"the {stage} agent ran", path=p) for p, how in changed]
    findings += [Finding("tamper", f"ref {m} was moved, deleted or made by the {stage} "
                         "agent (put back)", path=m) for m in moved]
    what = ([f"changed {len(changed)} file(s) outside its worktree, in your checkout: "
             + ", ".join(p for p, _ in changed)] if changed else []) \
        + ([f"moved git refs it does not own: {', '.join(moved)} (put back)"] if moved else [])
    if not findings:
        return None
    return GateResult(NAME, "fail", f"the {stage} agent " + "; ".join(what), "permission",
                      findings)


def blocked(gate: str, when: str, root: Path, found: list[tuple[Path, str]] | None = None
            ) -> GateResult | None:
    """The failing result (layer ``permission``) of ``gate`` when the repository at ``root``
    holds a file git would wait on for ever, made ``when`` (e.g. "while the implement agent
    ran"): ``found`` (path, what it is) pairs, else what git/hazards.py finds there without
    running git, which would hang. An ``outside-worktree`` finding for each, named relative
    to ``root`` when below it; None when there is none."""
    if not (found := in_work_tree(root) if found is None else found):
        return None
    findings = [Finding("outside-worktree", f"{shown(p, root)} is {what}, made {when}: git "
                        "waits for ever on it", path=shown(p, root)) for p, what in found]
    return GateResult(gate, "fail", describe(found, root), "permission", findings)
