"""Every exception andon raises on purpose, in one tree.

Catch ``AndonError`` to catch them all; the CLI reports any of them as a one-line error
(exit status 2 for a ``UsageError``). A name with a module (``git.repo.RefMoved``) is
defined in that module of ``andon``, beside the code that raises it; the rest are here.
``tests/test_errors.py`` imports every module of the package and checks that this drawing
names every exception class andon defines, under the parent it inherits from.

AndonError
├── UsageError                  the request cannot be carried out as given (exit status 2)
│   ├── PacketError             packet files are invalid; ``problems`` lists every one
│   ├── ConfigError             andon.toml is missing or invalid; ``problems`` when known apart
│   ├── experiments.runs.RunsError
│   │                           a CSV of runs cannot be read; ``problems`` names row and column
│   ├── experiments.compare.ComparisonError
│   │                           the runs cannot be compared as asked (an unknown condition)
│   ├── context.model.TranscriptError
│   │                           also a ValueError: a transcript cannot be read (unknown
│   │                           format, not JSON, no message); ``problems`` names file:line
│   └── InvalidValue            also a ValueError: a value andon was given is not one it
│                               accepts (an agent name or command, a packet field, a setting)
├── InvalidArgument             also a ValueError: a function was called outside its documented
│                               arguments (a bug in the caller)
├── agents.external.FormatError also a ValueError: an agent's output (stream, log, trajectory)
│                               is not in the format its adapter reads
├── runners.junit.JUnitError    also a ValueError: a JUnit XML report that cannot be read
├── plain_file.NotPlain         also an OSError: not a regular file andon reads (a link, a FIFO,
│                               a device where a report, a log, an agent's file should be)
├── DocumentRejected            also a ValueError: the JSON document an agent answered with
│   │                           (json_document.load) breaks its contract; ``errors`` lists
│   │                           every reason, one line each (evidence for the next ask)
│   ├── review.contract.ReviewRejected
│   │                           a review document
│   ├── grill.protocol.TurnRejected
│   │                           an interview turn document
│   └── plan.contract.PlanRejected
│                               a plan document
├── grill.turn.AgentFailed      the interview agent gave no valid turn in ``[grill] max_asks``
│                               asks; ``errors``: the last document's problems
├── GitError                    a git command failed; ``argv``, ``returncode``, ``stderr``
│   └── GitBlocked              stopped while stuck on a file git would wait on for ever
│                               (git/watch.py); ``found`` lists (path, what it is)
├── git.repo.RefMoved           a ref was not where the caller expected, so it was left alone
├── worktrees.SnapshotError     the worktree cannot be read into a commit (what the agent left)
├── worktree_build.WorktreeFailed  the process writing an attempt's worktree failed (its error)
├── worktree_pool.NotReusable   a finished worktree cannot become the next (why in the
│                               message): a fresh clone is made, it never escapes
├── git.repo.MergeConflict      a squash-merge conflicts; ``paths`` lists the conflicted files
├── StoreError                  the store cannot be used (schema version, held by a runner)
│   └── StoreUnavailable        the PostgreSQL server cannot be reached (after the bounded
│                               retry), refused the login, or was lost mid-transaction
├── workers.WorkerError        a worker of `andon run --workers N` died or raised (the
│                               others finished first)
├── budget.Exceeded             a stage may not start: no budget left (``result``: the failed
│                               budget gate); ends the attempt, never escapes it
├── attempt._WroteOutside       an agent stage changed watched files in the user's checkout;
│                               ends the attempt, never escapes it
├── contain.forkserver.Unavailable
│                               no fork server for a test run (why in the message): the run
│                               starts fresh, it never escapes the runner
└── IllegalTransition           a lifecycle transition DESIGN.md does not allow (a bug in andon)

Where callers or pydantic (whose validators must raise ValueError) rely on ``ValueError``,
the class is one too, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: `andon --help` imports this module
    import tomllib
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


_TOML_AT = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")


def toml_problem(path: Path, text: str, exc: tomllib.TOMLDecodeError, what: str,
                 offset: int = 0) -> Problem:
    """The Problem for the syntax error ``exc`` that ``tomllib.loads(text)`` raised: the line
    (1-based, plus ``offset``, the lines of ``path`` before ``text``) and ``what: reason,
    column N``. tomllib says "(at end of document)" when what is missing (a closing bracket,
    a value) shows only there: that is the last line, not the first."""
    message = str(exc)
    at = _TOML_AT.search(message)
    reason = message[:at.start()] if at else message
    if at and at.group(1):
        return Problem(path, int(at.group(1)) + offset, f"{what}: {reason}, column {at.group(2)}")
    return Problem(path, max(len(text.splitlines()), 1) + offset, f"{what}: {reason}")


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


class InvalidValue(UsageError, ValueError):
    """A value andon was given is not one it accepts: an agent name or command, a packet
    field, a setting. A ValueError too, as pydantic validators must raise."""


class InvalidArgument(AndonError, ValueError):
    """A function of andon was called outside its documented arguments: a bug in the
    caller, reported with the argument and the value received."""


class DocumentRejected(AndonError, ValueError):
    """The JSON document an agent stage answered with breaks its contract; ``errors`` says
    exactly how, one line each (they go back to the agent as evidence for its next ask)."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


class GitError(AndonError):
    """A git subprocess failed."""

    def __init__(self, argv: list[str], returncode: int, stderr: str):
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"{' '.join(argv)} exited {returncode}: {stderr.strip()}")


class GitBlocked(GitError):
    """A git command stopped because it was stuck on a file that is not what git takes it for
    (git/watch.py): ``found`` lists (path, what it is) — "a FIFO", "a character device"."""

    def __init__(self, argv: list[str], found: list, message: str):
        self.found = found
        super().__init__(argv, -15, message)


class StoreError(AndonError):
    """The store cannot be used (unknown schema version, held by another runner)."""


class StoreUnavailable(StoreError):
    """The PostgreSQL store cannot be reached: unreachable or login refused when opened, an
    outage longer than the retry allows, or the connection lost inside a transaction.
    ``retry_safe``: the server rolled the work back, so running it again from its start is
    safe (False for a lost COMMIT, whose outcome is unknown)."""

    def __init__(self, message: str, retry_safe: bool = False):
        super().__init__(message)
        self.retry_safe = retry_safe


class IllegalTransition(AndonError):
    """A lifecycle transition DESIGN.md does not allow. Always a bug in andon."""
