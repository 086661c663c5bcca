"""Canary tests: a module of randomly named tests the harness adds to a run of agent code.

Some canaries must pass and some must fail; a report that gets one wrong was forged (a runner
that says "passed" for everything). The module is written next to the first planted test file
under a random name, so neither its place in the order nor its name can be predicted, and is
removed when the run is over (it never reaches a commit, a snapshot or a diff). Canary results
are taken out of the run's results: they are never FAIL_TO_PASS, PASS_TO_PASS or failing tests.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

_PASSING = ("assert {a} + {b} == {s}", "assert sorted([{b}, {a}]) == [{lo}, {hi}]",
            "assert str({a}).isdigit()")
# plain raises: an ``assert a == b`` failure costs pytest a diff (imports, reprs) per run
_FAILING = ("raise AssertionError({a})", "raise ValueError('{a}')", "raise KeyError({b})")


@dataclass
class Canaries:
    """Canary tests written for one run: ``path`` repo-relative; ``expected`` maps each test's
    JUnit id to "passed" or "failed"."""

    path: str
    file: Path
    expected: dict[str, str] = field(default_factory=dict)

    def remove(self) -> None:
        self.file.unlink(missing_ok=True)


def _name() -> str:
    return "test_" + secrets.token_hex(5)


def plant(cwd: Path, planted: list[str]) -> Canaries:
    """Write a canary module into ``cwd`` beside ``planted[0]`` (or ``tests/`` when there is
    none) with 2-3 passing and 2-3 failing tests in a random order."""
    folder = PurePosixPath(planted[0]).parent if planted else PurePosixPath("tests")
    while True:
        rel = folder / (_name() + ".py")
        if not (cwd / rel).exists():
            break
    rng = secrets.SystemRandom()
    wanted = ["passed"] * rng.randint(2, 3) + ["failed"] * rng.randint(2, 3)
    rng.shuffle(wanted)
    dotted = ".".join(p for p in rel.with_suffix("").parts if p not in ("", "."))
    lines = [f'"""{rng.choice(["Sanity checks.", "Small checks.", "Checks."])}"""', ""]
    c = Canaries(rel.as_posix(), cwd / rel)
    for outcome in wanted:
        name = _name()
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        body = rng.choice(_PASSING if outcome == "passed" else _FAILING).format(
            a=a, b=b, s=a + b, lo=min(a, b), hi=max(a, b))
        lines += ["", f"def {name}():", f"    {body}", ""]
        c.expected[f"{dotted}::{name}"] = outcome
    c.file.parent.mkdir(parents=True, exist_ok=True)
    c.file.write_text("\n".join(lines))
    return c
