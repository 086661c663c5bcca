"""``mutation`` gate: do the tests notice when the changed code is broken on purpose?

mutmut (3.x) mutates the functions the candidate changed, in a fresh clone of the candidate
(never the user's checkout, never the worktree), and runs the tests against each mutant.
andon computes the score itself from mutmut's own result data, ``mutants/<file>.meta`` (JSON,
``exit_code_by_key``: one exit code per mutant, the same codes ``mutmut results`` prints as
words): **score = killed / executed**. Killed: the tests failed (exit 1 or 3) or a type
checker caught it (37). Everything else that ran counts as a survivor: survived (0), no tests
(5, 33), timeout, suspicious, segfault, skipped. A score below ``[gates.mutation] min_score``
fails the gate, and the surviving mutants are listed in the evidence with their diffs
(``mutmut show <name>``).

**Equivalent mutants exist**: some mutants behave exactly like the original (``x * 1`` →
``x / 1``; a changed default that no caller reaches) and no test can kill them. The threshold
is a floor, not 100%; read the survivors' diffs before writing tests against them.

How mutmut 3 is driven (its workflow copies the sources into ``mutants/``, reads
``[tool.mutmut]`` from ``pyproject.toml`` and runs pytest in-process with its own runner):

1. the changed non-test Python files and their changed lines come from git (plant or atdd
   commit → candidate); the top-level functions and methods that overlap a changed line are
   the targets (mutmut mutates functions; module-level statements are not mutated);
2. in the clone, any ``[tool.mutmut]`` table of ``pyproject.toml`` is replaced by the
   harness's own: ``source_paths`` (the ``[test] pythonpath`` dir holding each file),
   ``only_mutate`` (the changed files), ``pytest_add_cli_args`` (no addopts, no cache);
3. ``python -m mutmut run --max-children 2 '*.<function>__mutmut_*' …`` runs only the target
   functions' mutants, with the harness's environment, under ``timeout_s`` (a run that does not
   finish is an ``error``, never a pass);
4. the ``.meta`` files are read; a target mutant left unchecked is an error.

mutmut imports the code from ``mutants/``, which it puts first on ``sys.path`` for the dirs
``.``, ``src`` and ``source`` only (its own rule); projects importing from elsewhere need
``[gates.mutation] python`` pointed at an environment that works for them. When mutmut is not
importable by that interpreter the gate is ``skipped`` with the reason — never passed.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Sequence
from pathlib import Path

from .. import plain_file
from ..errors import InvalidValue
from .base import Finding, GateContext, GateResult, fresh_clone, network_note
from .changed import changed_code_files, changed_functions, changed_lines
from .tools import ToolRun, run_tool

NAME = "mutation"
# mutmut's copy of one source file with its mutants, or its .meta: far past any real one
MUTANTS_MAX = 64 << 20
SUPPORTED_MAJOR = 3

KILLED_CODES: dict[int | None, str] = {1: "killed", 3: "killed", 37: "caught by type check"}
# mutmut.stats.status_by_exit_code, for the evidence; unknown codes are "suspicious".
STATUS = {0: "survived", 2: "interrupted", 5: "no tests", 33: "no tests", 34: "skipped",
          35: "suspicious", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout",
          255: "timeout", -11: "segfault", -9: "segfault", None: "not checked", **KILLED_CODES}


def status_of(code: int | None) -> str:
    return STATUS.get(code, "suspicious")


def mutmut_version(python: str) -> tuple[str | None, str]:
    """(version, "") if ``python`` can import mutmut, else (None, why not)."""
    try:
        out = subprocess.run(
            [python, "-c", "import importlib.metadata as m, mutmut; print(m.version('mutmut'))"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"cannot run {python}: {exc}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"mutmut is not importable by {python} ({last})"
    version = out.stdout.strip()
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) != SUPPORTED_MAJOR:
        return None, f"mutmut {version} is installed; this gate reads mutmut 3's result files"
    return version, ""


def skip_reason(ctx: GateContext) -> str | None:
    """Why the gate does not apply (opt-in: off for the packet's tier), or None. mutmut
    missing is found by :func:`run`, which keeps the interpreter it tried in the evidence."""
    settings = ctx.config.gates.mutation
    return None if settings.runs_for(ctx.packet.tier) else settings.off_reason(NAME)


def run(ctx: GateContext) -> GateResult:
    """mutmut on the changed functions, in a fresh clone (see :func:`skip_reason`)."""
    settings = ctx.config.gates.mutation
    python = settings.python or sys.executable
    version, why = mutmut_version(python)
    if version is None:
        return GateResult(NAME, "skipped", f"not run: {why}; install it with "
                          "`pip install 'andon[mutation]'`", details={"python": python})
    assert ctx.candidate_sha
    files = changed_code_files(ctx)
    lines = changed_lines(ctx, files)
    targets: dict[str, list[str]] = {}
    for f in files:
        source = ctx.repo.file_bytes(ctx.candidate_sha, f) or b""
        fns = changed_functions(source.decode("utf-8", errors="replace"), lines[f])
        if fns:
            targets[f] = fns
    details: dict = {"mutmut": version, "python": python, "targets": targets,
                     "min_score": settings.min_score, "note": EQUIVALENT_NOTE}
    if not targets:
        changed = ", ".join(files) or "none"
        return GateResult(NAME, "skipped", "not run: the candidate changed no Python function "
                          f"or method outside the tests (changed files: {changed})",
                          details=details)
    with fresh_clone(ctx.repo, ctx.candidate_sha, f"mutation-{ctx.packet.id}") as cwd:
        result = _mutate(ctx, cwd, python, targets, details)
    # mutmut's test runs are test runs too: no network unless [test] network = "on"
    if (note := network_note(details.get("runs", []))) and note not in result.summary:
        result.summary += f" ({note})"
    return result


EQUIVALENT_NOTE = ("equivalent mutants (changes no test can observe) exist: the score is "
                   "compared with a floor, not with 100%; read each survivor's diff")


def _mutate(ctx: GateContext, cwd: Path, python: str, targets: dict[str, list[str]],
            details: dict) -> GateResult:
    settings = ctx.config.gates.mutation
    try:
        write_mutmut_config(cwd, source_paths(ctx, list(targets)), list(targets),
                            list(getattr(ctx.config.test, "plugins", []) or []))
    except ValueError as exc:
        return GateResult(NAME, "error", f"could not configure mutmut in the clone: {exc}",
                          "harness", details=details)
    patterns = [f"*.{fn}__mutmut_*" for fns in targets.values() for fn in fns]
    run = run_tool([python, "-m", "mutmut", "run", "--max-children", "2", *patterns], cwd,
                   ctx.evidence_dir, "mutation-mutmut", settings.timeout_s,
                   extra_env={"TERM": "dumb"},  # autoload off: harness_env
                   network=ctx.config.test.network, readonly=ctx.fenced())
    details["runs"] = [run.to_evidence()]
    if run.timed_out:
        return GateResult(NAME, "error", f"mutmut did not finish within {settings.timeout_s:g} s "
                          "([gates.mutation] timeout_s); not a pass", "environment",
                          details=details)
    results = read_results(cwd, targets)
    if not results:
        if run.exit_status == 0 or "nothing matches" in run.output():
            return GateResult(NAME, "skipped", "not run: mutmut generated no mutant for the "
                              f"changed functions ({', '.join(patterns)})", details=details)
        return _broken(run, details)
    unchecked = sorted(k for k, v in results.items() if v is None)
    if run.exit_status != 0 or unchecked:
        return _broken(run, details, unchecked)
    killed = sorted(k for k, v in results.items() if v in KILLED_CODES)
    survivors = sorted(k for k in results if k not in killed)
    score = len(killed) / len(results)
    details.update(score=round(score, 4), killed=len(killed), executed=len(results),
                   statuses={k: status_of(v) for k, v in sorted(results.items())})
    shown = survivors[:settings.max_survivors_shown]
    diffs: dict[str, tuple[str, int | None]] = {}
    for f in targets:
        diffs.update(mutant_diffs(cwd, f, [n for n in shown if _file_of(n, targets) == f]))
    findings = []
    for name in shown:
        diff, line = diffs.get(name) or (show_mutant(python, cwd, name, ctx), None)
        where = _file_of(name, targets)
        if where and line:
            where = f"{where}:{line}"  # the line the mutant changed, in the candidate
        findings.append(Finding("surviving-mutant", f"{name} {status_of(results[name])}: "
                                f"{changed_text(diff)}", path=where))
        details.setdefault("survivor_diffs", {})[name] = diff
    details["survivors_not_shown"] = len(survivors) - len(shown)
    what = (f"mutation score {score:.0%} ({len(killed)} killed of {len(results)} mutants of "
            f"{sum(map(len, targets.values()))} changed functions; floor {settings.min_score:.0%})")
    if score < settings.min_score:
        return GateResult(NAME, "fail", f"{what}: the tests do not notice these changes to "
                          "the code (some survivors may be equivalent mutants: the floor is "
                          "not 100%)", "test", findings, details=details)
    return GateResult(NAME, "pass", what + (f"; {len(survivors)} survived (listed; may be "
                      "equivalent)" if survivors else ""), findings=findings, details=details)


def changed_text(diff: str) -> str:
    """``old → new`` from a unified diff's removed and added lines (short enough for a
    finding's one line; the whole diff is in the evidence's ``survivor_diffs``)."""
    minus = [ln[1:].strip() for ln in diff.splitlines()
             if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff.splitlines()
            if ln.startswith("+") and not ln.startswith("+++")]
    if not minus and not plus:
        return diff.strip()[:300]
    return f"{' / '.join(minus)} → {' / '.join(plus)}"


def _broken(run: ToolRun, details: dict, unchecked: Sequence[str] = ()) -> GateResult:
    tail = run.output_tail.strip().splitlines()[-5:]
    extra = f"; {len(unchecked)} mutants left unchecked" if unchecked else ""
    return GateResult(NAME, "error", f"mutmut run did not complete (exit status "
                      f"{run.exit_status}{extra}): {' | '.join(tail)[-400:]}", "environment",
                      details=details)


def _file_of(name: str, targets: dict[str, list[str]]) -> str | None:
    fn = name.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    return next((f for f, fns in targets.items() if fn in fns), None)


def source_paths(ctx: GateContext, files: list[str]) -> list[str]:
    """For each file, the ``[test] pythonpath`` dir that holds it, else its top-level dir."""
    out = []
    for f in files:
        roots = [p.strip("/") for p in ctx.config.test.pythonpath
                 if p.strip("/") not in ("", ".") and f.startswith(p.strip("/") + "/")]
        out.append(roots[0] if roots else (f.split("/", 1)[0] if "/" in f else f))
    return sorted(set(out))


def write_mutmut_config(cwd: Path, sources: list[str], files: list[str],
                        plugins: list[str]) -> None:
    """Replace ``[tool.mutmut]`` in the clone's pyproject.toml with the harness's own."""
    path = cwd / "pyproject.toml"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    kept, skipping = [], False
    for line in text.splitlines():
        header = re.match(r"\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
        if header:
            skipping = header.group(1).replace('"', "") in ("tool.mutmut",) or \
                header.group(1).replace('"', "").startswith("tool.mutmut.")
        if not skipping:
            kept.append(line)
    cli = ["-o", "addopts=", "-p", "no:cacheprovider", "-p", "no:randomly"]
    for p in plugins:
        cli += ["-p", p]
    ours = {"source_paths": sources, "only_mutate": files, "pytest_add_cli_args": cli,
            "use_setproctitle": False}
    # mutmut copies tests/, test/, test*.py and pyproject.toml into mutants/ by itself; a root
    # conftest.py (fixtures the tests need) it does not.
    if (cwd / "conftest.py").is_file():
        ours["also_copy"] = ["conftest.py"]
    block = ["", "[tool.mutmut]", *(f"{k} = {json.dumps(v)}" for k, v in ours.items())]
    new = "\n".join(kept + block) + "\n"
    try:
        data = tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidValue(f"pyproject.toml is not valid TOML after the edit: {exc}") from None
    if data.get("tool", {}).get("mutmut") != ours:
        raise InvalidValue("pyproject.toml defines tool.mutmut in a form andon cannot replace")
    path.write_text(new, encoding="utf-8")


def read_results(cwd: Path, targets: dict[str, list[str]]) -> dict[str, int | None]:
    """Exit code per target mutant, from mutmut's ``mutants/<file>.meta``."""
    out: dict[str, int | None] = {}
    for f, fns in targets.items():
        try:  # as the mutants themselves (mutant_diffs)
            doc = json.loads(plain_file.read(cwd / "mutants" / f"{f}.meta", MUTANTS_MAX))
        except (OSError, ValueError):
            continue
        codes = doc.get("exit_code_by_key", {}) if isinstance(doc, dict) else {}
        for key, code in codes.items():
            if key.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0] in fns:
                out[key] = code
    return out


