"""Builders for adapter tests: a stage context in a small worktree, and an adapter whose
PATH starts with a folder of fake agent CLIs."""

from __future__ import annotations

from pathlib import Path

from andon.agents import StageContext
from andon.config import AgentSettings
from andon.packet import load_packets

import fakes
from helpers import CALC, MUL_CODE, make_project, mul_packet

# The edit a fake agent makes: what an honest agent would write for the mul packet.
MUL_EDIT = {"src/calc/ops.py": MUL_CODE}


def stage_ctx(tmp_path: Path, prompt: str = "Add mul to calc.ops.", timeout: float = 60,
              stage: str = "implement") -> StageContext:
    root = tmp_path / "project"
    if not root.exists():
        make_project(root, {"P1": mul_packet("P1")})
    packet = load_packets(root / "packets", root)[0]
    wt = tmp_path / "wt"
    (wt / "src/calc").mkdir(parents=True, exist_ok=True)
    (wt / "src/calc/ops.py").write_text(CALC)
    ev = tmp_path / "evidence"
    ev.mkdir(exist_ok=True)
    pf = ev / f"{stage}.prompt.md"
    pf.write_text(prompt)
    return StageContext(packet, stage, 1, wt, prompt, pf, ev, timeout)


def make(cls, bin_dir: Path, environ: dict | None = None, prices=None, **settings):
    """An adapter of class ``cls`` seeing only ``environ`` plus PATH with the fakes first."""
    env = {"HOME": str(bin_dir.parent / "home"), "LANG": "C.UTF-8",
           "PATH": fakes.path_with(bin_dir), **(environ or {})}
    return cls(AgentSettings(**settings), prices, env)
