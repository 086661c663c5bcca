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


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    exc = call.excinfo
    if exc is None:
        outcome = "passed"
    elif isinstance(exc.value, _SKIPPED):
        outcome = "skipped"
    else:
        outcome = "failed"
    if outcome == "passed" and call.when != "call":
        # a passed set-up or teardown needs no line: the call's line says the test ran, and a
        # phase that did not pass always has one (fewer lines, less overhead per test)
        yield
        return
    code_file = ""
    fn = getattr(item, "obj", None)
    code = getattr(fn, "__code__", None)
    if code is not None:
        code_file = code.co_filename
    node_file = item.nodeid.split("::", 1)[0]
    _audit("andon.outcome", _junit_id(item.nodeid), call.when, outcome, node_file, code_file)
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
