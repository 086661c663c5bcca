"""``patterns`` gate: rules on the lines the agent ADDED to non-test Python code.

Which lines are added comes from git (``git diff -U0`` from the plant/atdd commit to the
candidate), never from the agent. Each changed ``.py`` file that is not a test path, not planted
and not under the packets folder is parsed at the candidate commit; an AST node counts when its
first line is an added line. Built-in rules (id → what it flags, default severity):

- ``test-detection`` (block): ``PYTEST_CURRENT_TEST``, ``"pytest" in sys.modules``,
  ``sys.modules["pytest"]``, ``sys.modules.get("pytest")`` — code that behaves differently
  under test;
- ``skip-call`` (block): ``pytest.skip/xfail/importorskip/exit``, ``unittest.SkipTest``;
- ``os-exit`` (block): ``os._exit(...)`` — ends the run before any report is written;
- ``monkeypatch`` (block): assignment (or ``setattr``/``delattr``) to an attribute of an
  imported module or of ``builtins``/``__builtins__``;
- ``mock-patch`` (block): ``mock.patch``/``patch(...)`` from ``unittest.mock`` outside tests;
- ``constant-eq`` (block): an ``__eq__`` whose every return is the constant ``True`` (or an
  ``__ne__`` always ``False``), or ``__eq__ = lambda *a: True``;
- ``broad-except`` (block): bare ``except:`` / ``except Exception`` / ``except BaseException``
  whose body raises nothing and ends in ``return``, ``pass`` or ``continue``;
- ``test-path`` (block): a string naming a test path (``tests/…``, a ``test_paths`` glob, a
  planted file or its name, ``"tests"``) — code that reads the tests or fixtures;
- ``pragma`` (block): ``# pragma: no cover`` / ``no mutate`` / ``no branch``;
- ``copied-literal`` (block): a string (≥ 3 chars) or a non-trivial number (not -2…2, not 10,
  100, 1000) that appears in an ``assert`` of a planted test and now appears in a comparison,
  a ``return`` or a dict/set literal of the new code, as the value itself (``return 12``,
  ``== (3, 4)``; not inside a call or arithmetic) — special-casing the tested inputs.

``[gates.patterns]`` in andon.toml: ``enabled``, ``severities`` (rule id → block | warn | off)
and ``[[gates.patterns.rules]]`` (id, regex on each added line, severity, message, paths).
A block finding fails the gate (layer ``code``); warn findings pass it and stay in the evidence.
Limits: the rules see one file at a time and only Python; a determined agent can hide intent
from any syntactic check (``getattr(__import__("o"+"s"), "_exit")``). They are a net under the
suite, hidden tests and review, not a proof.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..packet import path_matches
from .base import Finding, GateContext, GateResult

DEFAULT_SEVERITY = {
    "test-detection": "block", "skip-call": "block", "os-exit": "block", "monkeypatch": "block",
    "mock-patch": "block", "constant-eq": "block", "broad-except": "block", "test-path": "block",
    "pragma": "block", "copied-literal": "block",
}
PRAGMA = re.compile(r"#.*\b(pragma:\s*no\s*(cover|mutate|branch)|pragma:\s*nocover|nomutate)\b",
                    re.I)
TRIVIAL_NUMBERS = {-2, -1, 0, 1, 2, 10, 100, 1000}
SKIP_FUNCS = {"skip", "xfail", "importorskip", "exit"}
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


@dataclass(frozen=True)
class Hit:
    rule: str
    path: str
    line: int
    message: str


def added_lines(diff: str) -> set[int]:
    """Line numbers (in the new file) that a ``git diff -U0`` text adds."""
    lines: set[int] = set()
    for m in HUNK.finditer(diff):
        start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        lines.update(range(start, start + count))
    return lines


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - unparse of a strange node: no name
        return ""


def _is_sys_modules(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "modules"
               and _dotted(n.value) == "sys" for n in ast.walk(node))


def _mentions_pytest(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in ("pytest", "_pytest")
               for n in ast.walk(node))


def _number_ok(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v not in TRIVIAL_NUMBERS


def literal_keys(node: ast.AST) -> set[object]:
    """Literals under ``node`` that count: strings of 3+ chars and non-trivial numbers
    (negative numbers included: ``-7`` is a UnaryOp around 7)."""
    out: set[object] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) \
                and isinstance(n.operand, ast.Constant) and _number_ok(n.operand.value):
            out.add(("num", -n.operand.value))
        if isinstance(n, ast.Constant):
            if isinstance(n.value, str) and len(n.value) >= 3:
                out.add(("str", n.value))
            elif _number_ok(n.value):
                out.add(("num", n.value))
    return out


def direct_literals(node: ast.AST | None) -> set[object]:
    """Literals that ARE the value (a constant, or a tuple/list/set/dict of them), not ones
    nested in a call or an arithmetic expression: ``return 12``, ``== (3, 4)``."""
    if node is None:
        return set()
    if isinstance(node, (ast.Constant, ast.UnaryOp)):
        return literal_keys(node) if isinstance(node, ast.Constant) or isinstance(
            node.operand, ast.Constant) else set()
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(direct_literals(e) for e in node.elts))
    if isinstance(node, ast.Dict):
        return set().union(*(direct_literals(e) for e in [*node.keys, *node.values]))
    return set()


def planted_literals(sources: list[str]) -> set[object]:
    """Literals in the ``assert`` statements of the planted test files."""
    out: set[object] = set()
    for text in sources:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Assert):
                out |= literal_keys(n.test)
    return out


class Scanner(ast.NodeVisitor):
    """Walk one file's AST and report hits on added lines."""

    def __init__(self, path: str, added: set[int], test_strings: set[str],
                 test_globs: list[str], copied: set[object]):
        self.path, self.added = path, added
        self.test_strings, self.test_globs, self.copied = test_strings, test_globs, copied
        self.hits: list[Hit] = []
        self.modules: set[str] = {"builtins", "__builtins__"}
        self.mock_names: set[str] = set()

    def hit(self, rule: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0)
        if line in self.added:
            self.hits.append(Hit(rule, self.path, line, message))

    def scan(self, tree: ast.Module) -> list[Hit]:
        for n in ast.walk(tree):  # imports anywhere in the file (added or not) name modules
            if isinstance(n, ast.Import):
                for a in n.names:
                    self.modules.add(a.asname or a.name.split(".")[0])
                    if a.name in ("mock", "unittest.mock"):
                        self.mock_names.add(a.asname or a.name.split(".")[0])
            elif isinstance(n, ast.ImportFrom):
                if n.module in ("unittest.mock", "mock"):
                    self.mock_names |= {a.asname or a.name for a in n.names}
                elif n.module == "unittest":
                    self.mock_names |= {a.asname or a.name for a in n.names if a.name == "mock"}
        self.visit(tree)
        return self.hits

    # -- rules --------------------------------------------------------------------------

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or a bare string: documentation, not behaviour
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, str):
            if "PYTEST_CURRENT_TEST" in v:
                self.hit("test-detection", node, "reads PYTEST_CURRENT_TEST: behaves "
                         "differently under test")
            elif self._names_test_path(v):
                self.hit("test-path", node, f"names a test path {v!r}: code that reads the "
                         "tests or their fixtures")

    def _names_test_path(self, v: str) -> bool:
        s = v.strip().strip("/").replace("\\", "/")
        if not s or len(s) > 300 or "\n" in s:
            return False
        if s == "tests" or s.startswith(("tests/", "test/")) or "/tests/" in v:
            return True
        if s in self.test_strings:
            return True
        return s.endswith(".py") and path_matches(s, self.test_globs)

    def visit_Compare(self, node: ast.Compare) -> None:
        if _is_sys_modules(node) and _mentions_pytest(node):
            self.hit("test-detection", node, "looks for pytest in sys.modules: behaves "
                     "differently under test")
        self._copied(set().union(*(direct_literals(x) for x in (node.left, *node.comparators))),
                     node, "compares with")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _is_sys_modules(node.value) and _mentions_pytest(node.slice):
            self.hit("test-detection", node, "reads sys.modules['pytest']")
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self._copied(direct_literals(node.value), node, "returns")
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        self._copied(direct_literals(node), node, "maps")
        self.generic_visit(node)

    def visit_Set(self, node: ast.Set) -> None:
        self._copied(direct_literals(node), node, "holds")
        self.generic_visit(node)

    def _copied(self, found: set[object], node: ast.AST, verb: str) -> None:
        same = found & self.copied
        if same:
            shown = ", ".join(repr(v) for _, v in sorted(same, key=repr)[:4])
            self.hit("copied-literal", node, f"{verb} {shown}, copied from the planted tests' "
                     "asserts: special-casing the tested inputs?")

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        parts = name.split(".")
        if name == "os._exit":
            self.hit("os-exit", node, "os._exit ends the process before any test report is "
                     "written")
        elif len(parts) == 2 and parts[0] == "pytest" and parts[1] in SKIP_FUNCS:
            self.hit("skip-call", node, f"{name}() in code under test")
        elif parts[-1] == "SkipTest":
            self.hit("skip-call", node, f"{name}: skips the test from the code under test")
        elif _is_sys_modules(node.func) and parts[-1] == "get" and _mentions_pytest(node):
            self.hit("test-detection", node, "looks up pytest in sys.modules")
        elif name in ("setattr", "delattr") and node.args \
                and _dotted(node.args[0]).split(".")[0] in self.modules:
            self.hit("monkeypatch", node, f"{name}() on module {_dotted(node.args[0])}: "
                     "monkeypatching from production code")
        elif self._is_mock_patch(parts):
            self.hit("mock-patch", node, f"{name}() outside tests")
        self.generic_visit(node)

    def _is_mock_patch(self, parts: list[str]) -> bool:
        if "patch" not in parts:
            return False
        i = parts.index("patch")
        return i == 0 and "patch" in self.mock_names or i > 0 and parts[i - 1] in (
            "mock", *self.mock_names)

    def visit_Raise(self, node: ast.Raise) -> None:
        if node.exc is not None and _dotted(node.exc).split("(")[0].split(".")[-1] == "SkipTest":
            self.hit("skip-call", node, "raises SkipTest from the code under test")
            return
        self.generic_visit(node)

    def _targets(self, targets: list[ast.expr], node: ast.AST) -> None:
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Attribute):
                    root = _dotted(n).split(".")[0]
                    if root in self.modules and isinstance(n.ctx, (ast.Store, ast.Del)):
                        self.hit("monkeypatch", node, f"assigns {_dotted(n)}: monkeypatching "
                                 "a module from production code")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node.targets, node)
        for t in node.targets:
            if isinstance(t, ast.Name) and t.id == "__eq__" and isinstance(node.value, ast.Lambda) \
                    and isinstance(node.value.body, ast.Constant) and node.value.body.value is True:
                self.hit("constant-eq", node, "__eq__ always returns True")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets([node.target], node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._targets(node.targets, node)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in ("__eq__", "__ne__"):
            want = node.name == "__eq__"
            returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
            if returns and all(isinstance(r.value, ast.Constant) and r.value.value is want
                               for r in returns):
                self.hit("constant-eq", node, f"{node.name} always returns {want}: an object "
                         "that equals everything")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        names = ([] if node.type is None else
                 [_dotted(e) for e in node.type.elts] if isinstance(node.type, ast.Tuple)
                 else [_dotted(node.type)])
        broad = node.type is None or any(n in ("Exception", "BaseException") for n in names)
        raises = any(isinstance(n, ast.Raise) for b in node.body for n in ast.walk(b))
        if broad and not raises and isinstance(node.body[-1], (ast.Return, ast.Pass,
                                                                ast.Continue)):
            what = "bare except" if node.type is None else f"except {', '.join(names)}"
            self.hit("broad-except", node, f"{what} swallows every error "
                     f"({type(node.body[-1]).__name__.lower()})")
        self.generic_visit(node)


def scan_file(path: str, text: str, added: set[int], *, test_strings: set[str] = frozenset(),
              test_globs: list[str] = (), copied: set[object] = frozenset()) -> list[Hit]:
    """Every built-in hit on an added line of one Python file (regex rules need no parse)."""
    hits = [Hit("pragma", path, i, f"coverage/mutation pragma: {m.group(1)}")
            for i, line in enumerate(text.splitlines(), start=1)
            if i in added and (m := PRAGMA.search(line))]
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return hits
    hits += Scanner(path, added, set(test_strings), list(test_globs), set(copied)).scan(tree)
    return hits


def run(ctx: GateContext) -> GateResult:
    settings = ctx.config.gates.patterns
    if not settings.enabled:
        return GateResult("patterns", "skipped", "disabled by [gates.patterns] enabled = false")
    assert ctx.candidate_sha
    base, head = ctx.atdd_sha or ctx.plant_sha, ctx.candidate_sha
    packets = ctx.config.andon.packets_dir.strip("/")
    test_globs = list(ctx.config.stages.test_paths)
    planted = sorted(ctx.packet.plant_files)
    test_strings = {p for p in planted} | {p.rsplit("/", 1)[-1] for p in planted}
    test_strings |= {p.rsplit("/", 1)[-1] for p in ctx.packet.hidden_files}
    sources = []
    for p in ctx.planted_tests():
        data = ctx.repo.file_bytes(head, p) or ctx.repo.file_bytes(base, p)
        if data is not None:
            sources.append(data.decode("utf-8", errors="replace"))
    copied = planted_literals(sources)

    severity = {**DEFAULT_SEVERITY, **{r.id: r.severity for r in settings.rules},
                **settings.severities}
    hits: list[Hit] = []
    scanned = []
    for c in ctx.repo.changes(base, head):
        p = c.path
        if c.status == "D" or c.new_mode != "100644" and c.new_mode != "100755":
            continue
        if p in ctx.packet.plant_files or path_matches(p, test_globs) \
                or p == packets or p.startswith(packets + "/"):
            continue
        data = ctx.repo.file_bytes(head, p)
        if data is None:
            continue
        text = data.decode("utf-8", errors="replace")
        added = added_lines(ctx.repo.diff(base, head, [p], unified=0))
        lines = text.splitlines()
        for rule in settings.rules:
            if path_matches(p, rule.paths):
                rx = re.compile(rule.regex)
                hits += [Hit(rule.id, p, i, rule.message or f"matches {rule.regex!r}")
                         for i in sorted(added) if i <= len(lines) and rx.search(lines[i - 1])]
        if p.endswith(".py"):
            scanned.append(p)
            hits += scan_file(p, text, added, test_strings=test_strings,
                              test_globs=test_globs, copied=copied)
    findings, block = [], []
    seen = set()
    for h in sorted(hits, key=lambda h: (h.path, h.line, h.rule)):
        sev = severity.get(h.rule, "block")
        if sev == "off" or (h.rule, h.path, h.line) in seen:
            continue
        seen.add((h.rule, h.path, h.line))
        f = Finding(h.rule, f"{h.path}:{h.line}: [{sev}] {h.message}", path=h.path, line=h.line)
        findings.append(f)
        if sev == "block":
            block.append(f)
    details = {"scanned": scanned, "warnings": len(findings) - len(block)}
    if block:
        more = f" (and {len(block) - 1} more)" if len(block) > 1 else ""
        return GateResult("patterns", "fail", f"rule {block[0].kind} at {block[0].path}:"
                          f"{block[0].line}: {block[0].message.split(': ', 1)[1]}{more}",
                          "code", findings, details=details)
    summary = f"{len(scanned)} changed Python file(s) scanned, no blocking pattern"
    if findings:
        summary += f"; {len(findings)} warning(s): " + ", ".join(
            f"{f.kind} at {f.path}:{f.line}" for f in findings[:3])
    return GateResult("patterns", "pass", summary, findings=findings, details=details)
