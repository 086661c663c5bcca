"""Is a run's JUnit report the runner's own? The integrity record of one suite run.

``judge`` combines three independent signs, any one of which makes the report forged:

- the hook's ``patched`` and ``forged-event`` lines (the runner changed since it was armed);
- a test the JUnit report says passed whose phases the channel saw fail or error, or never saw
  at all; and a planted or canary test that pytest did not call as its module bound it at
  import (an object put in the module's namespace later, or one that is not a function). What
  the module bound may come from another file (``@mock.patch``, a ``functools.wraps`` helper, a
  method inherited from a helper class, ``test_x = check(...)``): those files are kept in
  ``Integrity.wrappers``, and the caller rejects one the agent changed (gates/base.py), which
  this module cannot tell. Where the plugin could not compare (no snapshot of the module), the
  function's code must come from the planted file, or the planted file must decorate it
  (:func:`decorated`) with a ``__wrapped__`` chain ending there;
- a canary test with the wrong outcome, or missing.

A channel that was used and lost is forged too. ``event`` lines (gc, ctypes, settrace …) are kept
in the evidence only: honest projects use them.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .canary import Canaries
from .channel import Record


@dataclass
class Integrity:
    """The integrity record of one run (``SuiteRun.integrity``). ``channel``: "used" or
    "not used (<why>)"; ``forged``: human-readable reasons, empty when nothing was found."""

    channel: str
    forged: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)      # noted, not findings
    canaries: dict[str, str] = field(default_factory=dict)  # junit id → outcome seen
    mismatches: list[str] = field(default_factory=list)  # junit passed, channel did not
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    # junit id → files of the wrapper a planted test was called through (``judge`` accepted
    # it; whether the agent wrote those files is for the caller, who knows the planted tree).
    # Not evidence: the store would hash these absolute paths as evidence files (store/chain)
    wrappers: dict[str, list[str]] = field(default_factory=dict)

    def to_evidence(self) -> dict[str, Any]:
        return {"channel": self.channel, "forged": list(self.forged),
                "events": list(self.events), "canaries": dict(self.canaries),
                "mismatches": list(self.mismatches), "lines": self.lines,
                "notes": list(self.notes)}


def _phase_outcomes(rec: Record) -> tuple[dict[str, set[str]], dict[str, tuple[str, str]]]:
    """Every outcome the channel saw per test id (any phase), and each test's (node file, file
    its function's code came from). One phase may have several lines — pytest reports each
    ``subTest`` of a unittest case as a call of its own — so outcomes are a set: a test the
    JUnit report calls passed must have been seen passing only, and an extra "passed" line
    cannot hide a failure."""
    seen: dict[str, set[str]] = {}
    files: dict[str, tuple[str, str]] = {}
    for f in rec.of("outcome"):
        if len(f) != 5:
            continue
        tid, when, outcome, node_file, code_file = f
        seen.setdefault(tid, set()).add(outcome)
        if when == "call":
            files[tid] = (node_file, code_file)
    return seen, files


# an outcome line's code field (andon_verdict.py): "<same|replaced|early|other|item>"
# STATUS_SEP the test's own file (absolute) STATUS_SEP the files its function's code came
# from, outermost first, CHAIN_SEP between them
STATUS_SEP, CHAIN_SEP = "\x1e", "\x1f"


def decorated(root: Path, files: Sequence[str]) -> dict[str, set[str]]:
    """Per repo-relative file of ``files`` under ``root``, the names of the functions it
    decorates with anything but a pytest mark or fixture (those return the function itself):
    the tests whose called function may rightly be a wrapper. Read before the run, so code
    the run executes cannot add a decorator; a file that is missing or does not parse has
    none."""
    found: dict[str, set[str]] = {}
    for rel in files:
        try:
            tree = ast.parse((root / rel).read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        found[rel] = {
            node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(not ast.unparse(d).startswith(("pytest.mark.", "mark.", "pytest.fixture"))
                    for d in node.decorator_list)}
    return found


def judge(results: dict, rec: Record | None, why_not: str, canaries: Canaries | None,
          own_files: Sequence[str] = (),
          wrapped: dict[str, set[str]] | None = None) -> Integrity:
    """The integrity of one run. ``results``: the JUnit results by id (canaries still in);
    ``rec``: the channel's record, None when the channel was not used (``why_not`` says why);
    ``own_files``: repo-relative test files whose test functions must be defined in them
    (planted, hidden); ``wrapped``: :func:`decorated` of those files, read before the run."""
    integ = Integrity("used" if rec is not None else f"not used ({why_not})")
    if canaries is not None:
        for tid, want in canaries.expected.items():
            got = results.get(tid)
            seen = got.outcome if got is not None else "missing"
            integ.canaries[tid] = seen
            if seen != want:
                integ.forged.append(f"canary {tid} must have {want}, the report says {seen}")
    if rec is None:
        return integ
    integ.lines = len(rec.lines)
    if rec.lost:
        integ.forged.append(f"verdict channel lost: {rec.lost}")
    integ.forged += [f"runner patched: {f[0]}" for f in rec.of("patched") if f]
    integ.forged += [f"forged event: {f[0]}" for f in rec.of("forged-event") if f]
    integ.events = [f[0] for f in rec.of("event") if f]
    integ.events += [f"runner changed: {f[0]}" for f in rec.of("changed") if f]
    integ.notes = [f[0] for f in rec.of("note") if f]
    if "xdist" in integ.notes:
        return integ  # tests ran in workers the channel does not reach: only canaries count
    seen, code_files = _phase_outcomes(rec)
    for tid, r in results.items():
        if r.outcome != "passed":
            continue
        said = seen.get(tid)
        if not said:  # no call line: the test never ran (or ran where the channel is not)
            integ.mismatches.append(f"{tid} passed in the report but the runner never ran it")
        elif said != {"passed"}:
            bad = sorted(said - {"passed"})
            integ.mismatches.append(f"{tid} passed in the report but the runner saw it "
                                    f"{'/'.join(bad)}")
    own = set(own_files) | ({canaries.path} if canaries else set())
    for tid, (node_file, line) in sorted(code_files.items()):
        if node_file not in own:
            continue
        status, own_path, chain = [*line.split(STATUS_SEP), "", ""][:3]
        if status == "item":
            integ.mismatches.append(f"{tid}: its test item was given its own runtest, setup or "
                                    "teardown after collection: pytest ran that, not the test")
            continue
        if status == "other":
            continue  # not a test function (a doctest)
        # own_path: the test's own file as the runner imported it
        files = chain.split(CHAIN_SEP) if chain else []
        if status == "replaced":
            integ.mismatches.append(f"{tid}: its test function was replaced after its module "
                                    "was imported" + (f" (by code from {files[0]})" if files
                                                      else " (by an object that is not a "
                                                      "function)"))
        elif not files:
            integ.mismatches.append(f"{tid}: what pytest called is not a function")
        elif status == "same":
            # what the module bound at import: its own function, a decorator's wrapper, an
            # inherited method. Code from another file must not be the agent's
            # (``Integrity.wrappers``, checked by the caller against the planted tree)
            if outer := [f for f in files if f != own_path]:
                integ.wrappers[tid] = outer
        elif files[0] != own_path:
            name = tid.rsplit("::", 1)[-1].split("[", 1)[0]
            if files[-1] == own_path and name in (wrapped or {}).get(node_file, ()):
                if outer := [f for f in files[:-1] if f != own_path]:
                    integ.wrappers[tid] = outer
                continue  # the planted file's own decorator
            integ.mismatches.append(f"{tid}: its test function was replaced by code from "
                                    f"{files[0]}")
    # a canary's mismatch is already a canary finding; its random id must not enter findings
    integ.forged += [m for m in integ.mismatches
                     if not (canaries and m.split(" ", 1)[0].rstrip(":") in canaries.expected)]
    return integ
