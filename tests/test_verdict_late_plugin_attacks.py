"""Attacks found by an adversary pass: a test module registers a report-flipping plugin after
arming and tries to have the channel (contain/plugins.py) take it for the environment's — a
module written into the tree at run time, a fake module or class with code compiled under a
real file's name, a hook given and taken back before the check, a HookImpl made by hand, an
item's own runtest. Each test asserts the run was found forged or the flip did not happen
(no ``forged`` entry and the failing ``test_mul`` reported passed is an attack that got
through). Real pytest in a real venv, real subprocesses.

The flip: a ``pytest_runtest_makereport`` new-style wrapper, ``tryfirst`` and registered after
andon's (so it runs outside it), that sets ``call.excinfo = None`` for the call phase of ids
containing ``test_mul`` before andon's wrapper reads it: the channel and the JUnit report both
say passed, canaries keep their outcomes."""

from __future__ import annotations

import pytest
from test_verdict_env_plugins import (
    bench_python,  # noqa: F401 - the fixture
    run,
)

WRONG = {"src/calc/__init__.py": "def mul(a, b):\n    return a + b\n"}
MUL = "tests.test_calc::test_mul"


@pytest.fixture(scope="module")
def venv(bench_python):  # noqa: F811 - the imported fixture
    """The project venv with the installed plugin distribution ``benchlike``."""
    return bench_python

# the flip as module source (a module-level hook)
FLIP_MOD = '''
import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    if "test_mul" in item.nodeid and call.when == "call":
        call.excinfo = None
    return (yield)
'''
# the flip as a class body source (a method)
FLIP_CLS = '''
import pytest


class Flip:
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        if "test_mul" in item.nodeid and call.when == "call":
            call.excinfo = None
        return (yield)
'''


def attack(tmp_path, python, evil: str, plugins=()):
    r = run(tmp_path, python, {**WRONG, "tests/test_aaa.py": evil}, plugins=plugins)
    got = r.results[MUL].outcome if MUL in r.results else "missing"
    assert r.forged != [] or got != "passed", (
        f"GOT THROUGH: no forged entry, {MUL} outcome {got}; events={r.integrity.events}")
    return r, got


def test_baseline_wrong_mul_fails_and_is_not_forged(tmp_path, venv):
    r = run(tmp_path, venv, {**WRONG, "tests/test_aaa.py": "def test_a():\n    pass\n"})
    assert r.results[MUL].outcome == "failed" and r.forged == [], r.forged


def test_a1_real_file_written_into_the_project_tree_at_run_time(tmp_path, venv):
    # a non-test module of the project tree is accepted; the test writes one, imports it,
    # registers it, and removes the file: nothing of it is left for the scope gate
    evil = f'''
    import importlib.util, os, sys

    SRC = {FLIP_MOD!r}


    def test_register(request):
        path = os.path.join(os.getcwd(), "flip_helper.py")
        with open(path, "w") as fh:
            fh.write(SRC)
        spec = importlib.util.spec_from_file_location("flip_helper", path)
        m = importlib.util.module_from_spec(spec)
        sys.modules["flip_helper"] = m
        spec.loader.exec_module(m)
        os.remove(path)
        request.config.pluginmanager.register(m, "flip-helper")
    '''
    attack(tmp_path, venv, evil)


def test_a2_fake_module_claiming_a_project_file_no_file_on_disk(tmp_path, venv):
    evil = f'''
    import os, sys, types

    SRC = {FLIP_MOD!r}


    def test_register(request):
        f = os.path.join(os.getcwd(), "helpers.py")  # never exists
        m = types.ModuleType("helpers")
        m.__file__ = f
        sys.modules["helpers"] = m
        exec(compile(SRC, f, "exec"), m.__dict__)
        request.config.pluginmanager.register(m, "helpers")
    '''
    attack(tmp_path, venv, evil)


def test_a3_fake_pytest_submodule_with_code_compiled_at_its_place(tmp_path, venv):
    evil = f'''
    import os, sys, types
    import _pytest

    SRC = {FLIP_MOD!r}


    def test_register(request):
        f = os.path.join(os.path.dirname(_pytest.__file__), "flipx.py")  # never exists
        m = types.ModuleType("_pytest.flipx")
        m.__file__ = f
        sys.modules["_pytest.flipx"] = m
        exec(compile(SRC, f, "exec"), m.__dict__)
        request.config.pluginmanager.register(m, "flipx")
    '''
    attack(tmp_path, venv, evil)


