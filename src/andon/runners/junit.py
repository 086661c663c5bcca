"""Read the JUnit XML report pytest writes into one outcome per test id.

Outcomes come only from the JUnit XML report pytest writes (``--junitxml``), never from the exit
status or the summary line: an exit status of 0 says nothing when the code under test can call
``os._exit(0)``. The report is written with ``junit_family=xunit1`` so every ``<testcase>`` carries
``file`` and ``line`` attributes (xunit2, pytest's default, drops them). Sources:
https://docs.pytest.org/en/stable/how-to/output.html#creating-junitxml-format-files and
https://docs.pytest.org/en/stable/reference/reference.html#confval-junit_family

What pytest 9 writes for a module that fails to import (collection error)::

    <testcase classname="" name="tests.test_loader" file="tests/test_loader.py" time="0.000">
      <error message="collection failure">…traceback…</error></testcase>

It becomes the result ``"::tests.test_loader"`` with outcome "error". A test that fails and then
errors in teardown is written as two testcases with the same id; they merge into the worse outcome.

``parse_junit`` raises ``JUnitError`` (a ``ValueError``); runners/pytest.py runs the suite and
records such a problem in ``SuiteRun.report_problem`` instead.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from .. import plain_file
from ..errors import AndonError

Outcome = Literal["passed", "failed", "error", "skipped"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "error", "skipped")

MESSAGE_CHARS = 500
# a report larger than this is not read: about a million test cases, far past any real suite
MAX_REPORT_BYTES = 256 << 20

# When one id appears twice (failed in call, then errored in teardown), the worse outcome wins, so
# a duplicate can never turn a failure into a pass. The call's failure outranks a teardown error.
_SEVERITY = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}
_CHILD_OUTCOME: dict[str, Outcome] = {"failure": "failed", "error": "error", "skipped": "skipped"}


class JUnitError(AndonError, ValueError):
    """The JUnit report is missing, empty, malformed or truncated."""


@dataclass(frozen=True)
class TestResult:
    """One ``<testcase>``: id ``"<classname>::<name>"``, repo-relative POSIX ``file`` (or None)."""

    __test__ = False  # not a pytest test class, despite the name

    id: str
    file: str | None
    outcome: Outcome
    message: str  # failure/error/skip message, first 500 chars; "" when passed

    @property
    def brief(self) -> str:
        """The message on one line for a summary or a finding: its lines stripped and joined
        with " | " (a multi-line assertion would break the board and one-line summaries),
        cut to 200 characters with "…"."""
        one = " | ".join(ln.strip() for ln in self.message.splitlines() if ln.strip())
        return one if len(one) <= 200 else one[:199] + "…"


# pytest's doctest report: the docstring's lines numbered "NNN ", then "Expected:/Got:" or
# "UNEXPECTED EXCEPTION: <repr>" (and its traceback), then "<path>:<line>: DocTestFailure"
_NUMBERED = re.compile(r"^\d{3,} ")
_DOCTEST_END = re.compile(r"^(\S.*:\d+): (DocTestFailure|UnexpectedException)$")


def _doctest_message(text: str) -> str:
    """A doctest failure led by what the agent needs: the failing example, what was expected
    and what it got (or the exception), and where; "" when ``text`` is not a doctest report.
    The docstring's prose came first and filled the message and its brief."""
    lines = text.splitlines()
    end = next((i for i in range(len(lines) - 1, -1, -1) if _DOCTEST_END.match(lines[i])), None)
    if end is None:
        return ""
    examples = [ln[4:].strip() for ln in lines[:end] if _NUMBERED.match(ln) and ">>>" in ln]
    start = next((i for i, ln in enumerate(lines[:end]) if not _NUMBERED.match(ln)), end)
    body = [ln.rstrip() for ln in lines[start:end] if ln.strip()]
    if lines[end].endswith("UnexpectedException"):
        body = body[:1]  # the exception's repr; its traceback runs through doctest's own code
    where = _DOCTEST_END.match(lines[end])[1]  # type: ignore[index]
    return "\n".join([*examples[-1:], *body, where])


