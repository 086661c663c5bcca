"""The shape of the code (DESIGN.md, "Shape of the code"): no import cycle between andon's
modules, and no module over ~400 lines. Read from the source with ``ast``, nothing imported.

Imports count when they run with the module (its top level, inside ``if``/``try``/``with``
blocks) and also under ``if TYPE_CHECKING:``: a cycle hidden behind TYPE_CHECKING is still
two modules that cannot be understood apart. Imports inside functions are not edges: they
run later, by choice.
"""

from __future__ import annotations

import ast
from pathlib import Path

import andon

SRC = Path(andon.__file__).parent
MAX_LINES = 400

# Modules over MAX_LINES today, with their line count: an entry may only shrink. Split the
# module, then lower or delete its entry. Empty: keep it so.
TOO_LONG_TODAY: dict[str, int] = {
}


def module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run with the module or under TYPE_CHECKING: not inside a def or class."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
            if isinstance(node, ast.Try):
                todo += [s for h in node.handlers for s in h.body]
    return found


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` for every module under ``root``."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _top_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                           for a in node.names]
            edges |= {t for t in targets if t in paths and t != name}
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle_between_andon_modules():
    graph = import_graph()
    assert "andon.review.stage" in graph and "andon.attempt" in graph["andon.runner"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_cycle_check_sees_relative_and_type_checking_imports(tmp_path):
    """The check on a small package: a cycle through a TYPE_CHECKING import and a relative
    ``from . import`` is found; imports inside a function are not edges."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import a\n")
    (pkg / "c.py").write_text("def f():\n    from . import a\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert graph["pkg.c"] == set()
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (pkg / "sub" / "b.py").write_text("import os\n")
    assert find_cycle(import_graph(pkg)) is None


def test_no_module_over_400_lines():
    counts = {p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
              for p in SRC.rglob("*.py")}
    over = {name: n for name, n in counts.items() if n > MAX_LINES}
    grown = {name: (n, TOO_LONG_TODAY.get(name)) for name, n in over.items()
             if n > TOO_LONG_TODAY.get(name, MAX_LINES)}
    assert grown == {}, f"over {MAX_LINES} lines (now, allowed): {grown}"
    fixed = sorted(set(TOO_LONG_TODAY) - set(over))
    assert fixed == [], f"back under {MAX_LINES} lines: delete their TOO_LONG_TODAY entries"
