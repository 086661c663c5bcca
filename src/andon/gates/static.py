"""``static`` gate: the project's own linters and type checkers, run by the harness.

``[gates.static] commands`` lists argv lists (default: none, and the gate is skipped). Each runs
in a fresh clone of the candidate, with the harness's environment, with the changed non-test
Python files appended to its argv. A first word ``python`` means andon's interpreter; other
words are looked up on the harness's fixed ``PATH`` (andon's own bin dir first).

Output is parsed into findings (file, line, code, message):

- a JSON list of objects with ``filename``/``location.row``/``code``/``message`` (``ruff check
  --output-format=json``);
- lines ``file:line[:col]: error|warning|note: message [code]`` (mypy, pyright's text output,
  flake8-like ``file:line:col: CODE message``);
- anything else: one finding with the output's tail, when the command exited non-zero.

A finding fails the gate only when it lies on a line the candidate added or changed
(``changed_lines_only = true``, the default: the project's old debt is not the agent's); the
others are kept in the evidence as notes. A command that cannot be run is an ``error``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .. import plain_file
from .base import Finding, GateContext, GateResult, fresh_clone
from .changed import changed_code_files, changed_lines
from .tools import run_tool

NAME = "static"
_LINE = re.compile(r"^(?P<file>[^:\s][^:]*\.py):(?P<line>\d+)(?::\d+)?:\s*"
                   r"(?:(?P<sev>error|warning|note):\s*)?(?P<msg>.*?)(?:\s+\[(?P<code>[\w-]+)\])?$")
_FLAKE = re.compile(r"^(?P<code>[A-Z]+\d+)\s+(?P<msg>.*)$")


def parse_output(text: str, root: Path) -> list[dict] | None:
    """Findings as dicts (path, line, code, message); None when the output has no form we know."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list):
            out = []
            for it in items:
                if not isinstance(it, dict):
                    return None
                loc = it.get("location") or {}
                out.append({"path": _rel(str(it.get("filename", "")), root),
                            "line": loc.get("row"), "code": it.get("code") or "",
                            "message": str(it.get("message", ""))})
            return out
    found = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m or m.group("sev") == "note":
            continue
        msg, code = m.group("msg"), m.group("code") or ""
        if not code and (f := _FLAKE.match(msg)):
            code, msg = f.group("code"), f.group("msg")
        found.append({"path": _rel(m.group("file"), root), "line": int(m.group("line")),
                      "code": code, "message": msg})
    return found or None


def tool_name(command: list[str]) -> str:
    """``ruff`` for ``["ruff", …]``, ``mypy`` for ``["python", "-m", "mypy", …]``."""
    if len(command) > 2 and command[1] == "-m":
        return command[2]
    return Path(command[0]).name


def _rel(path: str, root: Path) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            return p.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return path
    return p.as_posix().removeprefix("./")


def skip_reason(ctx: GateContext) -> str | None:
    """Why the gate does not apply (no ``[gates.static] commands``), or None."""
    if not ctx.config.gates.static.commands:
        return "not run: no static commands configured ([gates.static] commands)"
    return None


def run(ctx: GateContext) -> GateResult:
    """The configured linters on the candidate's changed lines (see :func:`skip_reason`)."""
    settings = ctx.config.gates.static
    assert ctx.candidate_sha
    files = changed_code_files(ctx)
    if not files:
        return GateResult(NAME, "skipped", "not run: the candidate changed no Python file "
                          "outside the tests")
    lines = changed_lines(ctx, files)
    blocking: list[Finding] = []
    notes: list[dict] = []
    runs = []
    with fresh_clone(ctx.repo, ctx.candidate_sha, f"static-{ctx.packet.id}") as cwd:
        for i, command in enumerate(settings.commands, start=1):
            argv = [sys.executable if (j == 0 and w == "python") else w
                    for j, w in enumerate(command)] + files
            r = run_tool(argv, cwd, ctx.evidence_dir, f"static-{i}", settings.timeout_s,
                         stderr_apart=True, readonly=ctx.fenced())  # a tool's plugins run
            runs.append(r.to_evidence())
            tool = tool_name(command)
            if r.timed_out or r.exit_status == 127 or (r.exit_status or 0) < 0:
                why = "timed out" if r.timed_out else f"exit status {r.exit_status}"
                return GateResult(NAME, "error", f"{' '.join(command)} could not run ({why}): "
                                  f"{r.output_tail[-300:]}", "environment",
                                  details={"runs": runs})
            parsed = parse_output(r.output(), cwd)
            if parsed is None:
                if r.exit_status != 0:
                    try:  # the tool wrote it by name: never followed (plain_file.py)
                        err = plain_file.tail(ctx.evidence_dir / f"static-{i}.stderr.log", 1000)
                    except OSError:
                        err = ""
                    said = (r.output_tail + "\n" + err).strip()
                    blocking.append(Finding("static", f"{tool} exited {r.exit_status}: "
                                            f"{said[-1500:]}"))
                continue
            for f in parsed:
                text = f"{tool} {f['code']}: {f['message']}".replace(" : ", ": ")
                where = f"{f['path']}:{f['line']}" if f["line"] else f["path"]
                on_change = f["line"] in lines.get(f["path"], set())
                if on_change or not settings.changed_lines_only:
                    blocking.append(Finding("static", f"{where}: {text}", path=where))
                else:
                    notes.append({**f, "tool": tool})
    details = {"runs": runs, "files": files, "notes": notes}
    if blocking:
        return GateResult(NAME, "fail", f"{blocking[0].message}" + (
            f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""), "code",
            blocking, details=details)
    extra = f"; {len(notes)} findings on unchanged lines kept as notes" if notes else ""
    return GateResult(NAME, "pass", f"{len(settings.commands)} static commands found nothing "
                      f"on the changed lines of {len(files)} files{extra}", details=details)
