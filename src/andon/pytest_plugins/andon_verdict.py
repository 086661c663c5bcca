"""pytest plugin of the verdict channel: tells the audit hook what the harness needs to know.

Loaded only by andon's start-up (contain/boot.py passes it to ``pytest.main(plugins=[...])``),
before pytest reads its arguments. It raises audit events the hook installed by boot.py answers
(see contain/hook.py): ``andon.arm`` before the first conftest is imported, ``andon.outcome``
for each test phase from ``call.excinfo`` (before any report object exists), ``andon.check``
after collection (full) and after each test (the report's path), ``andon.end`` when pytest is
done. Everything it uses from pytest is bound at
import, before the project's code runs.
"""

from __future__ import annotations

import os
import sys
import types

import pytest
from _pytest.junitxml import mangle_test_address
from _pytest.outcomes import Skipped, XFailed

_audit = sys.audit
_SKIPPED = (Skipped, XFailed)
# the repo-relative path of this run's canary module, set by boot.py before this file runs
# (it came through the nonce pipe, not the command line); "" when the run has none
_CANARY = globals().get("_CANARY", "")


def _cheap_failure(excinfo):
    text = excinfo.exconly()

    def repr_failure(excinfo, style=None):
        return text
    return repr_failure


# Raw descriptors: no property or __class__ of the code under test's objects can answer them.
_FUNCTION, _METHOD, _MODULE = types.FunctionType, types.MethodType, types.ModuleType
_code_of = types.FunctionType.__dict__["__code__"].__get__
_globals_of = types.FunctionType.__dict__["__globals__"].__get__
_func_of = types.MethodType.__dict__["__func__"].__get__
_module_dict = types.ModuleType.__dict__["__dict__"].__get__
_type_dict = type.__dict__["__dict__"].__get__
_WRAPPERS = (staticmethod, classmethod)
# one dict for the run, bound as a default argument (never a name in this module): per test
# module's path, its namespace and its classes' MRO dicts as they were right after its import
_BOUND: dict = {}


def _snapshot(path, module, _bound=_BOUND, _module_dict=_module_dict, _type_dict=_type_dict,
              _type=type, _isinstance=isinstance, _dict=dict):
    names = _dict(_module_dict(module))
    classes = {}
    for name, obj in names.items():
        if _isinstance(obj, _type):
            try:
                classes[name] = (obj, [_dict(_type_dict(b)) for b in obj.__mro__])
            except Exception:  # noqa: BLE001 - an odd class: its tests compare as "early"
                pass
    _bound[str(path)] = (names, classes)


def _imported_already(path, _modules=sys.modules, _module_dict=_module_dict, _type=type,
                      _module=_MODULE, _list=list):
    # a module pytest imports by name and finds in sys.modules must have this __file__
    # (else pytest refuses it: ImportPathMismatchError), so the scan cannot be dodged
    for m in _list(_modules.values()):
        if _type(m) is _module and _module_dict(m).get("__file__") == path:
            return True
    return False


def _bound_at_import(item, _bound=_BOUND, _type=type, _method=_METHOD, _func_of=_func_of,
                     _wrappers=_WRAPPERS, _class=pytest.Class, _module=pytest.Module,
                     _isinstance=isinstance, _next=next, _function_item=pytest.Function,
                     _oga=object.__getattribute__, _steps=("runtest", "setup", "teardown")):
    """``"same"``: the object pytest calls is the one the test module bound at its import (its
    own function, a decorator's wrapper, a method its class inherits); ``"replaced"``: it is
    not; ``"early"``: no snapshot to compare with (the module was imported before pytest
    collected it, or the test is in a class nested in a class); ``"other"``: not a test
    function (a doctest); ``"item"``: the item itself holds a ``runtest``, ``setup`` or
    ``teardown`` of its own (``item.runtest = lambda: None`` from another test: pytest calls
    that, not the test)."""
    try:
        own = _oga(item, "__dict__")
    except AttributeError:
        own = {}
    for step in _steps:
        if step in own:
            return "item"
    if not _isinstance(item, _function_item):
        return "other"
    snap = _bound.get(str(getattr(item, "path", "")))
    if snap is None:
        return "early"
    names, classes = snap
    name = getattr(item, "originalname", None) or item.name
    parent = item.parent
    if _isinstance(parent, _class):
        if _type(parent.parent) is not _module:
            return "early"
        cls = classes.get(parent.name)
        if cls is None or parent.obj is not cls[0]:
            return "replaced"
        want = _next((d[name] for d in cls[1] if name in d), None)
    else:
        want = names.get(name)
    if _type(want) in _wrappers:
        want = want.__func__
    got = item.obj
    if _type(got) is _method:
        got = _func_of(got)
    return "same" if got is want else "replaced"


