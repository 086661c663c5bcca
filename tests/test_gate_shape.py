"""Every gate has one shape (issue 15): a module exporting ``NAME``, ``skip_reason(ctx)`` and
``run(ctx)``; names are unique; the attempt records a gate that does not apply through one
code path (``gates.judge``); and no gate's name is written out as a literal where a result
is made. Read from the modules themselves (and their source with ``ast``); no git, no pytest
subprocess.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import andon
from andon import gates
from andon.config import Config
from andon.gates.base import GateContext, GateResult

# Modules of gates/ that are not gates: what the gates share.
HELPERS = {"base", "cache", "changed", "clash", "env_cause", "flaky_base", "joint", "lanes",
           "native", "shadowing", "tools"}
# Gates that take no GateContext, and why (see gates/__init__.py): preflight runs once per
# run before any packet exists; agent judges a stage's agent run and is recorded only when
# that agent could not work at all.
NOT_CONTEXT = {"preflight": "run", "agent": "could_not_work"}
SRC = Path(andon.__file__).parent


def gate_modules() -> dict[str, ModuleType]:
    found = {}
    for info in pkgutil.iter_modules(gates.__path__):
        if info.name not in HELPERS:
            found[info.name] = importlib.import_module(f"andon.gates.{info.name}")
    return found


def test_every_gate_module_has_the_shape_and_a_unique_name():
    modules = gate_modules()
    assert {"preflight", "red", "scope", "atdd_scope", "patterns", "suite", "hermetic",
            "static", "flaky", "mutation", "agent"} <= set(modules)
    names = {}
    for mod_name, mod in modules.items():
        assert isinstance(getattr(mod, "NAME", None), str), f"gates/{mod_name}: no NAME"
        names.setdefault(mod.NAME, []).append(mod_name)
        entry = NOT_CONTEXT.get(mod.NAME, "run")
        assert callable(getattr(mod, entry, None)), f"gates/{mod_name}: no {entry}()"
        if mod.NAME == "agent":
            continue
        assert list(inspect.signature(mod.skip_reason).parameters) == ["ctx"], mod_name
        if mod.NAME not in NOT_CONTEXT:
            assert list(inspect.signature(mod.run).parameters) == ["ctx"], \
                f"gates/{mod_name}.run takes more than the GateContext"
    assert {n: m for n, m in names.items() if len(m) > 1} == {}, "a gate name used twice"
    assert names["atdd-scope"] == ["atdd_scope"]
    # the order users see, unchanged
    assert [g.NAME for g in gates.AFTER_IMPLEMENT] == [
        "scope", "patterns", "suite", "hermetic", "static", "flaky", "mutation"]


def _ctx(tmp_path: Path, **config: object) -> GateContext:
    packet = type("P", (), {"tier": None, "plant_files": {}, "id": "p"})()
    return GateContext(None, Config.model_validate(config), packet,  # type: ignore[arg-type]
                       tmp_path, tmp_path, "b" * 40, "b" * 40)


@pytest.mark.parametrize("gate, config, reason", [
    ("flaky", {}, "disabled: [gates.flaky] enabled = false"),
    ("mutation", {}, "disabled: [gates.mutation] enabled = false"),
    ("static", {}, "not run: no static commands configured"),
    ("patterns", {"gates": {"patterns": {"enabled": False}}},
     "disabled by [gates.patterns] enabled = false"),
    ("red", {}, "the packet plants no test files"),
])
def test_a_gate_that_does_not_apply_is_skipped_with_its_reason_and_never_run(
        tmp_path, monkeypatch, gate, config, reason):
    mod = {m.NAME: m for m in gate_modules().values()}[gate]

    def must_not_run(ctx):
        raise AssertionError(f"{gate}.run called although it does not apply")

    monkeypatch.setattr(mod, "run", must_not_run)
    result = gates.judge(mod, _ctx(tmp_path, **config))
    assert (result.gate, result.status, result.layer) == (gate, "skipped", None)
    assert result.summary.startswith(reason) and result.findings == [] and result.runs == []


def test_a_gate_that_applies_is_run(tmp_path, monkeypatch):
    """The honest side: switched on for the packet's tier, the gate's own run decides."""
    from andon.gates import flaky
    ran = GateResult(flaky.NAME, "pass", "ran")
    monkeypatch.setattr(flaky, "run", lambda ctx: ran)
    ctx = _ctx(tmp_path, gates={"flaky": {"enabled": True}})
    assert flaky.skip_reason(ctx) is None
    assert gates.judge(flaky, ctx) is ran


RESULT_MAKERS = {"GateResult", "forged_result", "_env_changed", "_WroteOutside"}


def literal_gate_names(path: Path, names: set[str], root: Path = SRC) -> list[str]:
    """``file:line name`` for each gate name written as a string literal where a gate result
    is made (first argument of GateResult, forged_result, _env_changed) or a stored result
    is picked by gate (``row["gate"] == "red"``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hits = []
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in RESULT_MAKERS and isinstance(node.args[0], ast.Constant):
                value = node.args[0].value
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Subscript) \
                and isinstance(node.left.slice, ast.Constant) and node.left.slice.value == "gate":
            value = next((c.value for c in node.comparators if isinstance(c, ast.Constant)), None)
        if value in names:
            hits.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {value}")
    return hits


def test_no_gate_name_is_written_out_where_a_result_is_made():
    names = {m.NAME for m in gate_modules().values()}
    files = [SRC / "attempt.py", *sorted((SRC / "gates").rglob("*.py"))]
    assert [h for f in files for h in literal_gate_names(f, names)] == []


def test_the_literal_check_sees_a_repeated_name(tmp_path):
    """The check itself, on a small file: a literal name in a result and in a comparison
    is found; the module constant and a finding kind that happens to match are not."""
    f = tmp_path / "gates" / "probe.py"
    f.parent.mkdir()
    f.write_text('NAME = "red"\nGateResult("red", "pass", "x")\n'
                 'r = [g for g in rows if g["gate"] == "scope"]\nFinding("flaky", "m")\n')
    assert literal_gate_names(f, {"red", "scope", "flaky"}, tmp_path) == [
        "gates/probe.py:2 red", "gates/probe.py:3 scope"]
