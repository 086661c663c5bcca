"""Every exception andon raises on purpose.

AndonError
├── UsageError         the user asked for something that cannot be done (exit status 2)
│   ├── PacketError    one or more packet files are invalid; carries every Problem
│   └── ConfigError    andon.toml is invalid or missing
├── GitError           a git command failed; carries argv, exit status and stderr
├── StoreError         the SQLite store is unusable (wrong schema version, locked by a runner)
└── IllegalTransition  a lifecycle transition that DESIGN.md does not allow (a bug in andon)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file: where (path, 1-based line or None) and what."""

    path: Path
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else f"{self.path}"
        return f"{where}: {self.message}"


class AndonError(Exception):
    """Base of every error andon raises on purpose."""


class UsageError(AndonError):
    """The request cannot be carried out as given; the CLI exits with status 2."""


class PacketError(UsageError):
    """Packet files are invalid. ``problems`` lists every one found, in file order."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ConfigError(UsageError):
    """andon.toml is missing or invalid. ``problems`` lists each one, when they are known
    apart (one per line of the message)."""

    def __init__(self, message: str, problems: list[Problem] | None = None):
        self.problems = problems or []
        super().__init__(message)


class GitError(AndonError):
    """A git subprocess failed."""

    def __init__(self, argv: list[str], returncode: int, stderr: str):
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"{' '.join(argv)} exited {returncode}: {stderr.strip()}")


class StoreError(AndonError):
    """The store cannot be used (unknown schema version, held by another runner)."""


class IllegalTransition(AndonError):
    """A lifecycle transition DESIGN.md does not allow. Always a bug in andon."""
