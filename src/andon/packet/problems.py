"""Where each problem of a packet file is and what it says: the file line of every key of the
front matter (and of each entry of an array), pydantic's errors in words with a did-you-mean,
and the checks across fields, run on the raw table so that a bad field hides nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from andon.errors import Problem
from andon.suggest import closest, hint

from .model import _GLOB_CHARS, FrontMatter, glob_problem, path_matches

# A dotted key ``a.b = 1`` is reported under its first part, which is what pydantic names.
_KEY_RE = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*[=.]""")
_TABLE_RE = re.compile(r"^\s*\[+\s*([A-Za-z0-9_-]+)")
_INVARIANTS_RE = re.compile(r"^\s*\[\[\s*invariants\s*\]\]")


def _key_lines(front: list[str]) -> dict[tuple[int | None, str], int]:
    """Map (table, key) to its file line; table None is top level, k the k-th [[invariants]].

    ``(k, "[[invariants]]")`` holds the header line. Front-matter line i is file line i + 2.
    """
    lines: dict[tuple[int | None, str], int] = {}
    table: int | str | None = None  # "other" once inside a table we do not model
    count, in_string = 0, ""
    for index, text in enumerate(front):
        lineno = index + 2
        if in_string:  # keys quoted inside a multi-line string are not keys
            if text.count(in_string) % 2:
                in_string = ""
            continue
        if _INVARIANTS_RE.match(text):
            table, count = count, count + 1
            lines[(table, "[[invariants]]")] = lineno
        elif header := _TABLE_RE.match(text):
            table = "other"
            lines.setdefault((None, header.group(1)), lineno)
        elif (match := _KEY_RE.match(text)) and not isinstance(table, str):  # not "other"
            lines.setdefault((table, next(g for g in match.groups() if g)), lineno)
        for quote in ('"""', "'''"):
            if text.count(quote) % 2:
                in_string = quote
    return lines


_CONSTRAINTS = {
    "id": "must be letters, digits, '.', '_' or '-', starting with a letter or digit",
    "requires": "must be a list of packet ids",
    "goal": "must be a non-empty string",
    "gate": "must be 'auto' or 'human'",
    "tier": "must be a string",
    "title": "must be a non-empty string (the merge commit's subject)",
    "tests": "must be 'planted' or 'none'",
    "stages": "must be a list of: atdd, implement, review-tests, review-correctness, review",
    "max_attempts": "must be an integer >= 1",
    "allowed_paths": "must be a list of glob strings",
    "spec_path": "must be a string (a path relative to the repository root)",
    "spec_commit": "must be 4 to 40 hexadecimal characters (a git commit)",
    "invariants": "must be an array of tables ([[invariants]] with id, critical, assert)",
    "critical": "must be true or false",
    "assert": "must be a non-empty string",
}
_CONSTRAINTS["slug"] = _CONSTRAINTS["id"]
_CONSTRAINTS["forbidden_paths"] = _CONSTRAINTS["allowed_paths"]
_ENTRY_CONSTRAINTS = {
    "requires": "must be a packet id (letters, digits, '.', '_' or '-')",
    "stages": "must be one of: atdd, implement, review-tests, review-correctness, review",
    "allowed_paths": "must be a glob string",
    "forbidden_paths": "must be a glob string",
    "invariants": "must be a table with id, critical, assert",
}
_TOP_FIELDS = list(FrontMatter.model_fields)
_INVARIANT_FIELDS = ["id", "critical", "assert"]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(error: Mapping[str, Any], lines: dict) -> tuple[int, str]:
    """Turn one pydantic error into (file line, message)."""
    loc = list(error["loc"])
    key, table, where = str(loc[0]), None, ""
    if key == "invariants" and len(loc) >= 3 and isinstance(loc[1], int):
        table, key, where = loc[1], str(loc[2]), f"invariant {loc[1] + 1}: "
    line = lines.get((table, key)) or lines.get((table, "[[invariants]]"))
    line = line or lines.get((None, "invariants" if table is not None else key)) or 1
    kind = error["type"]
    if kind == "missing":
        return line if table is not None else 1, f"{where}missing required field '{key}'"
    if kind == "extra_forbidden":
        known = _INVARIANT_FIELDS if table is not None else _TOP_FIELDS
        return line, f"{where}unknown field '{key}'; {hint(key, known, 'known fields')}"
    index = loc[1] if table is None and len(loc) == 2 and isinstance(loc[1], int) else None
    if kind == "value_error":  # raised by our own validators, already phrased as a constraint
        constraint = str(error["ctx"]["error"])
    else:
        constraints = _CONSTRAINTS if index is None else _ENTRY_CONSTRAINTS
        constraint = constraints.get(key, error["msg"])
    label = key if index is None else f"{key} entry {index + 1}"
    message = f"{where}{label} {constraint}, got {_show(error['input'])}"
    if kind == "literal_error" and isinstance(error["input"], str):  # e.g. a misspelt stage
        expected = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        if near := closest(error["input"], expected):
            message += f"; did you mean {near!r}?"
    return line, message


