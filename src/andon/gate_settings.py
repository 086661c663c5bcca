"""Settings of the slower or project-specific gates: ``[gates.mutation]``, ``[gates.static]``,
``[gates.flaky]`` in ``andon.toml`` (read through :class:`andon.config.Gates`).

``mutation`` and ``flaky`` are opt-in: they repeat test runs and cost time on every attempt.
Each runs when ``enabled = true``, or for a packet whose ``tier`` is listed in its ``tiers``
(e.g. ``tiers = ["critical"]``: mutation testing only for critical work). ``static`` runs when
it has commands. A gate that does not run is recorded as ``skipped`` with the reason.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Switch(_Strict):
    enabled: bool = Field(False, description="run for every packet")
    tiers: list[str] = Field(default_factory=list,
                             description="run for packets of these tiers even when not enabled")

    def runs_for(self, tier: str | None) -> bool:
        return self.enabled or (tier is not None and tier in self.tiers)

    def off_reason(self, table: str) -> str:
        tiers = f" nor for tiers {', '.join(self.tiers)}" if self.tiers else ""
        return f"disabled: [gates.{table}] enabled = false{tiers} (opt-in; see docs/gates.md)"


class MutationGate(_Switch):
    """``[gates.mutation]``: mutmut on the functions the candidate changed, in a fresh clone."""

    min_score: float = Field(0.6, ge=0, le=1, description="killed / executed must reach this "
                             "floor; equivalent mutants exist, so 1.0 is rarely right")
    timeout_s: float = Field(900, gt=0, description="wall seconds for the whole mutmut run; "
                             "a run that does not finish is an error, never a pass")
    max_survivors_shown: int = Field(20, ge=0, description="surviving mutants whose diffs are "
                                     "kept in the evidence")
    python: str | None = Field(None, description="interpreter that has mutmut and the project's "
                               "test dependencies; default: the one running andon")


class StaticGate(_Strict):
    """``[gates.static]``: the project's own linters and type checkers, run by the harness."""

    commands: list[list[str]] = Field(
        default_factory=list, description='argv lists, e.g. [["ruff", "check", '
        '"--output-format=json"], ["mypy"]]; the changed Python files are appended')
    changed_lines_only: bool = Field(True, description="only findings on lines the candidate "
                                     "added or changed fail the gate; the rest are kept as "
                                     "notes in the evidence")
    timeout_s: float = Field(300, gt=0)


class FlakyGate(_Switch):
    """``[gates.flaky]``: planted tests and tests near the change, re-run in random orders."""

    runs: int = Field(4, ge=2, description="runs, each in a random order with its own seed")
