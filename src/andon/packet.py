"""Packet files: parse, validate, and report every problem with its file and line.

A packet is Markdown with TOML front matter between ``+++`` lines, stored either as
``packets/<name>/packet.md`` (with optional ``plant/`` and ``hidden/`` trees that mirror the
repository root) or as a flat ``packets/<name>.md``.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from wcmatch import glob as wcglob

from andon.errors import InvalidValue, PacketError, Problem
from andon.suggest import closest, hint

GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.DOTGLOB
_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_GLOB_CHARS = set("*?[{")


def glob_problem(pattern: str) -> str | None:
    """Return why ``pattern`` is not a usable repository glob, or None if it is fine."""
    if not pattern:
        return "must not be empty"
    if pattern.startswith("/") or re.match(r"^[A-Za-z]:", pattern):
        return "must be relative to the repository root, not absolute"
    if "\\" in pattern:
        return "must use '/' and contain no backslash"
    if ".." in pattern.split("/"):
        return "must not contain a '..' component"
    for opening, closing in ("[]", "{}"):
        depth = 0
        for char in pattern:
            depth += (char == opening) - (char == closing)
            if depth < 0:
                break
        if depth != 0:
            return f"has unbalanced '{opening}' / '{closing}'"
    try:
        wcglob.translate(pattern, flags=GLOB_FLAGS)
    except Exception as exc:  # noqa: BLE001 - wcmatch signals bad globs with assorted types
        return f"is not a valid glob ({exc})"
    return None


def path_matches(path: str, patterns: Sequence[str]) -> bool:
    """True if the repo-relative POSIX ``path`` matches any glob in ``patterns``.

    ``*`` stays inside one directory, ``**`` spans any number of them, dotfiles match.
    An empty ``patterns`` matches nothing.
    """
    return bool(patterns) and wcglob.globmatch(path, list(patterns), flags=GLOB_FLAGS)


def _check_glob(pattern: str) -> str:
    if (why := glob_problem(pattern)) is not None:
        raise InvalidValue(why)
    return pattern


def _not_blank(text: str) -> str:
    if not text.strip():
        raise InvalidValue("must be a non-empty string")
    return text


Name = Annotated[str, Field(pattern=_NAME_RE)]
Glob = Annotated[str, AfterValidator(_check_glob)]
Stage = Literal["atdd", "implement", "review-tests", "review-correctness", "review"]


class Invariant(BaseModel):
    """A named claim that must hold after the packet; the review must give a verdict on it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)
    id: Annotated[str, AfterValidator(_not_blank)]
    critical: bool = False
    assert_: Annotated[str, AfterValidator(_not_blank)] = Field(alias="assert")


