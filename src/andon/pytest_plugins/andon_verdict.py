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
             _canary=_CANARY, _cheap=_cheap_failure):
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
    # the files of the function pytest calls and of each function it wraps (``__wrapped__``,
    # set by functools.wraps: a decorator's wrapper, e.g. mock.patch's), outermost first
    files, obj = [], getattr(item, "obj", None)
    for _ in range(8):
        code = getattr(obj, "__code__", None)
        if code is None:
            break
        files.append(code.co_filename)
        obj = getattr(obj, "__wrapped__", None)
    _audit("andon.outcome", _junit_id(item.nodeid), call.when, outcome, node_file,
           "\x1f".join(files))


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
