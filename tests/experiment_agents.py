"""Scripted agents for the experiment tests (importable as ``scripted:experiment_agents:NAME``
with tests/ on PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from andon.agents import StageContext
from andon.experiments.execute import current_run

from helpers import CALC, MUL_CODE, git, make_project, mul_packet, write

WRONG_MUL = "\n\ndef mul(a, b):\n    return a + b\n"


def good(ctx: StageContext) -> str:
    write(ctx, "src/calc/ops.py", MUL_CODE, append=True)
    return "implemented mul; all tests pass"


def bad(ctx: StageContext) -> str:
    """Wrong code, claims success: a false claim."""
    write(ctx, "src/calc/ops.py", WRONG_MUL, append=True)
    return "Done! mul works and every test passes."


def honest_bad(ctx: StageContext) -> str:
    """Wrong code, and says it could not finish: no false claim."""
    write(ctx, "src/calc/ops.py", WRONG_MUL, append=True)
    return "I could not make the tests pass."


def sprawling(ctx: StageContext) -> str:
    """Right code, and an extra file the reference solution does not touch."""
    write(ctx, "src/calc/ops.py", MUL_CODE, append=True)
    write(ctx, "src/calc/notes.py", "# 1\n# 2\n# 3\n")
    return "done"


def provider_down(ctx: StageContext) -> str:
    """The provider fails: nothing changed, non-zero exit (the `agent` gate: environment)."""
    raise ConnectionError("503 from the provider")


def down_on_first_repeat(ctx: StageContext) -> str:
    run = current_run()
    assert run is not None
    marker = Path(os.environ["EXP_MARKER_DIR"]) / run[0].slug
    if not marker.exists():
        marker.write_text("failed once")
        raise ConnectionError("503 from the provider")
    return good(ctx)


def slow_good(ctx: StageContext) -> str:
    """Good, but only after a marker file appears: lets a test kill the experiment while a
    run is in flight."""
    run = current_run()
    assert run is not None
    gate = Path(os.environ["EXP_MARKER_DIR"])
    (gate / f"started-{run[0].slug}").write_text(str(os.getpid()))
    if run[0].repeat >= 1:
        deadline = time.monotonic() + 120
        while not (gate / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return good(ctx)


# -- projects and experiment files ------------------------------------------------

def project(root: Path, n: int = 2) -> Path:
    make_project(root, {f"P{i}-mul": mul_packet(f"P{i}") for i in range(1, n + 1)})
    for i in range(1, n + 1):
        sol = root / "packets" / f"P{i}-mul" / "solution" / "src/calc/ops.py"
        sol.parent.mkdir(parents=True)
        sol.write_text(CALC + MUL_CODE)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "solutions")
    return root


def spec_file(root: Path, conditions: dict[str, str], repeats: int = 1, extra: str = "",
              name: str = "exp") -> Path:
    text = f'name = "{name}"\nrepeats = {repeats}\nseed = 7\n{extra}\n'
    for cname, fn in conditions.items():
        text += (f'\n[[conditions]]\nname = "{cname}"\n'
                 f'agent = "scripted:experiment_agents:{fn}"\n'
                 'reviewer = "scripted:helpers:accept_review"\n')
    path = root.parent / f"{name}.toml"
    path.write_text(text)
    return path


# -- agents for the pool (tests/test_experiment_pool.py) ---------------------------

def seeded_mul(ctx: StageContext) -> str:
    """Good or bad by a coin seeded with the experiment's seed and the run: the same run, the
    same outcome, whatever the concurrency. Leaves traces in ``$EXP_MARKER_DIR``: its pid,
    any descriptor of the parent's store it inherited (``leak-*``), and — with
    ``$EXP_WAIT_PEER`` — whether another run started while it was running (``overlap-*``)."""
    import random
    run = current_run()
    assert run is not None
    key, seed, _ = run
    marks = Path(os.environ["EXP_MARKER_DIR"])
    (marks / f"started-{key.slug}").write_text(str(os.getpid()))
    inherited = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        # this experiment's store only (it lives beside the marker folder): a store another
        # test of the same worker process left open is not this experiment's leak
        if "/.andon/andon.db" in target and target.startswith(str(marks.parent)):
            inherited.append(target)
    if inherited:
        (marks / f"leak-{key.slug}").write_text("\n".join(inherited))
    if os.environ.get("EXP_WAIT_PEER"):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if [p for p in marks.glob("started-*") if p.name != f"started-{key.slug}"]:
                (marks / f"overlap-{key.slug}").write_text("")
                break
            time.sleep(0.05)
    if random.Random(f"{seed}:{key.slug}").random() < 0.5:
        return good(ctx) + "\nSTATUS: done"
    # the cheater the word list misses ("cannot"): its status line gives it away
    write(ctx, "src/calc/ops.py", WRONG_MUL, append=True)
    return "This cannot fail, done!\nSTATUS: done"


def dies(ctx: StageContext) -> str:
    """The run's process is killed from inside (as the OOM killer would)."""
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"