def _message(child: ET.Element) -> str:
    msg = _doctest_message(child.text or "") or child.get("message") or ""
    # A collection error's message is only "collection failure"; the exception is in the text,
    # on the lines pytest starts with "E ".
    if not msg or msg == "collection failure":
        e_lines = [ln for ln in (child.text or "").splitlines() if ln.startswith("E ")]
        msg = "\n".join([msg, *e_lines]).strip() if e_lines else (msg or (child.text or "").strip())
    return msg[:MESSAGE_CHARS]


def _testcase(tc: ET.Element) -> TestResult:
    classname, name = tc.get("classname") or "", tc.get("name") or ""
    file = tc.get("file")
    if not file and not classname and name:
        # A collection error: name is the module's dotted path (xunit2 writes no file attribute).
        file = name.replace(".", "/") + ".py"
    outcome: Outcome = "passed"
    message = ""
    for child in tc:
        found = _CHILD_OUTCOME.get(child.tag)
        if found and _SEVERITY[found] > _SEVERITY[outcome]:
            outcome, message = found, _message(child)
    return TestResult(f"{classname}::{name}", file, outcome, message)


def parse_junit(path: Path) -> dict[str, TestResult]:
    """Read a pytest JUnit XML report (root ``<testsuites>`` or ``<testsuite>``) into results by id.

    Raises JUnitError when the file is missing, empty, malformed or truncated, or is not JUnit.
    """
    path = Path(path)
    try:
        data = plain_file.read(path, MAX_REPORT_BYTES)
    except plain_file.NotPlain as exc:
        raise JUnitError(f"the JUnit report at {path} is {exc.what}") from exc
    except OSError as exc:
        raise JUnitError(f"no JUnit report at {path}: {exc.strerror}") from exc
    if not data.strip():
        raise JUnitError(f"JUnit report is empty: {path}")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise JUnitError(f"JUnit report truncated or malformed: {exc}") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitError("not a JUnit report: root must be testsuites or testsuite, "
                         f"got {root.tag}")
    results: dict[str, TestResult] = {}
    for tc in root.iter("testcase"):
        new = _testcase(tc)
        old = results.get(new.id)
        if old is None or _SEVERITY[new.outcome] > _SEVERITY[old.outcome]:
            results[new.id] = new
    return results


def keep_report(made: Path, kept: Path) -> str | None:
    """Copy the JUnit report a test run wrote at ``made`` to ``kept`` (the evidence); None
    when done or when there is none (the caller says why not), else the problem: what was
    at ``made`` is not the regular file pytest writes — the code under test, which knows
    the path from its ``--junitxml=`` argument, put a link (to ``/dev/zero``, which would
    be copied without end), a FIFO or a folder there — or it is over MAX_REPORT_BYTES."""
    try:
        plain_file.write(kept, plain_file.read(made, MAX_REPORT_BYTES))
    except FileNotFoundError:
        return None
    except plain_file.NotPlain as exc:
        return (f"the JUnit report's place held {exc.what}, not the report pytest writes "
                "(the code under test can reach it): not read")
    return None


def module_files(results: dict[str, TestResult], root: Path) -> dict[str, TestResult]:
    """``results`` with each ``file`` the test module the test was collected from. pytest's
    ``file`` attribute is where the test function's code is, and for a method a planted class
    inherits from a helper class, a ``test_x = check(...)`` factory's function or a decorator's
    wrapper that is a helper's file; the id's classname (pytest's node id, dotted) names the
    module. Where the two disagree, the longest dotted prefix of the classname that is a
    ``.py`` file under ``root`` wins; none found: the attribute is kept."""
    out = {}
    for tid, r in results.items():
        classname = tid.split("::", 1)[0]
        dotted = r.file[:-3].replace("/", ".") if r.file and r.file.endswith(".py") else None
        if dotted and classname and classname != dotted \
                and not classname.startswith(dotted + "."):
            parts = classname.split(".")
            for k in range(len(parts), 0, -1):
                candidate = "/".join(parts[:k]) + ".py"
                if (root / candidate).is_file():
                    r = replace(r, file=candidate)
                    break
        out[tid] = r
    return out

