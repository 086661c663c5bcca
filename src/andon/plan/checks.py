"""The mechanical checks every draft passes before a person sees it: one function per rule,
each returning its problems as lines of text (``<packet id>: what is wrong``), which go back
to the planning agent as evidence for another round and, at the end, to the person.

Rules: :func:`validation` (``andon check`` on the packets folder), :func:`requires_graph`
(every ``requires`` exists; no cycle), :func:`overlaps_ordered` (two packets whose
``allowed_paths`` overlap are ordered by ``requires``, transitively), :func:`has_invariant`,
:func:`bounded_scope` (``[plan]`` limits in andon.toml), :func:`tests_not_allowed` (no
test-folder glob, nor a glob covering planted tests, in ``allowed_paths``) and
:func:`planted_red` (planted tests fail on the base: :mod:`andon.plan.red`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..config import PlanSettings
from ..packet import check_packets, path_matches
from .contract import DraftPacket

# check_packets' words for what requires_graph reports on its own (said once, not twice)
_GRAPH_WORDS = ("requires names unknown packet id", "requires forms a cycle", "requires itself")


def validation(packets_dir: Path, repo_root: Path, draft_files: Mapping[str, Path]
               ) -> list[str]:
    """``andon check``'s packet validation on the folder, as it would run: the problems in the
    draft files ``draft_files`` (id → packet file), each as ``ID: file:line: message``."""
    _, problems = check_packets(packets_dir, repo_root)
    where = {path.resolve(): pid for pid, path in draft_files.items()}
    out = []
    for p in problems:
        pid = where.get(Path(p.path).resolve())
        if pid is not None and not any(w in p.message for w in _GRAPH_WORDS):
            rel = Path(p.path).resolve().relative_to(repo_root.resolve()).as_posix()
            out.append(f"{pid}: andon check: {rel}:{p.line or 1}: {p.message}")
    return out


def requires_graph(drafts: Sequence[DraftPacket], existing: Iterable[str]) -> list[str]:
    """Every ``requires`` names a draft or an existing packet (``existing`` ids), and the
    graph of the drafts has no cycle (each cycle named once, as ``A -> B -> A``)."""
    known = {d.id for d in drafts} | set(existing)
    out = [f"{d.id}: requires unknown packet {r!r} (known: {', '.join(sorted(known))})"
           for d in drafts for r in d.requires if r not in known]
    graph = {d.id: [r for r in d.requires if r in known] for d in drafts}
    seen: set[frozenset[str]] = set()
    for start in graph:
        path = _cycle_from(start, graph)
        if path and frozenset(path) not in seen:
            seen.add(frozenset(path))
            out.append(f"{start}: requires forms a cycle: {' -> '.join(path)}")
    return out


def _cycle_from(start: str, graph: Mapping[str, list[str]]) -> list[str] | None:
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    visited: set[str] = set()
    while stack:
        node, path = stack.pop()
        for dep in graph.get(node, []):
            if dep == start:
                return [*path, start]
            if dep not in visited:
                visited.add(dep)
                stack.append((dep, [*path, dep]))
    return None


def _closure(drafts: Sequence[DraftPacket]) -> dict[str, set[str]]:
    """Each draft's requires, transitively (a cycle is requires_graph's to report)."""
    direct = {d.id: set(d.requires) for d in drafts}
    out: dict[str, set[str]] = {}
    for pid in direct:
        todo, seen = list(direct[pid]), set()
        while todo:
            r = todo.pop()
            if r not in seen:
                seen.add(r)
                todo += direct.get(r, set())
        out[pid] = seen
    return out


def example_path(glob: str) -> str:
    """A path ``glob`` matches, made by filling its wildcards (``**/`` dropped, ``*``, ``?``
    and classes filled, the first of ``{a,b}``): the probe :func:`globs_overlap` uses."""
    text = re.sub(r"\{([^,}]*)[^}]*\}", r"\1", glob)
    text = re.sub(r"\[!?([^\]])[^\]]*\]", r"\1", text)
    text = text.replace("**/", "").replace("**", "x").replace("*", "x").replace("?", "x")
    return text.strip("/") or "x"


def globs_overlap(a: Sequence[str], b: Sequence[str], files: Iterable[str] = ()) -> list[str]:
    """Paths both glob lists match: each glob's :func:`example_path` tried against the other
    list, and the repository's ``files``. Empty when no probe is matched by both (globs can
    overlap in ways no probe finds: a limit, docs/plan.md)."""
    probes = [example_path(g) for g in (*a, *b)] + list(files)
    return sorted({p for p in probes if path_matches(p, a) and path_matches(p, b)})


def overlaps_ordered(drafts: Sequence[DraftPacket], files: Iterable[str] = ()) -> list[str]:
    """Two drafts whose ``allowed_paths`` overlap must be ordered: one requires the other,
    transitively (else two agents change the same files at once, or in any order)."""
    files = list(files)
    order = _closure(drafts)
    out = []
    for i, a in enumerate(drafts):
        for b in drafts[i + 1:]:
            shared = globs_overlap(a.allowed_paths, b.allowed_paths, files)
            if shared and b.id not in order[a.id] and a.id not in order[b.id]:
                out.append(f"{b.id}: allowed_paths overlap {a.id}'s ({', '.join(shared[:3])}) "
                           f"but neither requires the other: add {a.id} to {b.id}'s requires "
                           "(or the other way round), or split the paths")
    return out


def has_invariant(drafts: Sequence[DraftPacket]) -> list[str]:
    """Every draft names at least one invariant (the review gives a verdict on each)."""
    return [f"{d.id}: names no invariant: give at least one claim that must hold after it, "
            "with an assert where one can be stated" for d in drafts if not d.invariants]


def bounded_scope(drafts: Sequence[DraftPacket], limits: PlanSettings) -> list[str]:
    """Each draft is a thin slice: some ``allowed_paths``, at most ``max_allowed_paths``,
    none matching the whole repository (``**``, ``*.py`` at any depth), at most
    ``max_invariants`` invariants and ``max_planted_files`` planted files; at most
    ``max_packets`` drafts in all."""
    out = []
    if len(drafts) > limits.max_packets:
        out.append(f"{drafts[0].id}: {len(drafts)} packets in one plan; [plan] max_packets is "
                   f"{limits.max_packets}: plan fewer, larger-grained slices or raise it")
    for d in drafts:
        n = len(d.allowed_paths)
        if n == 0:
            out.append(f"{d.id}: allowed_paths is empty: name the files or folders it changes")
        elif n > limits.max_allowed_paths:
            out.append(f"{d.id}: {n} allowed_paths; [plan] max_allowed_paths is "
                       f"{limits.max_allowed_paths}: cut the packet thinner")
        out += [f"{d.id}: allowed_paths {g!r} matches the whole repository: name a folder"
                for g in d.allowed_paths if "/" not in g.rstrip("/").removeprefix("**/")
                and g.startswith("*")]
        for what, count, cap in (("invariants", len(d.invariants), limits.max_invariants),
                                 ("planted files", len(d.planted_tests),
                                  limits.max_planted_files)):
            if count > cap:
                out.append(f"{d.id}: {count} {what}; [plan] max_{what.replace(' ', '_')} is "
                           f"{cap}: cut the packet thinner")
    return out


def tests_not_allowed(drafts: Sequence[DraftPacket], test_paths: Sequence[str]) -> list[str]:
    """No draft may be allowed to change planted tests: no glob in ``allowed_paths`` matches
    a planted file of any draft, and none is a wildcard over test files (``tests/**``: a
    ``[stages] test_paths`` glob). A single new test file named literally is allowed."""
    planted = {p: d.id for d in drafts for p in d.planted_tests}
    out = []
    for d in drafts:
        for g in d.allowed_paths:
            covered = sorted(p for p in planted if path_matches(p, [g]))
            if covered:
                out.append(f"{d.id}: allowed_paths {g!r} covers planted test(s) "
                           f"{', '.join(covered[:3])}: planted tests are the harness's, never "
                           "the agent's")
            elif any(c in g for c in "*?[{") and path_matches(example_path(g), test_paths):
                out.append(f"{d.id}: allowed_paths {g!r} is a wildcard over test files "
                           f"([stages] test_paths): the agent could rewrite the tests that "
                           "judge it; name the code paths instead")
    return out
