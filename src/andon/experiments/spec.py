"""EXPERIMENT.toml: what an experiment runs (docs/experiments.md, "The experiment file").

The file names the packets (ids, globs over ids, or folders of packets), the conditions (each
a name, an agent adapter and its settings), ``repeats``, ``seed``, ``concurrency`` and a
``[budget]``. :func:`load_spec` reads it into :class:`Spec`; every problem is reported with
the file and line, what was expected and what the file has.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import ConfigError, InvalidValue, Problem, toml_problem
from ..suggest import closest

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Condition(_Strict):
    """One condition: an adapter (``agent``, as ``andon run --agent`` spells it) and its
    settings. Paths are relative to the experiment file. ``stages`` replaces the packet's
    stage list when given; ``retries`` is how many more attempts a run gets after an
    unresolved one (0: pass@1 means what the field means)."""

    name: str = Field(pattern=NAME_RE)
    agent: str
    command: str | None = None
    reviewer: str | None = None
    # the review stages' command (a `command` reviewer of its own, as --reviewer-command):
    # without it a command reviewer runs `command`, the agent's own script
    reviewer_command: str | None = None
    model: str | None = None
    prompt_template: str | None = None
    prompt_dir: str | None = None
    stages: list[str] | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    retries: int = Field(0, ge=0, le=5)
    # scripted conditions (the demo): the seeded chance that the agent does the work
    success_rate: float | None = Field(None, ge=0, le=1)

    @model_validator(mode="after")
    def _reviewer_command_is_a_command_reviewers(self) -> Condition:
        if self.reviewer_command and self.reviewer \
                and self.reviewer.partition(":")[0] != "command":
            raise InvalidValue(f"reviewer_command is the command of a `command` reviewer; "
                               f"this condition's reviewer is {self.reviewer!r}")
        return self


class Budget(_Strict):
    """Spend limits: per run (the run is stopped as ``budget``, an unresolved outcome) and in
    total (no further run starts once reached). USD and tokens (input + output)."""

    run_usd: float | None = Field(None, gt=0)
    run_tokens: int | None = Field(None, gt=0)
    total_usd: float | None = Field(None, gt=0)
    total_tokens: int | None = Field(None, gt=0)


class Spec(_Strict):
    """A whole experiment file; ``source`` and ``text`` are set by :func:`load_spec`."""

    name: str = Field("", pattern=r"^$|" + NAME_RE)
    packets: list[str] = Field(default_factory=list)
    repeats: int = Field(1, ge=1, le=1000)
    seed: int = 0
    concurrency: int = Field(1, ge=1, le=64)
    budget: Budget = Field(default_factory=Budget)
    conditions: list[Condition] = Field(min_length=1)
    source: Path = Field(Path("."), exclude=True)

    @field_validator("conditions")
    @classmethod
    def _unique(cls, value: list[Condition]) -> list[Condition]:
        names = [c.name for c in value]
        dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if dup is not None:
            raise InvalidValue(f"condition name {dup!r} appears twice")
        return value

    def condition(self, name: str) -> Condition:
        return next(c for c in self.conditions if c.name == name)

    def path(self, rel: str | None) -> Path | None:
        """``rel`` (from the file) resolved against the experiment file's folder."""
        return None if rel is None else (self.source.parent / rel).resolve()


def load_spec(path: str | Path) -> Spec:
    """Read and validate an experiment file.

    Raises:
        ConfigError: unreadable file, TOML syntax, unknown keys (with a did-you-mean), bad
            values; each problem as ``file:line: what``; nothing is run.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the experiment file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(toml_problem(path, text, exc, "not valid TOML"))) from None
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        problems = [Problem(path, _line(text, list(e["loc"])), _what(e)) for e in exc.errors()]
        raise ConfigError("\n".join(str(p) for p in problems)) from None
    spec.source = path.resolve()
    if not spec.name:
        spec.name = re.sub(r"[^A-Za-z0-9_.-]", "-", path.stem) or "experiment"
    return spec


def _what(err: Any) -> str:
    loc = [p for p in err["loc"] if isinstance(p, str)]
    where = ".".join(loc) or "the file"
    if err["type"] == "extra_forbidden":
        model: Any = {"budget": Budget, "conditions": Condition}.get(loc[0] if len(loc) > 1
                                                                     else "", Spec)
        near = closest(loc[-1], list(model.model_fields))
        hint = f"did you mean {near!r}?" if near else "known keys: " + ", ".join(
            k for k in model.model_fields if k != "source")
        return f"{where}: unknown key; {hint}"
    given = err.get("input")
    got = f", got {given!r}" if isinstance(given, (str, int, float, bool)) else ""
    return f"{where}: {err['msg']}{got}"


def line_of(path: Path, loc: list[Any]) -> int | None:
    """The 1-based line of ``loc`` in the experiment file ``path`` (see ``_line``); None when
    the file cannot be read."""
    try:
        return _line(path.read_text(encoding="utf-8"), loc)
    except OSError:
        return None


def _line(text: str, loc: list[Any]) -> int:
    """Best-effort 1-based line of ``loc`` (``conditions``, index, key) in the TOML text."""
    lines = text.splitlines()
    start, stop = 0, len(lines)
    keys = [p for p in loc if isinstance(p, str)]
    if loc and loc[0] == "conditions" and len(loc) > 1 and isinstance(loc[1], int):
        heads = [i for i, s in enumerate(lines) if s.strip().startswith("[[conditions]]")]
        if loc[1] < len(heads):
            start = heads[loc[1]]
            nxt = [i for i, s in enumerate(lines) if i > start and s.strip().startswith("[")]
            stop = nxt[0] if nxt else len(lines)
            keys = keys[1:]
    elif keys and keys[0] == "budget" and len(keys) > 1:
        head = next((i for i, s in enumerate(lines) if s.strip() == "[budget]"), None)
        if head is not None:
            start, keys = head, keys[1:]
    for i in range(start, stop):
        if keys and re.match(rf"\s*{re.escape(keys[-1])}\s*=", lines[i]):
            return i + 1
    return start + 1