def test_a4_fake_site_packages_module(tmp_path, venv):
    evil = f'''
    import os, sys, types
    import pytest

    SRC = {FLIP_MOD!r}


    def test_register(request):
        site = os.path.dirname(os.path.dirname(pytest.__file__))
        f = os.path.join(site, "flipsite.py")  # never exists
        m = types.ModuleType("flipsite")
        m.__file__ = f
        sys.modules["flipsite"] = m
        exec(compile(SRC, f, "exec"), m.__dict__)
        request.config.pluginmanager.register(m, "flipsite")
    '''
    attack(tmp_path, venv, evil)


def test_a5_class_put_into_a_non_critical_pytest_module_code_replace(tmp_path, venv):
    # _pytest.legacypath is not CRITICAL: a name added there is "changed" (an event only)
    evil = '''
    import types
    import pytest
    import _pytest.legacypath as home


    def _flip(self, item, call):
        if "test_mul" in item.nodeid and call.when == "call":
            call.excinfo = None
        return (yield)


    def test_register(request):
        code = _flip.__code__.replace(co_filename=home.__file__)
        fn = types.FunctionType(code, globals(), "pytest_runtest_makereport")
        fn = pytest.hookimpl(wrapper=True, tryfirst=True)(fn)
        Flip = type("Flip", (), {"pytest_runtest_makereport": fn,
                                 "__module__": "_pytest.legacypath"})
        home.Flip = Flip
        request.config.pluginmanager.register(Flip(), "legacy-flip")
    '''
    attack(tmp_path, venv, evil)


def test_a6_class_bound_in_the_projects_own_module_compiled_as_its_file(tmp_path,
                                                                          venv):
    # calc (src/calc/__init__.py) is a non-test module of the project tree and no prefix of
    # the snapshot: binding a class in it is seen by nothing
    evil = f'''
    import calc

    SRC = {FLIP_CLS!r}


    def test_register(request):
        ns = {{"__name__": "calc"}}
        exec(compile(SRC, calc.__file__, "exec"), ns)
        calc.Flip = ns["Flip"]
        request.config.pluginmanager.register(calc.Flip(), "calc-flip")
    '''
    attack(tmp_path, venv, evil)


def test_a7_class_bound_in_an_installed_module_code_named_as_any_site_file(tmp_path,
                                                                           venv):
    # for an installed module's class, a hook's code may come from any site-packages file
    evil = f'''
    import os
    import pytest
    from benchlike import session

    SRC = {FLIP_CLS!r}


    def test_register(request):
        site = os.path.dirname(os.path.dirname(pytest.__file__))
        ns = {{"__name__": "benchlike.session"}}
        exec(compile(SRC, os.path.join(site, "anything.py"), "exec"), ns)
        session.Flip = ns["Flip"]
        request.config.pluginmanager.register(session.Flip(), "bench-flip")
    '''
    attack(tmp_path, venv, evil)


def test_a8_own_attribute_removed_before_the_check(tmp_path, venv):
    # pluggy took the bound function at register(); late_ok looks at the object only later
    evil = '''
    import pytest
    from _pytest.monkeypatch import MonkeyPatch


    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def _flip(item, call):
        if "test_mul" in item.nodeid and call.when == "call":
            call.excinfo = None
        return (yield)


    def test_register(request):
        obj = MonkeyPatch()
        obj.pytest_runtest_makereport = _flip
        request.config.pluginmanager.register(obj, "toctou")
        del obj.pytest_runtest_makereport
    '''
    attack(tmp_path, venv, evil)


def test_a8b_module_attribute_removed_before_the_check(tmp_path, venv):
    evil = '''
    import pytest
    import calc


    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def _flip(item, call):
        if "test_mul" in item.nodeid and call.when == "call":
            call.excinfo = None
        return (yield)


    def test_register(request):
        calc.pytest_runtest_makereport = _flip
        request.config.pluginmanager.register(calc, "toctou-mod")
        del calc.pytest_runtest_makereport
    '''
    attack(tmp_path, venv, evil)