def _code_files(item, status, _type=type, _method=_METHOD, _function=_FUNCTION,
                _func_of=_func_of, _code_of=_code_of, _globals_of=_globals_of,
                _module_dict=_module_dict):
    """(status, files): the files of the function pytest calls and of each function it wraps
    (``__wrapped__``, set by functools.wraps), outermost first, read from real functions only;
    a function whose code is the test module's own but whose globals are not that module's
    (a copy made with the planted code object) makes the status "replaced"."""
    files, obj = [], getattr(item, "obj", None)
    own = str(getattr(item, "path", ""))
    try:
        home = _module_dict(item.module) if status != "other" else None
    except Exception:  # noqa: BLE001 - no module: nothing to compare the globals with
        home = None
    for _ in range(8):
        if _type(obj) is _method:
            obj = _func_of(obj)
        if _type(obj) is not _function:
            break
        code_file = _code_of(obj).co_filename
        if code_file == own and home is not None and _globals_of(obj) is not home:
            status = "replaced"
        files.append(code_file)
        obj = getattr(obj, "__wrapped__", None)
    return status, files


def _junit_id(nodeid: str) -> str:
    names = mangle_test_address(nodeid)
    return ".".join(names[:-1]) + "::" + names[-1]


def pytest_load_initial_conftests(early_config, parser, args) -> None:
    # After pytest's own tryfirst implementations (legacypath adds its properties there) and
    # before Config's trylast one, which imports the first conftest.
    os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # older pytest: read already
    _audit("andon.arm", early_config.pluginmanager)
    if early_config.pluginmanager.hasplugin("xdist") and any(
            a == "--numprocesses" or a.startswith(("-n", "--numprocesses=")) for a in args):
        _audit("andon.note", "xdist")  # tests run in workers: no outcome lines from them


def _outcome(item, call, _junit_id=_junit_id, _audit=_audit, _skipped=_SKIPPED,
             _canary=_CANARY, _cheap=_cheap_failure, _bound_at_import=_bound_at_import,
             _code_files=_code_files):
    """Raise the phase's ``andon.outcome`` (nothing for a passed set-up or teardown: the call's
    line says the test ran, and a phase that did not pass always has one)."""
    exc = call.excinfo
    if exc is None:
        if call.when != "call":
            return
        outcome = "passed"
    elif isinstance(exc.value, _skipped):
        outcome = "skipped"
    else:
        outcome = "failed"
    node_file = item.nodeid.split("::", 1)[0]
    if outcome == "failed" and _canary and node_file == _canary:
        # a canary that must fail: its report needs no source (pytest's long traceback reads
        # and parses the module and scans sys.modules on the first failure of a run)
        item.repr_failure = _cheap(exc)
    # whether pytest calls what the module bound at import, the test's own file, and the files
    # its code came from (see _code_files)
    status, files = _code_files(item, _bound_at_import(item))
    _audit("andon.outcome", _junit_id(item.nodeid), call.when, outcome, node_file,
           status + "\x1e" + str(getattr(item, "path", "")) + "\x1e" + "\x1f".join(files))


try:  # a new-style wrapper (pluggy >= 1.1): no Result object and one generator per call
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        _outcome(item, call)
        return (yield)
except (TypeError, ValueError):  # older pluggy: the old-style wrapper, same place in the order
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        _outcome(item, call)
        yield


def _import_first(collector, _snapshot=_snapshot, _module=pytest.Module,
                  _imported_already=_imported_already):
    # A test module is imported here, before pytest reads a name in it (fixture markers and
    # ``__test__`` are looked up on every object of the module, and can run code): its
    # namespace is kept as it was then. An import that fails fails again, unchanged, when
    # pytest collects the module (the same exception, not a second import).
    if type(collector) is not _module:  # not a subclass: DoctestModule imports any file
        return
    if _imported_already(str(collector.path)):
        return  # imported by other code first: its tests compare as "early"
    try:
        module = collector.obj
    except BaseException as exc:  # noqa: BLE001 - pytest reports it, from collect()
        def again(exc=exc):
            raise exc
        collector._getobj = again
        return
    _snapshot(collector.path, module)


try:
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_make_collect_report(collector):
        _import_first(collector)
        return (yield)
except (TypeError, ValueError):
    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_make_collect_report(collector):
        _import_first(collector)
        yield


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session) -> None:
    # every test module is imported now: the moment a module-level patch shows
    _audit("andon.check", True)


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location) -> None:
    _audit("andon.check", False)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    _audit("andon.end")