def _semantic_problems(data: dict[str, Any], lines: dict, path: Path) -> list[Problem]:
    """Cross-field checks, run on the raw table so they are reported even when a field is bad."""
    problems = []

    def line(key: str, table: int | None = None) -> int:
        return lines.get((table, key), 1)

    if ("spec_path" in data) != ("spec_commit" in data):
        given, other = ("spec_path", "spec_commit")
        if given not in data:
            given, other = other, given
        msg = f"{given} is set but {other} is not; give both or neither, got {_show(data[given])}"
        problems.append(Problem(path, line(given), msg))
    invariants = data.get("invariants")
    seen: dict[str, int] = {}
    for k, inv in enumerate(invariants if isinstance(invariants, list) else []):
        inv_id = inv.get("id") if isinstance(inv, dict) else None
        if isinstance(inv_id, str) and inv_id in seen:
            where = lines.get((k, "id")) or lines.get((k, "[[invariants]]")) or line("invariants")
            first = seen[inv_id] + 1
            msg = f"invariant {k + 1}: duplicate invariant id {inv_id!r} (also invariant {first})"
            problems.append(Problem(path, where, msg))
        elif isinstance(inv_id, str):
            seen[inv_id] = k
    allowed, forbidden = data.get("allowed_paths"), data.get("forbidden_paths")
    if isinstance(allowed, list) and isinstance(forbidden, list):
        valid = [p for p in forbidden if isinstance(p, str) and glob_problem(p) is None]
        for pattern in allowed:
            if not isinstance(pattern, str) or glob_problem(pattern) is not None:
                continue
            if pattern in forbidden:
                msg = f"allowed_paths entry {pattern!r} also appears in forbidden_paths"
            elif not _GLOB_CHARS & set(pattern) and path_matches(pattern, valid):
                hit = next(p for p in valid if path_matches(pattern, [p]))
                msg = f"allowed_paths entry {pattern!r} is forbidden by forbidden_paths {hit!r}"
            else:
                continue
            problems.append(Problem(path, line("allowed_paths"), msg))
    return problems


# A string, a comment, or the end of an array, as met while reading a multi-line array.
_ARRAY_TOKEN_RE = re.compile(r""""(?:[^"\\]|\\.)*"|'[^']*'|#|\]""")


def _entry_lines(front: list[str], start: int | None, count: int) -> list[int]:
    """File line of each of the ``count`` string entries of the array whose key is on file
    line ``start``; [] if they cannot all be placed (the caller then uses the key's line)."""
    if start is None:
        return []
    found: list[int] = []
    for lineno in range(start, len(front) + 2):
        text = front[lineno - 2]
        text = text.split("=", 1)[1] if lineno == start and "=" in text else text
        for token in _ARRAY_TOKEN_RE.finditer(text):
            if token.group() == "#":
                break
            if token.group() == "]" or len(found) == count:
                return found if len(found) == count else []
            found.append(lineno)
    return found if len(found) == count else []
