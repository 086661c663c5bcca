"""The run table: every run of an experiment in memory, one row per (task, condition, repeat),
and its reader from CSV.

A comparison reads only a :class:`RunTable`, never a file, so a stored experiment can be
compared by building the same table from the store. The CSV columns (docs/experiments.md):

- ``task``, ``condition`` — required, non-empty;
- ``resolved`` — ``true``/``false`` (also ``1``/``0``, ``yes``/``no``), required unless
  ``outcome`` is present;
- ``outcome`` — ``resolved``, ``unresolved`` or ``error`` (the harness, environment or the
  agent's provider failed: excluded from the rates, counted apart);
- ``repeat`` — an integer >= 0; without it every (task, condition) must appear once;
- ``cost_usd``, ``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
  ``cache_write_tokens``, ``wall_s``, ``tool_s`` — numbers >= 0; empty (or ``NA``, ``nan``,
  ``null``, ``None``) means not known, never 0. Tokens follow andon's convention
  (:mod:`andon.usage`): input includes the cache reads and writes;
- the observations of :mod:`andon.experiments.observe` (``false_claim``, ``scope_violations``
  ...) — counts >= 0 or ``true``/``false``; empty means not observed.

Other columns are kept out of the table and listed in ``ignored_columns``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Problem, UsageError
from ..suggest import closest
from .observe import OBSERVATIONS

OUTCOMES = ("resolved", "unresolved", "error")
METRICS = ("cost_usd", "input_tokens", "output_tokens", "cache_read_tokens",
           "cache_write_tokens", "wall_s", "tool_s")
REQUIRED = ("task", "condition")
KNOWN = (*REQUIRED, "resolved", "outcome", "repeat", *METRICS, *OBSERVATIONS)
TRUE = {"true", "1", "yes", "y", "t"}
FALSE = {"false", "0", "no", "n", "f"}
MISSING = {"", "na", "n/a", "nan", "null", "none"}
MAX_PROBLEMS = 20  # a wholly wrong file says enough after this many


class RunsError(UsageError):
    """A run table could not be read: ``problems`` lists each one with its file and line
    (the header is line 1), at most :data:`MAX_PROBLEMS` of them."""

    def __init__(self, problems: list[Problem], more: int = 0):
        self.problems = problems
        tail = [f"... and {more} more problems"] if more else []
        super().__init__("\n".join([*(str(p) for p in problems), *tail]))


@dataclass(frozen=True)
class Run:
    """One run: ``outcome`` is one of :data:`OUTCOMES`; ``metrics`` maps each name in
    :data:`METRICS` to a float or ``None`` (not known; USD, tokens or seconds by name);
    ``origin`` says where it came from (``file:line``) for messages."""

    task: str
    condition: str
    repeat: int
    outcome: str
    metrics: dict[str, float | None] = field(hash=False)  # a dict: compared, not hashed
    origin: str = ""
    # observation name -> count (a true/false one as 1/0), None when not observed
    observations: dict[str, int | None] = field(default_factory=dict, hash=False)

    @property
    def valid(self) -> bool:
        """False for an ``error`` run, which says nothing about the condition."""
        return self.outcome != "error"


@dataclass
class RunTable:
    """Every run of one experiment. ``source`` names it (a path, or an experiment);
    ``metric_columns`` are the metrics the source had; ``ignored_columns`` the columns it had
    that a comparison does not use."""

    runs: list[Run]
    source: str
    metric_columns: tuple[str, ...] = METRICS
    ignored_columns: tuple[str, ...] = ()

    def conditions(self) -> list[str]:
        """Condition names in order of first appearance."""
        return list(dict.fromkeys(r.condition for r in self.runs))


class _Problems:
    def __init__(self, path: Path):
        self.path = path
        self.found: list[Problem] = []
        self.more = 0

    def add(self, line: int | None, message: str) -> None:
        if len(self.found) < MAX_PROBLEMS:
            self.found.append(Problem(self.path, line, message))
        else:
            self.more += 1

    def raise_any(self) -> None:
        if self.found:
            raise RunsError(self.found, self.more)


def read_csv(path: str | Path) -> RunTable:
    """Read a CSV of runs (UTF-8, a BOM allowed; columns in the module docstring).

    Raises :class:`RunsError` naming the file, the line, the column, what was expected and
    what the file has, for: an unreadable or empty file, a missing or repeated column, a row
    with the wrong number of fields, a malformed value, ``resolved`` contradicting
    ``outcome``, and the same (task, condition, repeat) twice.
    """
    path = Path(path)
    problems = _Problems(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(None, f"cannot read the runs file: {exc}")
        problems.raise_any()
    reader = csv.reader(text.splitlines(keepends=True))
    header = [h.strip() for h in next(reader, [])]
    if not any(header):
        problems.add(None, "empty file: expected a header line naming the columns "
                           f"({', '.join(REQUIRED)}, resolved or outcome, ...)")
        problems.raise_any()
    _check_header(header, problems)
    problems.raise_any()
    col = {name: i for i, name in enumerate(header)}
    runs: list[Run] = []
    seen: dict[tuple[str, str, int], int] = {}
    for fields in reader:
        line = reader.line_num
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            problems.add(line, f"expected {len(header)} fields (as the header), "
                               f"got {len(fields)}")
            continue
        run = _row(dict(zip(header, [f.strip() for f in fields], strict=True)), col, line,
                   problems, f"{path}:{line}")
        if run is None:
            continue
        key = (run.task, run.condition, run.repeat)
        if key in seen:
            hint = "" if "repeat" in col else "; add a `repeat` column to number the repeats"
            problems.add(line, f"the run (task {run.task!r}, condition {run.condition!r}, "
                               f"repeat {run.repeat}) is already on line {seen[key]}{hint}")
            continue
        seen[key] = line
        runs.append(run)
    if not runs and not problems.found:
        problems.add(None, "no runs: the file has a header and no rows")
    problems.raise_any()
    return RunTable(runs, str(path), tuple(m for m in METRICS if m in col),
                    tuple(h for h in header if h not in KNOWN))


def _check_header(header: list[str], problems: _Problems) -> None:
    for i, name in enumerate(header):
        if name and name in header[:i]:
            problems.add(1, f"column {name!r} appears twice")
    present = set(header)
    unknown = [h for h in header if h not in KNOWN]
    wanted = [*REQUIRED, *([] if "outcome" in present else ["resolved"])]
    for name in wanted:
        if name not in present:
            near = closest(name, unknown)
            also = " (or an `outcome` column)" if name == "resolved" else ""
            hint = f"; did you mean {near!r}?" if near else f"; the header has: {', '.join(header)}"
            problems.add(1, f"missing column {name!r}{also}{hint}")


def _row(values: dict[str, str], col: dict[str, int], line: int, problems: _Problems,
         origin: str) -> Run | None:
    before = len(problems.found) + problems.more

    def bad(column: str, expected: str) -> None:
        problems.add(line, f"column {column!r}: expected {expected}, got {values[column]!r}")

    for name in REQUIRED:
        if not values[name]:
            bad(name, f"a {name} name")
    outcome = values.get("outcome", "").lower()
    if outcome and outcome not in OUTCOMES:
        bad("outcome", " or ".join(OUTCOMES))
    resolved: bool | None = None
    if "resolved" in col:
        raw = values["resolved"].lower()
        if raw in TRUE:
            resolved = True
        elif raw in FALSE:
            resolved = False
        elif raw or outcome not in ("error", "resolved", "unresolved"):
            bad("resolved", "true or false (or 1/0, yes/no)"
                + ("; it may be empty only when `outcome` is given" if "outcome" in col else ""))
    if outcome in ("resolved", "unresolved") and resolved is not None \
            and resolved != (outcome == "resolved"):
        problems.add(line, f"column 'resolved' says {values['resolved']!r} but column "
                           f"'outcome' says {values['outcome']!r}")
    if not outcome and resolved is not None:
        outcome = "resolved" if resolved else "unresolved"
    elif not outcome and "outcome" in col and "resolved" not in col:
        bad("outcome", " or ".join(OUTCOMES))
    repeat = 0
    if "repeat" in col:
        try:
            repeat = int(values["repeat"])
        except ValueError:
            repeat = -1
        if repeat < 0:
            bad("repeat", "an integer >= 0")
    metrics: dict[str, float | None] = dict.fromkeys(METRICS)
    for name in METRICS:
        raw = values.get(name, "")
        try:
            number = float(raw)
        except ValueError:
            if raw.lower() in MISSING:
                continue
            number = -1.0
        if math.isnan(number):  # "nan" is how pandas and numpy spell "not known"
            continue
        if not math.isfinite(number) or number < 0:
            bad(name, "a number >= 0 (or empty when not known)")
            continue
        metrics[name] = number
    observed: dict[str, int | None] = {}
    for name in OBSERVATIONS:
        raw = values.get(name, "").lower()
        if name not in col or raw in MISSING:
            continue
        if raw in TRUE or raw in FALSE:
            observed[name] = int(raw in TRUE)
        elif raw.isdigit():
            observed[name] = int(raw)
        else:
            bad(name, "a count >= 0 or true/false (or empty when not observed)")
    if len(problems.found) + problems.more > before:
        return None
    return Run(values["task"], values["condition"], repeat, outcome, metrics, origin, observed)


def table_from_runs(runs: Iterable[Run], source: str) -> RunTable:
    """A run table from runs built elsewhere (the store, a test); every metric column."""
    return RunTable(list(runs), source)
