"""What the verdict channel costs a run, and what it must not call tampering (issue 19): canary
failures are reported without source, pytest's own debugging plugin is not noise in the
evidence (the same attribute set by a test module still is), and pluggy's call loop in its
current home (pluggy 1.6+: ``pluggy._execution``, ``pluggy._caller``) is guarded like the old
one. Real pytest subprocesses through contain/boot.py."""

from __future__ import annotations

import sys
from pathlib import Path

from andon.runners.pytest import run_suite

from helpers import write_tree

PYTEST = [sys.executable, "-m", "pytest"]
MUL = "tests/test_mul.py"
FILES = {
    "src/calc/__init__.py": "def mul(a, b):\n    return a + b\n",  # wrong
    MUL: "from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\n"
         "def test_mul_one():\n    assert mul(2, 2) == 4\n",
}
PDB = "_pytest.debugging.pytestPDB"


def run(tmp_path: Path, extra: dict[str, str] | None = None, **kw):
    root = write_tree(tmp_path / "proj", {**FILES, **(extra or {})})
    kw.setdefault("canaries", [MUL])
    return run_suite(PYTEST, root, tmp_path / "ev", "suite", pythonpath=[root / "src"],
                     own_files=[MUL], **kw)


def test_canary_failures_are_reported_without_source_and_real_failures_in_full(tmp_path):
    r = run(tmp_path)
    assert r.forged == [] and r.integrity.channel == "used"
    failing = [t for t, o in r.integrity.canaries.items() if o == "failed"]
    assert len(failing) >= 2
    log = r.log_path.read_text()
    # the planted test's failure keeps pytest's long report: its source line and "E" line
    assert "assert mul(3, 4) == 12" in log and "E       assert" in log
    for tid in failing:
        name = tid.split("::")[1]
        section = log.split(f" {name} ")[1].split("\n_")[0].split("\n=")[0]
        # one line: "<Exception>: <value>", no source, no file:line
        assert section.strip().splitlines()[1:] and not any(
            ln.startswith(("E ", ">")) or ".py:" in ln for ln in section.splitlines()), section


def test_pytests_own_debugging_setup_is_not_an_event(tmp_path):
    r = run(tmp_path, profile="plain")
    assert not [e for e in r.integrity.events if "pytestPDB" in e], r.integrity.events
    r = run(tmp_path)
    assert not [e for e in r.integrity.events if "pytestPDB" in e], r.integrity.events


def test_a_test_module_setting_the_debugging_attributes_is_still_recorded(tmp_path):
    meddle = '''
    import types
    import _pytest.debugging as dbg


    def test_meddle(request):
        # look-alikes of what pytest sets: not the plugin manager, not a Config
        dbg.pytestPDB._pluginmanager = types.SimpleNamespace(hook=None)
        dbg.pytestPDB._config = types.SimpleNamespace(
            pluginmanager=request.config.pluginmanager)
    '''
    r = run(tmp_path, {"tests/test_aaa.py": meddle})
    events = r.integrity.events
    assert f"runner changed: {PDB}._pluginmanager replaced" in events, events
    assert f"runner changed: {PDB}._config replaced" in events, events


def test_patching_pluggys_call_loop_in_its_new_home_is_forged(tmp_path):
    patch = '''
    import importlib

    caller = importlib.import_module("plu" + "ggy._caller")
    _orig = caller.HookCaller.__call__


    def _call(self, **kw):
        return _orig(self, **kw)


    caller.HookCaller.__call__ = _call


    def test_a():
        pass
    '''
    r = run(tmp_path, {"tests/test_aaa.py": patch})
    if "pluggy._caller" not in sys.modules:  # an older pluggy: HookCaller lives in _hooks
        return
    assert any("pluggy._caller" in f and "HookCaller.__call__ replaced" in f
               for f in r.forged), r.forged


def test_reading_any_of_the_hooks_functions_defaults_is_forged(tmp_path):
    # the hook's key and state live in default arguments; a fast path that skips the events
    # it ignores must still see a read of any of its functions' defaults
    grab = '''
    import gc
    import types


    def test_grab():
        mine = [o for o in gc.get_objects() if isinstance(o, types.FunctionType)
                and o.__module__ == "_andon_hook" and o.__name__ != "install"]
        assert len(mine) >= 7
        for f in mine:
            f.__defaults__
        print("READ", len(mine))
    '''
    r = run(tmp_path, {"tests/test_aaa.py": grab})
    read = int(r.log_path.read_text().split("READ ", 1)[1].split()[0])
    said = [f for f in r.forged if "verdict hook's __defaults__ was read" in f]
    assert len(said) == read, (read, r.forged)