class FrontMatter(BaseModel):
    """The fields a packet's TOML front matter may set."""

    # strict: TOML already gives typed values, so "3" for an integer is a mistake to report
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    id: Name
    slug: Name
    goal: Annotated[str, AfterValidator(_not_blank)]
    requires: list[Name] = []
    gate: Literal["auto", "human"] = "auto"
    title: Annotated[str, AfterValidator(_not_blank)] | None = None
    tests: Literal["planted", "none"] = "planted"
    tier: str | None = None
    stages: list[Stage] | None = None
    max_attempts: int = Field(default=3, ge=1)
    allowed_paths: list[Glob] = []
    forbidden_paths: list[Glob] = []
    spec_path: str | None = None
    spec_commit: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{4,40}$")
    invariants: list[Invariant] = []

    @model_validator(mode="before")
    @classmethod
    def _human_without_tests(cls, data: Any) -> Any:
        # no test decides a `tests = "none"` packet, so a person does unless it says otherwise
        if isinstance(data, dict) and data.get("tests") == "none" and "gate" not in data:
            return {**data, "gate": "human"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> FrontMatter:
        # Guards programmatic construction; file parsing reports these with lines itself.
        if (self.spec_path is None) != (self.spec_commit is None):
            raise InvalidValue("spec_path and spec_commit must be given together")
        ids = [inv.id for inv in self.invariants]
        if len(ids) != len(set(ids)):
            raise InvalidValue("invariant ids must be unique")
        return self


class Packet(FrontMatter):
    """A loaded packet: its front matter plus where it lives and what it plants."""

    source: Path
    dir: Path | None
    body: str
    plant_files: dict[str, Path] = {}
    hidden_files: dict[str, Path] = {}
    content_sha: str
    _lines: dict[tuple[int | None, str], int] = PrivateAttr(default_factory=dict)
    # The bytes (and executable bit) of plant/ and hidden/ as read when the packet was loaded,
    # which is what content_sha hashes: what is planted or copied for verification later is
    # exactly this, whatever happens to the files on disk in between.
    _frozen: dict[str, dict[str, tuple[bytes, bool]]] = PrivateAttr(default_factory=dict)

    def plant_blobs(self) -> dict[str, tuple[bytes, bool]]:
        """Repo-relative path → (bytes, executable) of each planted file, as loaded."""
        return self._frozen.get("plant", {})

    def hidden_blobs(self) -> dict[str, tuple[bytes, bool]]:
        """Repo-relative path → (bytes, executable) of each hidden file, as loaded."""
        return self._frozen.get("hidden", {})

    def line_of(self, key: str) -> int:
        """1-based line of top-level ``key`` in ``source``; 1 if the key is not written there."""
        return self._lines.get((None, key), 1)

    def body_sections(self) -> dict[str, str]:
        """Split the body on ``## `` headings: lowercased heading -> stripped text under it.

        Text before the first heading is under ``""``; a repeated heading's texts are joined.
        """
        return body_sections(self.body)


def body_sections(body: str) -> dict[str, str]:
    """Split Markdown ``body`` on ``## `` headings outside code fences; see Packet.body_sections."""
    sections: dict[str, list[str]] = {}
    current, fenced = "", False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            current = line[3:].strip().lower()
            sections.setdefault(current, [])
            continue
        sections.setdefault(current, []).append(line)
    texts = {name: "\n".join(lines).strip() for name, lines in sections.items()}
    return {name: text for name, text in texts.items() if text or name}


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


_LITTER_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


def is_litter(rel: str) -> bool:
    """A file tools and editors leave beside the packet's files (Python and test caches, an
    editor's swap or backup file, .DS_Store): never part of a packet, never planted, and
    never a reason to blame an agent when it comes or goes."""
    parts = rel.split("/")
    name = parts[-1]
    return bool(_LITTER_DIRS & set(parts[:-1])) or name.endswith((".pyc", "~")) \
        or name == ".DS_Store" or bool(re.fullmatch(r"\..*\.sw[a-p]|#.*#|\.#.*", name))


def _tree_files(root: Path, problems: list[Problem]) -> dict[str, Path]:
    """Repo-relative POSIX path -> absolute file for everything under ``root`` (plant/hidden)
    except what tools and editors leave there (:func:`is_litter`)."""
    if not root.is_dir():
        return {}
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _LITTER_DIRS]
        for name in sorted(dirnames + filenames):
            entry = Path(dirpath) / name
            if is_litter(entry.relative_to(root).as_posix()):
                continue
            if entry.is_symlink():
                target = os.readlink(entry)
                msg = f"{root.name}/ entries must be regular files, got a symlink to {target}"
                problems.append(Problem(entry, None, msg))
            elif entry.is_file():
                found[entry.relative_to(root).as_posix()] = entry.absolute()
    if not found and not any(p.path.is_relative_to(root) for p in problems):
        problems.append(Problem(root, None, f"{root.name}/ exists but contains no files"))
    return dict(sorted(found.items()))


def _freeze(trees: dict[str, dict[str, Path]]) -> dict[str, dict[str, tuple[bytes, bool]]]:
    return {tree: {rel: (file.read_bytes(), bool(file.stat().st_mode & stat.S_IXUSR))
                   for rel, file in files.items()} for tree, files in trees.items()}


def _content_sha(source_bytes: bytes, frozen: dict[str, dict[str, tuple[bytes, bool]]]) -> str:
    digest = hashlib.sha256()
    # Length-prefixed so that moving bytes between a name and its content changes the hash.
    for part in [source_bytes] + [
        item
        for tree, files in sorted(frozen.items())
        for rel, (data, _) in files.items()
        for item in (f"{tree}/{rel}".encode(), data)
    ]:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def parse_packet_file(path: Path, packets_dir: Path) -> tuple[Packet | None, list[Problem]]:
    """Parse one packet file and check everything that needs no other packet or the repo.

    ``path`` is a ``packet.md`` inside a packet directory, or a flat ``<name>.md`` directly in
    ``packets_dir``. Returns the Packet (None if its front matter is unusable) and every
    Problem found; an unusable packet always comes with at least one Problem. Never raises
    for bad input.
    """
    source = _parse(path, packets_dir)
    return source.packet, source.problems


