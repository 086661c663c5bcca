"""What the implement stage changed, as the slower gates need it: Python files and line numbers.

The change is read from git between the harness's last commit before the implement stage (the
atdd commit, else the plant commit) and the candidate, never from the worktree. Test files
(``[stages] test_paths``) and the packets folder are not "changed code".
"""

from __future__ import annotations

import ast
import re

from ..packet import path_matches
from .base import GateContext


def implement_base(ctx: GateContext) -> str:
    return ctx.atdd_sha or ctx.plant_sha


def changed_code_files(ctx: GateContext) -> list[str]:
    """Python files the candidate added or modified that are not tests, sorted."""
    assert ctx.candidate_sha
    packets = ctx.config.andon.packets_dir.strip("/") + "/**"
    return sorted(c.path for c in ctx.repo.changes(implement_base(ctx), ctx.candidate_sha)
                  if c.status in ("A", "M") and c.path.endswith(".py")
                  and not path_matches(c.path, ctx.config.stages.test_paths)
                  and not path_matches(c.path, [packets]))


def changed_lines(ctx: GateContext, paths: list[str]) -> dict[str, set[int]]:
    """Line numbers (in the candidate) that the candidate added or changed, per path."""
    assert ctx.candidate_sha
    out: dict[str, set[int]] = {p: set() for p in paths}
    if not paths:
        return out
    diff = ctx.repo.diff(implement_base(ctx), ctx.candidate_sha, paths, unified=0,
                         renames=False)
    current = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:]
            current = name[2:] if name.startswith("b/") else None
        elif line.startswith("@@") and current in out:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            if m:
                start, count = int(m.group(1)), int(m.group(2) or 1)
                out[current].update(range(start, start + count))
    return out


def changed_functions(source: str, lines: set[int]) -> list[str]:
    """mutmut's names (``x_<function>``, ``xǁ<Class>ǁ<method>``) of the top-level functions and
    methods of top-level classes whose source overlaps ``lines``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []

    def touches(node: ast.stmt) -> bool:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        return any(first <= n <= (node.end_lineno or node.lineno) for n in lines)

    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, funcs) and touches(node):
            names.append(f"x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, funcs) and touches(sub):
                    names.append(f"xǁ{node.name}ǁ{sub.name}")
    return names
