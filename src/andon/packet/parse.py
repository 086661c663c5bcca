"""Reading packet files: one file into a ``Packet`` and its problems, a packets folder into
every packet and every problem within and across packets (duplicate ids, ``requires``
unknown or in a cycle, ``spec_path``), and ``load_packets``, which refuses on any problem."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from andon import plain_file
from andon.errors import PacketError, Problem, toml_problem
from andon.suggest import closest

from .files import _content_sha, _freeze, _tree_files
from .model import _NAME_RE, FrontMatter, Packet
from .problems import _describe, _entry_lines, _key_lines, _semantic_problems


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


def _parse(path: Path, packets_dir: Path) -> _Source:
    """parse_packet_file, keeping what the cross-packet checks need (see _Source)."""
    try:
        raw = plain_file.read(path, follow=True)  # a FIFO here is named, not waited on
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except plain_file.NotPlain as exc:
        return _Source(path, None, [Problem(path, None,
                                            f"is {exc.what}, not a file andon can read")])
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
        # the front matter starts on the file's line 2, after the opening '+++'
        problem = toml_problem(path, "\n".join(front), exc, "invalid TOML in front matter", 1)
        return _Source(path, None, [problem])
    lines = _key_lines(front)
    requires = data.get("requires")
    entries = len(requires) if isinstance(requires, list) else 0
    source = _Source(path, None, _semantic_problems(data, lines, path), data, lines,
                     _entry_lines(front, lines.get((None, "requires")), entries))
    problems = source.problems
    is_dir_packet = path.name == "packet.md" and path.parent.resolve() != packets_dir.resolve()
    pkt_dir = path.parent if is_dir_packet else None
    trees = {t: _tree_files(pkt_dir / t, problems) if pkt_dir else {}
             for t in ("hidden", "plant", "solution")}
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
        solution_files=trees["solution"],
        # the reference solution is no part of what an agent is given: changing it does not
        # make the packet another one (attempts carry over, the store's sha stays)
        content_sha=_content_sha(raw, {t: f for t, f in frozen.items() if t != "solution"}),
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
            if os.path.lexists(entry / "packet.md"):  # whatever it is: parsing says what
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
    sources, problems = _check_all(packets_dir, repo_root)
    return [s.packet for s in sources if s.packet is not None], problems


def _check_all(packets_dir: Path, repo_root: Path) -> tuple[list[_Source], list[Problem]]:
    """check_packets, keeping every file's _Source (drafts are told apart by their raw table)."""
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
                # never the packet itself: requiring it is an error of its own (above)
                near = closest(dep, [k for k in by_id if k != pid])
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
    return sources, problems


def _unreadable_note(paths: list[Path], packets_dir: Path) -> str:
    """Why an unknown id may still be right: packets whose own id could not be read."""
    if not paths:
        return ""
    names = [p.relative_to(packets_dir).as_posix() for p in paths[:3]]
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    ids = "id" if len(paths) == 1 else "ids"
    return f" (the {ids} of {', '.join(names)}{more} could not be read)"


def load_packets(packets_dir: Path, repo_root: Path, drafts_ok: bool = False) -> list[Packet]:
    """Load every packet under ``packets_dir``, sorted by id.

    ``drafts_ok`` (the runner): a problem in a file whose front matter says ``status =
    "draft"`` does not refuse the others — a draft is never run, and its problems are
    ``andon plan``'s to show; a draft with a problem is left out of the list.

    Raises PacketError carrying every Problem (see check_packets) if there is any.
    """
    sources, problems = _check_all(packets_dir, repo_root)
    if drafts_ok:
        drafts = {s.path for s in sources if s.data.get("status") == "draft"}
        flawed = {p.path for p in problems} & drafts
        problems = [p for p in problems if p.path not in drafts]
        sources = [s for s in sources if s.path not in flawed]
    if problems:
        raise PacketError(problems)
    return sorted((s.packet for s in sources if s.packet is not None), key=lambda p: p.id)