@dataclass
class _Source:
    """One packet file as far as it could be read: the Packet if its fields parsed, and in
    any case the raw front-matter table ({} if it did not parse) and the lines of its keys,
    so that the cross-packet checks also cover packets whose other fields are broken."""

    path: Path
    packet: Packet | None
    problems: list[Problem]
    data: dict[str, Any] = field(default_factory=dict)
    lines: dict[tuple[int | None, str], int] = field(default_factory=dict)
    requires_lines: list[int] = field(default_factory=list)  # file line of each entry

    def line(self, key: str) -> int:
        return self.lines.get((None, key), 1)

    @property
    def id(self) -> str | None:
        """The packet's id if it is written and valid, whether or not other fields are."""
        pid = self.data.get("id")
        return pid if isinstance(pid, str) and re.match(_NAME_RE, pid) else None

    def requires(self) -> list[tuple[str, int]]:
        """(id, line of its entry) for every valid id in ``requires``; bad entries and a
        ``requires`` that is no list are the field checks' to report."""
        deps = self.data.get("requires")
        if not isinstance(deps, list):
            return []
        lines = self.requires_lines if len(self.requires_lines) == len(deps) else []
        return [(dep, lines[k] if lines else self.line("requires"))
                for k, dep in enumerate(deps) if isinstance(dep, str) and re.match(_NAME_RE, dep)]


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


def _parse(path: Path, packets_dir: Path) -> _Source:
    """parse_packet_file, keeping what the cross-packet checks need (see _Source)."""
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError) as exc:
        return _Source(path, None, [Problem(path, None, f"cannot read packet file: {exc}")])
    all_lines = text.splitlines(keepends=True)
    if not all_lines or all_lines[0].rstrip() != "+++":
        msg = "packet must start with a '+++' line opening TOML front matter"
        return _Source(path, None, [Problem(path, 1, msg)])
    end = next((i for i, ln in enumerate(all_lines[1:], 1) if ln.rstrip() == "+++"), None)
    if end is None:
        msg = "front matter opened by '+++' on line 1 is never closed by a '+++' line"
        return _Source(path, None, [Problem(path, 1, msg)])
    front = [line.rstrip("\r\n") for line in all_lines[1:end]]
    try:
        data = tomllib.loads("\n".join(front) + "\n")
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line = int(found.group(1)) + 1 if found else end  # "at end of document": last line
        reason = re.sub(r"\s*\(at .*\)$", "", message)
        column = f", column {found.group(2)}" if found else ""
        problem = Problem(path, line, f"invalid TOML in front matter: {reason}{column}")
        return _Source(path, None, [problem])
    lines = _key_lines(front)
    requires = data.get("requires")
    entries = len(requires) if isinstance(requires, list) else 0
    source = _Source(path, None, _semantic_problems(data, lines, path), data, lines,
                     _entry_lines(front, lines.get((None, "requires")), entries))
    problems = source.problems
    is_dir_packet = path.name == "packet.md" and path.parent.resolve() != packets_dir.resolve()
    pkt_dir = path.parent if is_dir_packet else None
    trees = {t: _tree_files(pkt_dir / t, problems) if pkt_dir else {} for t in ("hidden", "plant")}
    try:
        front_matter = FrontMatter.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            if error["loc"]:  # loc () is the model check that _semantic_problems already reported
                problems.append(Problem(path, *_describe(error, lines)))
        return source
    body = "".join(all_lines[end + 1 :])
    frozen = _freeze(trees)
    packet = Packet(
        **dict(front_matter), source=path, dir=pkt_dir, body=body,
        plant_files=trees["plant"], hidden_files=trees["hidden"],
        content_sha=_content_sha(raw, frozen),
    )
    packet._lines = lines
    packet._frozen = frozen
    source.packet = packet
    return source


