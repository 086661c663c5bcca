"""Planted tests of drafts are red on the base: the rule of the ``red`` gate, applied before
any person or agent spends time on a draft. The drafts' planted files are written into one
throwaway clone of the base (``gates.base.fresh_clone``) and run once through the project's
test command (``run_project_suite``: JUnit XML per test id, the harness's flags); a planted
test that passes, a planted file that runs no test, or a run with no usable report is a
problem of that draft. The ``red`` gate runs them again, ``[gates] red_runs`` times, when the
packet is attempted."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..config import Config
from ..gates.base import fenced, fresh_clone, run_project_suite
from ..git.repo import Repo
from .contract import DraftPacket

RED = ("failed", "error")


def _is_test_file(path: str) -> bool:
    return bool(re.fullmatch(r"(test_.*|.*_test)\.py", path.rsplit("/", 1)[-1]))


def planted_red(repo: Repo, config: Config, base: str, drafts: Sequence[DraftPacket]
                ) -> list[str]:
    """Problems (``ID: ...``) of drafts whose planted tests are not red on ``base`` (a
    commit of ``repo``). Runs nothing when no draft plants a test file."""
    owner = {p: d.id for d in drafts for p in d.planted_tests if _is_test_file(p)}
    if not owner:
        return []
    out: list[str] = []
    with fresh_clone(repo, base, "plan-red") as clone, \
            tempfile.TemporaryDirectory() as ev:
        for d in drafts:
            for rel, text in d.planted_tests.items():
                target = clone / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
        files = sorted(owner)
        run = run_project_suite(config, clone, Path(ev), "plan-red", select=files,
                                readonly=fenced(repo))
        if run.report_problem:
            pids = sorted(set(owner.values()))
            return [f"{pid}: its planted tests could not be judged on the base: "
                    f"{run.report_problem}" for pid in pids]
        for f in files:
            mine = [r for r in run.results.values() if r.file == f]
            if not mine:
                out.append(f"{owner[f]}: planted file {f} runs no test on the base")
            out += [f"{owner[f]}: planted test {r.id} "
                    + ("already passes" if r.outcome == "passed" else f"is {r.outcome}")
                    + " on the base: a planted test must fail before the change (one that "
                    "must keep passing belongs in the suite)" for r in mine if r.outcome not in RED]
    return out
