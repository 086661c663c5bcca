"""``patterns`` gate: rules on the lines the agent ADDED, in code and in the tests it wrote.

Which lines are added comes from git (``git diff -U0`` from the plant commit to the
candidate), never from the agent. Every changed ``.py`` file that is not planted and not under
the packets folder is decoded as Python decodes it (its BOM or coding cookie, ``source``) and
parsed at the candidate; an AST node counts when its first line is an added line (every line,
in an encoding where git's lines are not the decoded ones). A file that cannot be decoded or
parsed is a finding (``syntax-error``), never a pass. Test files (``[stages] test_paths``)
the agent added or changed are scanned too, with the rules that make sense there (a test may
``monkeypatch``, ``pytest.skip`` and read test paths; it may not reach the runner's internals
or the import system).

Modules: ``source`` (source-encoding, syntax-error), ``production`` (the first rules:
skip-call, monkeypatch, copied-literal, …),
``integrity`` (runner-internals, dynamic-import, dynamic-code, import-system, dynamic-attr),
``detection`` (harness-detection), ``literals`` (the values the packet's tests keep),
``resolve`` (import aliases and strings folded from literal pieces), ``namespace`` (writes
into a namespace dict, under any name it is reached by), ``modules`` (which names a ``from``
import binds are modules, by the tree's files). docs/gates.md lists
every rule.

``[gates.patterns]`` in andon.toml: ``enabled``, ``severities`` (rule id → block | warn | off)
and ``[[gates.patterns.rules]]`` (id, regex on each added line of non-test files, severity,
message, paths). A block finding fails the gate (layer ``code``); warn findings pass it and
stay in the evidence. Limits: the rules see one file at a time and only Python; a determined
agent can hide intent from any syntactic check. They are a net under the suite, hidden tests
and review, not a proof.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

from ...git.repo import Change
from ...packet import path_matches
from ..base import Finding, GateContext, GateResult
from ..shadowing import own_modules
from .detection import Detection
from .integrity import Integrity
from .literals import data_file_literals, planted_literals
from .modules import project_modules
from .namespace import Namespaces
from .production import Hit, Key, Scanner, literal_counts, pragma_hits
from .resolve import Resolver
from .source import python_source, unparsed

__all__ = ["DEFAULT_SEVERITY", "NAME", "Hit", "added_lines", "planted_literals", "python_source",
           "run", "scan_file", "skip_reason"]

DEFAULT_SEVERITY = {
    "test-detection": "block", "skip-call": "block", "os-exit": "block", "monkeypatch": "block",
    "mock-patch": "block", "constant-eq": "block", "broad-except": "block", "test-path": "block",
    "pragma": "block", "copied-literal": "block", "runner-internals": "block",
    "dynamic-import": "block", "dynamic-code": "block", "import-system": "block",
    "harness-detection": "block", "dynamic-attr": "block", "source-encoding": "block",
    "syntax-error": "block",
}
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def added_lines(diff: str) -> set[int]:
    """Line numbers (in the new file) that a ``git diff -U0`` text adds."""
    lines: set[int] = set()
    for m in HUNK.finditer(diff):
        start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        lines.update(range(start, start + count))
    return lines


def scan_file(path: str, text: str, added: set[int], *, is_test: bool = False,
              test_strings: AbstractSet[str] = frozenset(), test_globs: Sequence[str] = (),
              copied: AbstractSet[tuple[str, object]] = frozenset(),
              own: AbstractSet[str] = frozenset(),
              visible: AbstractSet[tuple[str, object]] | None = None,
              base: str = "", modules: AbstractSet[str] = frozenset(),
              roots: Sequence[str] = ("",)) -> list[Hit]:
    """Every built-in hit on an added line of one Python file. ``is_test``: the file is a
    test the agent wrote (only the rules that hold in tests); ``own``: the project's own
    top-level module names (``andon`` is not an internal when it is the project);
    ``visible``: the ``copied`` values a message may repeat (None: all; the rest come only
    from hidden tests); ``base``: the file's decoded text before the attempt ("" when it
    created the file), whose literals are no copies (``copied-literal`` counts a value only
    where ``text`` holds more of it); ``modules``: the dotted names of the project's modules
    under its source ``roots`` (modules.py: ``from calc import ops`` binds a module). ``text``
    is decoded already (:func:`python_source`); one that does not parse is a
    ``syntax-error`` hit and nothing else."""
    hits = [] if is_test else pragma_hits(path, text, added)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as e:  # ValueError: a null byte, on Python 3.11
        line = getattr(e, "lineno", None) or 1
        return [*hits, unparsed(path, line, f"does not parse ({getattr(e, 'msg', e)})")]
    except (MemoryError, RecursionError):  # the parser's own limits
        return [*hits, unparsed(path, 1, "is nested too deeply to parse")]
    # The visitors recurse once or more per level of nesting: `1 + 1 + …` of 500 terms, which
    # CPython compiles (its limit is near 3,000), passed Python's limit and ended the
    # attempt as a harness error. A higher limit made the gate take minutes (the resolver
    # folds every subtree): such a file is a finding, not read.
    try:
        r = Resolver(tree)
        ns = Namespaces(tree, r)
        hits += Scanner(path, added, set(test_strings), list(test_globs), set(copied), r,
                        is_test, visible, _base_counts(base), ns, modules, roots).scan(tree)
        for scanner in (Integrity(path, added, r, is_test=is_test, own=set(own), ns=ns),
                        Detection(path, added, r, is_test=is_test)):
            scanner.visit(tree)
            hits += scanner.hits
    except RecursionError:
        return [*hits, unparsed(path, 1, "is nested too deeply for the gate to read (an "
                                "expression of hundreds of levels): not checked")]
    return hits


def _base_counts(base: str) -> Counter[Key]:
    """literal_counts of a base text; none when it is empty or does not parse (every value
    the attempt's file holds is then its own)."""
    if not base:
        return Counter()
    try:
        return literal_counts(ast.parse(base))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return Counter()


def _copied(ctx: GateContext, base: str, head: str, read: Callable[[str, str], bytes | None]
            ) -> tuple[set[tuple[str, object]], set[tuple[str, object]]]:
    """(every value the packet's tests keep, the ones the agent could see): planted, atdd
    and hidden test files, and data files under the planted and hidden paths (literals.py).
    Values only hidden files keep are never repeated in a message. ``read(rev, path)``: a
    file's bytes (:func:`_reader`)."""
    sources = []
    for p in ctx.planted_tests():
        data = read(head, p) or read(base, p)
        if data is not None:
            sources.append(data.decode("utf-8", errors="replace"))
    visible = set(planted_literals(sources))
    for p, (data, _) in ctx.packet.plant_blobs().items():
        visible |= data_file_literals(p, data)
    hidden = ctx.packet.hidden_blobs()
    copied = visible | planted_literals([data.decode("utf-8", errors="replace")
                                         for p, (data, _) in hidden.items() if p.endswith(".py")])
    for p, (data, _) in hidden.items():
        copied |= data_file_literals(p, data)
    return copied, visible


NAME = "patterns"
_LONE_CR = re.compile(rb"\r(?!\n)")


def skip_reason(ctx: GateContext) -> str | None:
    """Why the gate does not apply (``[gates.patterns] enabled = false``), or None."""
    return None if ctx.config.gates.patterns.enabled else \
        "disabled by [gates.patterns] enabled = false"


def run(ctx: GateContext) -> GateResult:
    """The patterns rules on the candidate's change (see :func:`skip_reason`)."""
    settings = ctx.config.gates.patterns
    assert ctx.candidate_sha
    # From the plant commit: the tests an atdd stage wrote are the agent's too.
    base, head = ctx.plant_sha, ctx.candidate_sha
    packets = ctx.config.andon.packets_dir.strip("/")
    test_globs = list(ctx.config.stages.test_paths)
    planted = sorted(ctx.packet.plant_files)
    test_strings = {p for p in planted} | {p.rsplit("/", 1)[-1] for p in planted}
    test_strings |= {p.rsplit("/", 1)[-1] for p in ctx.packet.hidden_files}
    changes = _scanned(ctx, ctx.repo.changes(base, head), packets, test_globs)
    read = _reader(ctx, base, head, changes)
    copied, visible = _copied(ctx, base, head, read)
    own = own_modules(ctx.repo, base, ctx.config.test.pythonpath)
    roots = ["", *ctx.config.test.pythonpath]
    modules = project_modules([e.path for e in ctx.repo.entries(head)], roots)

    severity = {**DEFAULT_SEVERITY, **{r.id: r.severity for r in settings.rules},
                **settings.severities}
    hits: list[Hit] = []
    scanned = []
    for c, is_test in changes:
        p = c.path
        data = read(head, p)
        if data is None:
            continue
        decoded, source_hits = python_source(p, data) if p.endswith(".py") else (None, [])
        hits += source_hits
        text = decoded if decoded is not None else data.decode("utf-8", errors="replace")
        added = added_lines(ctx.repo.diff(base, head, [p], unified=0))
        lines = text.splitlines()
        # git's lines are not the decoded ones (a codec), nor Python's where a lone CR ends
        # a line for Python and not for git: 60 of them put the code after them outside
        # every line git called added, and no rule saw it
        if any(h.rule == "source-encoding" for h in source_hits) or _LONE_CR.search(data):
            added = set(range(1, max(len(lines), text.count("\n")) + 2))
        for rule in settings.rules if not is_test else []:
            if path_matches(p, rule.paths):
                rx = re.compile(rule.regex)
                hits += [Hit(rule.id, p, i, rule.message or f"matches {rule.regex!r}")
                         for i in sorted(added) if i <= len(lines) and rx.search(lines[i - 1])]
        if p.endswith(".py"):
            scanned.append(p)
        if decoded is not None:
            # the base's literals only matter to copied-literal, which tests do not have
            before = read(base, p) if copied and not is_test \
                and c.status != "A" else None
            hits += scan_file(p, text, added, is_test=is_test, test_strings=test_strings,
                              test_globs=test_globs, copied=copied, own=own,
                              visible=visible, modules=modules, roots=roots,
                              base=(python_source(p, before)[0] or "") if before else "")
    return _result(hits, severity, scanned)


def _scanned(ctx: GateContext, changes: Sequence[Change], packets: str,
             test_globs: list[str]) -> list[tuple[Change, bool]]:
    """The changes the rules read, each with whether it is a test path: files (not links or
    submodules) the agent added or changed, outside the planted files and the packets
    folder; of test paths only ``.py`` files."""
    found = []
    for c in changes:
        p = c.path
        if c.status == "D" or (c.new_mode != "100644" and c.new_mode != "100755"):
            continue
        if p in ctx.packet.plant_files or p == packets or p.startswith(packets + "/"):
            continue
        is_test = path_matches(p, test_globs)
        if not is_test or p.endswith(".py"):
            found.append((c, is_test))
    return found


def _reader(ctx: GateContext, base: str, head: str, changes: list[tuple[Change, bool]]
            ) -> Callable[[str, str], bytes | None]:
    """``read(rev, path)``: the bytes of the files the gate reads — the planted tests (at the
    candidate and the plant commit), the ``changes`` at the candidate, and the plant
    commit's version of the code among them (for copied literals) — from one git process
    for all (``Repo.files``); any other file from a process of its own."""
    wanted = [(rev, p) for p in ctx.planted_tests() for rev in (head, base)]
    wanted += [(head, c.path) for c, _ in changes]
    wanted += [(base, c.path) for c, is_test in changes
               if c.status != "A" and not is_test and c.path.endswith(".py")]
    known = ctx.repo.files(wanted)

    def read(rev: str, path: str) -> bytes | None:
        return known[(rev, path)] if (rev, path) in known else ctx.repo.file_bytes(rev, path)
    return read


def _result(hits: list[Hit], severity: dict[str, str], scanned: list[str]) -> GateResult:
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
        return GateResult(NAME, "fail", f"rule {block[0].kind} at {block[0].path}:"
                          f"{block[0].line}: {block[0].message.split(': ', 1)[1]}{more}",
                          "code", findings, details=details)
    summary = f"{len(scanned)} changed Python file(s) scanned, no blocking pattern"
    if findings:
        summary += f"; {len(findings)} warning(s): " + ", ".join(
            f"{f.kind} at {f.path}:{f.line}" for f in findings[:3])
    return GateResult(NAME, "pass", summary, findings=findings, details=details)