def _packet_sources(packets_dir: Path, problems: list[Problem]) -> list[Path]:
    sources = []
    for entry in sorted(packets_dir.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            if (entry / "packet.md").is_file():
                sources.append(entry / "packet.md")
            else:
                problems.append(Problem(entry, None, "packet directory has no packet.md"))
        elif entry.suffix == ".md" and entry.name.lower() != "readme.md":
            sources.append(entry)
    return sources


def _find_cycle(start: str, graph: dict[str, list[str]]) -> list[str] | None:
    """Shortest path start -> ... -> start through ``graph``, or None if start is on no cycle."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for dep in graph.get(node, []):
                if dep == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(parents[chain[-1]])
                    return [*chain[::-1], start]
                if dep not in parents:
                    parents[dep] = node
                    next_frontier.append(dep)
        frontier = next_frontier
    return None


def check_packets(packets_dir: Path, repo_root: Path) -> tuple[list[Packet], list[Problem]]:
    """Load every packet under ``packets_dir`` and find every problem, within and across packets.

    Returns the packets that parsed (in file order, even if cross-packet problems exist) and
    all Problems sorted by file then line. A missing folder is itself a Problem. Never raises
    for bad input.
    """
    if not packets_dir.is_dir():
        state = "is not a directory" if packets_dir.exists() else "does not exist"
        msg = f"packets folder {state}; run `andon init` to create it"
        return [], [Problem(packets_dir, None, msg)]
    problems: list[Problem] = []
    sources = [_parse(path, packets_dir) for path in _packet_sources(packets_dir, problems)]
    for source in sources:
        problems += source.problems
    # Every check below uses what each file says, whether or not its other fields parsed,
    # so that one run of `andon check` reports everything it can.
    unreadable = [s.path for s in sources if s.packet is None and s.id is None]
    by_id: dict[str, _Source] = {}
    for s in sources:
        if s.id is None:
            continue
        if s.id in by_id:
            msg = f"duplicate packet id {s.id!r}: already used by {by_id[s.id].path}"
            problems.append(Problem(s.path, s.line("id"), msg))
        else:
            by_id[s.id] = s
        spec_path = s.data.get("spec_path")
        if isinstance(spec_path, str):
            spec = Path(spec_path)
            inside = not spec.is_absolute() and ".." not in spec.parts
            if not inside or not (repo_root / spec).is_file():
                msg = f"spec_path must name an existing file in the repository, got {spec_path!r}"
                problems.append(Problem(s.path, s.line("spec_path"), msg))
    graph = {pid: [d for d, _ in s.requires() if d in by_id and d != pid]
             for pid, s in by_id.items()}
    for s in sources:
        if (pid := s.id) is None:
            continue
        reported: set[str] = set()
        for dep, line in s.requires():
            if dep in reported:
                continue
            if dep == pid:
                msg = f"packet {pid!r} requires itself"
            elif dep not in by_id:
                near = closest(dep, by_id)
                msg = f"requires names unknown packet id {dep!r}"
                msg += f"; did you mean {near!r}?" if near else ""
                msg += _unreadable_note(unreadable, packets_dir)
            else:
                continue
            reported.add(dep)
            problems.append(Problem(s.path, line, msg))
        if by_id[pid] is s and (cycle := _find_cycle(pid, graph)):
            line = next(ln for dep, ln in s.requires() if dep == cycle[1])
            problems.append(Problem(s.path, line, f"requires forms a cycle: {' -> '.join(cycle)}"))
    problems.sort(key=lambda pr: (str(pr.path), pr.line or 0, pr.message))
    return [s.packet for s in sources if s.packet is not None], problems


def _unreadable_note(paths: list[Path], packets_dir: Path) -> str:
    """Why an unknown id may still be right: packets whose own id could not be read."""
    if not paths:
        return ""
    names = [p.relative_to(packets_dir).as_posix() for p in paths[:3]]
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    ids = "id" if len(paths) == 1 else "ids"
    return f" (the {ids} of {', '.join(names)}{more} could not be read)"


_TEST_FILE = re.compile(r"(test_.*|.*_test)\.py")


def planted_test_files(packet: Packet) -> list[str]:
    """Planted paths pytest would collect as test files (``test_*.py``, ``*_test.py``)."""
    return [p for p in sorted(packet.plant_files) if _TEST_FILE.fullmatch(p.rsplit("/", 1)[-1])]


def tests_problem(packet: Packet, stages: Sequence[str]) -> Problem | None:
    """Why ``packet`` (whose stages are ``stages``) cannot run as it stands: it plants no
    test file and neither opts out (``tests = "none"``) nor has an ``atdd`` stage to write
    them — nothing would be red before the agent, FAIL_TO_PASS would be empty, and any
    change would pass; or it says ``tests = "none"`` but plants test files. None if fine."""
    planted = planted_test_files(packet)
    if packet.tests == "none" and planted:
        return Problem(packet.source, packet.line_of("tests"),
                       f'tests = "none" but plant/ holds test files ({", ".join(planted)}): '
                       "remove the setting or the files")
    if packet.tests == "none" or planted or "atdd" in stages:
        return None
    return Problem(packet.source, packet.line_of("tests"),
                   "the packet plants no test files, so no test would fail before the change "
                   "and any change would pass: add a failing test under plant/, give it an "
                   'atdd stage that writes one, or opt out with tests = "none" (it then '
                   'waits for a person: gate = "human" unless you set gate)')


def load_packets(packets_dir: Path, repo_root: Path) -> list[Packet]:
    """Load every packet under ``packets_dir``, sorted by id.

    Raises PacketError carrying every Problem (see check_packets) if there is any.
    """
    packets, problems = check_packets(packets_dir, repo_root)
    if problems:
        raise PacketError(problems)
    return sorted(packets, key=lambda p: p.id)