def mutant_diffs(cwd: Path, path: str, names: list[str]) -> dict[str, tuple[str, int | None]]:
    """Per named mutant of ``path``: the unified diff original → mutant and the line of the
    candidate's file it changes. Read from the mutated copy mutmut wrote (``mutants/<path>``:
    each function as ``<fn>__mutmut_orig`` beside its ``<fn>__mutmut_<n>`` variants) — what
    ``mutmut show`` prints, without a process per mutant."""
    try:  # written while the code under test ran: never followed, never waited on
        source = plain_file.read_text(cwd / "mutants" / path, MUTANTS_MAX)
        tree = ast.parse(source)
        original = ast.parse(plain_file.read_text(cwd / path, MUTANTS_MAX))
    except (OSError, SyntaxError, ValueError):
        return {}
    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, funcs)}
    starts = {}  # mutmut's function name → its def line in the candidate
    for node in original.body:
        if isinstance(node, funcs):
            starts[f"x_{node.name}"] = node.lineno
        elif isinstance(node, ast.ClassDef):
            starts.update({f"xǁ{node.name}ǁ{sub.name}": sub.lineno for sub in node.body
                           if isinstance(sub, funcs)})
    out = {}
    for name in names:
        fn = name.rsplit(".", 1)[-1]
        base = fn.rsplit("__mutmut_", 1)[0]
        orig, mutant = defs.get(base + "__mutmut_orig"), defs.get(fn)
        if orig is None or mutant is None:
            continue
        plain = base.split("ǁ")[-1].removeprefix("x_")
        a, b = (textwrap.dedent(ast.get_source_segment(source, d, padded=True) or "")
                .replace(f"def {d.name}(", f"def {plain}(", 1).splitlines()
                for d in (orig, mutant))
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                     min(len(a), len(b)))
        line = starts[base] + first if base in starts else None
        out[name] = ("\n".join(difflib.unified_diff(a, b, path, path, lineterm="")), line)
    return out


def show_mutant(python: str, cwd: Path, name: str, ctx: GateContext) -> str:
    """The mutant's diff, as ``mutmut show`` prints it (first line, the status, dropped)."""
    r = run_tool([python, "-m", "mutmut", "show", name], cwd, ctx.evidence_dir,
                 "mutation-show", 60, extra_env={"TERM": "dumb"})
    text = r.output().strip()
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(lines)[:2000] or f"(mutmut show printed nothing; exit {r.exit_status})"
