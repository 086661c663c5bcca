"""The packet model: its front-matter fields (pydantic, strict) with their checks, the loaded
``Packet``, the repository globs of ``allowed_paths``/``forbidden_paths``, and the body's
``## `` sections."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from wcmatch import glob as wcglob

from andon.errors import InvalidValue

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
    # a draft (written by `andon plan`) is never claimed until a person accepts it
    status: Literal["draft", "ready"] = "ready"
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
    solution_files: dict[str, Path] = {}   # the reference solution (``andon validate``)
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

    def solution_blobs(self) -> dict[str, tuple[bytes, bool]]:
        """Repo-relative path → (bytes, executable) of each reference-solution file, as
        loaded (``solution/`` mirrors the repository like ``plant/``)."""
        return self._frozen.get("solution", {})

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