def test_a9_hookimpl_injected_with_a_legit_plugin_as_its_owner(tmp_path, venv):
    # no register(): a HookImpl whose plugin is pytest's own runner module, whose function
    # is the test module's; late_ok looks at the plugin, never at the function
    evil = '''
    import pytest
    import _pytest.runner
    from pluggy import HookImpl


    def _flip(item, call):
        if "test_mul" in item.nodeid and call.when == "call":
            call.excinfo = None
        return (yield)


    def test_register(request):
        opts = {"wrapper": True, "hookwrapper": False, "tryfirst": True, "trylast": False,
                "optionalhook": False, "specname": None}
        hc = request.config.pluginmanager.hook.pytest_runtest_makereport
        hc._add_hookimpl(HookImpl(_pytest.runner, "runner", _flip, opts))
    '''
    attack(tmp_path, venv, evil)


def test_a10_class_swapped_in_after_register(tmp_path, venv):
    # an object of the test module's class with a hook, its __class__ set to pytest's
    # MonkeyPatch (same layout) right after register()
    evil = '''
    import pytest
    from _pytest.monkeypatch import MonkeyPatch


    class Evil:
        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            if "test_mul" in item.nodeid and call.when == "call":
                call.excinfo = None
            return (yield)


    def test_register(request):
        obj = Evil()
        request.config.pluginmanager.register(obj, "evil")
        obj.__class__ = MonkeyPatch
    '''
    attack(tmp_path, venv, evil)


def test_a11_specname_on_a_name_without_the_prefix(tmp_path, venv):
    # _hooks_from looks only at pytest_* names; pytest itself ignores any other name
    evil = '''
    import pytest
    import calc


    class Flip:
        @pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_runtest_makereport")
        def flip(self, item, call):
            if "test_mul" in item.nodeid and call.when == "call":
                call.excinfo = None
            return (yield)


    Flip.__module__ = "calc"
    calc.Flip = Flip


    def test_register(request):
        request.config.pluginmanager.register(Flip(), "specname")
    '''
    attack(tmp_path, venv, evil)


def test_a12_staticmethod_of_a_function_compiled_as_the_modules_file(tmp_path, venv):
    # staticmethod is unwrapped by _hooks_from; its __func__ compiled as calc's file passes
    evil = f'''
    import calc, types

    SRC = {FLIP_MOD!r}


    def test_register(request):
        ns = {{}}
        exec(compile(SRC, calc.__file__, "exec"), ns)
        Flip = type("Flip", (), {{"pytest_runtest_makereport":
                                  staticmethod(ns["pytest_runtest_makereport"]),
                                  "__module__": "calc"}})
        calc.Flip = Flip
        request.config.pluginmanager.register(Flip, "static")
    '''
    attack(tmp_path, venv, evil)


def test_a13_no_plugin_an_instance_runtest_on_the_item(tmp_path, venv):
    # not a plugin at all: the item's own ``runtest`` (runner calls item.runtest()); the
    # channel reads item.obj, which is still the module's function
    evil = '''
    def test_register(request):
        for it in request.session.items:
            if "test_mul" in it.nodeid:
                it.runtest = lambda: None
    '''
    attack(tmp_path, venv, evil)


def test_a14_functools_partial_hook(tmp_path, venv):
    evil = '''
    import functools, pytest, calc


    def _flip(self, item, call):
        if "test_mul" in item.nodeid and call.when == "call":
            call.excinfo = None
        return (yield)


    fn = functools.partial(_flip, None)
    fn.pytest_impl = {"wrapper": True, "tryfirst": True}
    Flip = type("Flip", (), {"pytest_runtest_makereport": fn, "__module__": "calc"})
    calc.Flip = Flip


    def test_register(request):
        request.config.pluginmanager.register(Flip(), "partial")
    '''
    attack(tmp_path, venv, evil)


def test_control_the_same_flip_undisguised_is_forged(tmp_path, venv):
    # the control: the flip registered plainly from the test module is found (and still
    # flips), so the attacks above reach the same check
    evil = '''
    import pytest


    class Evil:
        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            if "test_mul" in item.nodeid and call.when == "call":
                call.excinfo = None
            return (yield)


    def test_register(request):
        request.config.pluginmanager.register(Evil(), "evil")
    '''
    r, got = attack(tmp_path, venv, evil)
    assert got == "passed" and any("plugin registered: evil" in f for f in r.forged), r.forged
