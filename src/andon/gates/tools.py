"""Run a tool other than the test suite (mutmut, a linter) the way the harness runs tests: in its
own session, with the harness's allowlisted environment and a throwaway HOME, a time limit that
kills the whole process group, and the whole output kept on disk."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import plain_file, reaper, tempdir
from ..contain import netless
from ..contain.procgroup import before_child, end_child, wait_unreaped
from ..runners.pytest import _tail, harness_env


@dataclass
class ToolRun:
    name: str
    argv: list[str]
    cwd: str
    exit_status: int | None  # None when killed by the time limit
    timed_out: bool
    duration_s: float
    log_path: Path
    output_tail: str
    network: str = "on"  # as SuiteRun.network: "on", "cut" or "not cut: <reason>"
    wrapper: list[str] = field(default_factory=list)  # argv prefix that ran ``argv``, if any
    contained: str = ""  # as SuiteRun.contained

    def output(self) -> str:
        """The whole log; "" when what stands at ``log_path`` is not a regular file (the tool
        wrote there by name, and could have replaced it: plain_file.py)."""
        try:
            return plain_file.read_text(self.log_path)
        except OSError:
            return ""

    def to_evidence(self) -> dict:
        return {"name": self.name, "argv": self.argv, "cwd": self.cwd,
                "exit_status": self.exit_status, "timed_out": self.timed_out,
                "duration_s": round(self.duration_s, 3), "log_path": str(self.log_path),
                "output_tail": self.output_tail, "network": self.network,
                "wrapper": list(self.wrapper), "contained": self.contained}


def run_tool(argv: Sequence[str], cwd: Path, evidence_dir: Path, name: str, timeout_s: float,
             extra_env: Mapping[str, str] | None = None, stderr_apart: bool = False,
             network: str = "on", readonly: Sequence[Path] = ()) -> ToolRun:
    """Run ``argv`` in ``cwd``; stdout (and stderr, unless ``stderr_apart``: then it goes to
    ``<name>.stderr.log``) to ``<evidence_dir>/<name>.log``. Never raises for what the tool
    does; a missing executable is exit status 127. ``network="off"``: as in ``run_suite``,
    through ``netless.wrap`` where the machine allows it (``ToolRun.network`` says).
    ``readonly``: as in ``run_suite``, for a tool that runs the code under test (mutmut)."""
    state, cut = "on", False
    if network == "off":
        cut, why = netless.available()
        state = "cut" if cut else f"not cut: {why}"
    evidence_dir.mkdir(parents=True, exist_ok=True)
    log_path = evidence_dir / f"{name}.log"
    # neutral: the code under test sees HOME
    home = Path(tempfile.mkdtemp(dir=tempdir.harness_dir()))
    fence = netless.fence(readonly, [cwd, home])
    ro, rw = fence.paths or ((), ())
    # [python, -I, -S, netless.py, <options>, --]
    wrapper = netless.wrap([], cut, ro, rw) if cut or ro else []
    started = time.monotonic()
    try:
        env = harness_env(home, extra=extra_env)
        with plain_file.create(log_path) as log:
            err = plain_file.create(evidence_dir / f"{name}.stderr.log") if stderr_apart else None
            known = before_child()
            try:
                proc = subprocess.Popen([*wrapper, *argv], cwd=cwd, env=env,
                                        stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=err or subprocess.STDOUT,
                                        start_new_session=True)
            except OSError as exc:
                log.write(f"cannot run {argv[0]}: {exc}\n".encode())
                return ToolRun(name, list(argv), str(cwd), 127, False,
                               time.monotonic() - started, log_path, _tail(log_path), state,
                               wrapper, fence.state)
            finally:
                if err is not None:
                    err.close()
            try:
                timed_out = wait_unreaped(proc, timeout_s)
            finally:
                end_child(proc, known)
                status = proc.returncode
    finally:
        reaper.discard(home)  # the tool may have written anything there
    return ToolRun(name, list(argv), str(cwd), None if timed_out else status, timed_out,
                   time.monotonic() - started, log_path, _tail(log_path), state, wrapper,
                   fence.state)
