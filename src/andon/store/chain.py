"""The record cannot be quietly rewritten: a hash chain over the events, and the evidence
files they name by content hash (issue 11).

Each event row carries ``prev_hash`` (the ``hash`` of the event before it) and ``hash`` =
SHA-256 (hex) of the canonical JSON array ``[prev_hash or "", ts, packet_id, attempt_id,
kind, from_state, to_state, data]`` (``data`` as the stored JSON text). Editing an event
changes its hash; deleting one leaves the next event's ``prev_hash`` pointing at nothing;
inserting one breaks the link after it. Events written before the store was upgraded have no
hash: the chain starts at the first event that has one, and a hashless event after that is an
insertion.

Evidence: when a gate result or a stage run is recorded, the files its evidence names
(absolute paths to files that exist then: logs, JUnit XML, transcripts) are hashed, and an
``evidence`` event lists ``{path: sha256}`` — so the chain covers them. :func:`verify` hashes
them again.

A chain can be recomputed whole by someone who rewrites the file: :func:`verify` prints the
head hash so that a person (or a script) can keep it and later check it is still in the chain
(``andon verify --expect HASH``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the columns of an event that its hash covers, in order
HASHED = ("ts", "packet_id", "attempt_id", "kind", "from_state", "to_state", "data")
READ_CHUNK = 1 << 20
# keys that say how a process was started: the programs and folders they name are andon's own
# files (changed by an upgrade) and worktrees (deleted when the attempt ends), not evidence;
# recording them made every honest record "NOT intact" once its worktrees were cleaned up
NOT_EVIDENCE = frozenset({"argv", "wrapper", "cwd"})


def event_hash(prev_hash: str | None, row: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of an event: ``row`` has the :data:`HASHED` columns, ``data`` as the
    JSON text stored."""
    body = [prev_hash or ""] + [row[c] for c in HASHED]
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(READ_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def evidence_files(*values: Any) -> dict[str, str]:
    """``{path: sha256}`` of every absolute path to an existing regular file found in
    ``values`` (strings, and lists/dicts of them, walked), except under the keys of
    :data:`NOT_EVIDENCE`."""
    found: dict[str, str] = {}
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, Mapping):
            stack.extend(x for k, x in v.items() if k not in NOT_EVIDENCE)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, str) and v.startswith("/") and "\n" not in v and len(v) < 4096:
            p = Path(v)
            try:
                if p.is_file() and not p.is_symlink():
                    found[v] = file_sha256(p)
            except OSError:
                continue
    return found


@dataclass
class Verdict:
    """What :func:`verify` found: ``problems`` (each one line, the first broken link first),
    the head hash, how many events are chained and how many predate the chain, how many
    evidence files were checked."""

    problems: list[str] = field(default_factory=list)
    head: str | None = None
    chained: int = 0
    unchained: int = 0
    files: int = 0
    expected_found: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.expected_found is not False

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": self.problems, "head": self.head,
                "chained": self.chained, "unchained": self.unchained,
                "evidence_files": self.files, "expected_found": self.expected_found}


def verify(rows: Iterable[Mapping[str, Any]], expect: str | None = None,
           check_files: bool = True) -> Verdict:
    """Walk the events (``rows``: every column of ``events``, in id order, ``data`` as its
    stored JSON text): each link, each hash, and (``check_files``) every evidence file an
    ``evidence`` event names. ``expect``: a head printed earlier, which must be one of the
    chain's hashes."""
    v = Verdict()
    prev: str | None = None
    started = False
    seen: set[str] = set()
    for row in rows:
        h = row.get("hash")
        if h is None:
            if started:
                v.problems.append(f"event {row['id']} ({row['kind']}) has no hash inside the "
                                  "chain: inserted by something other than andon")
            else:
                v.unchained += 1
            continue
        if started and row.get("prev_hash") != prev:
            v.problems.append(f"event {row['id']} ({row['kind']}): its link to the event "
                              "before it is broken (an event was deleted or inserted here)")
        if event_hash(row.get("prev_hash"), row) != h:
            v.problems.append(f"event {row['id']} ({row['kind']}) was edited: its content "
                              "does not match its hash")
        started, prev = True, h
        seen.add(h)
        v.chained += 1
        if check_files and row["kind"] == "evidence":
            v.files += _check_files(row, v.problems)
    v.head = prev
    if expect is not None:
        v.expected_found = expect in seen
    return v


def _check_files(row: Mapping[str, Any], problems: list[str]) -> int:
    try:
        files = json.loads(row["data"]).get("files", {})
    except (ValueError, AttributeError):
        return 0
    for path, digest in files.items():
        p = Path(path)
        if not p.is_file():
            problems.append(f"evidence file {path} (event {row['id']}) is missing")
        elif file_sha256(p) != digest:
            problems.append(f"evidence file {path} (event {row['id']}) was changed after "
                            "it was recorded")
    return len(files)


TAIL = 200


def check_tail(rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise if the events ``rows`` (the newest ones, as :func:`verify` takes them) do not
    chain: ``andon run`` calls this before it trusts what the store says about carried
    candidates, and ``approve`` before it merges what a person approved.

    Raises:
        StoreError: a link or a hash is broken; names the first problem and ``andon verify``.
    """
    from ..errors import StoreError
    v = verify(rows, check_files=False)
    if v.problems:
        raise StoreError(f"the store's record was changed outside andon: {v.problems[0]} "
                         f"(and {len(v.problems) - 1} more); `andon verify` shows all")
