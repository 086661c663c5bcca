"""Run a project's pytest suite as a subprocess the harness controls; read outcomes per test id.

Outcomes come only from the JUnit XML report pytest writes (``--junitxml``, read by
runners/junit.py), never from the exit status or the summary line: an exit status of 0 says
nothing when the code under test can call ``os._exit(0)``.

Times are wall seconds. ``run_suite`` never raises for anything the suite does and records it in
``SuiteRun.report_problem`` instead.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from .. import plain_file, reaper, tempdir
from ..contain import canary as canary_mod
from ..contain import forkpool, netless
from ..contain.channel import Channel, Record
from ..contain.channel import plan as plan_start
from ..contain.procgroup import before_child, end_child, wait_unreaped
from ..contain.verdict import Integrity, decorated
from ..contain.verdict import judge as judge_integrity
from ..errors import InvalidArgument

# the JUnit side, also importable from here: callers import the whole runner from this module
from .junit import JUnitError, TestResult, keep_report, module_files, parse_junit
from .suite_run import SuiteRun

PLUGIN_DIR = Path(__file__).parent.parent / "pytest_plugins"
TAIL_LINES = 60
_TAIL_BYTES = 64 * 1024

# Never passed to a test process (the outer environment is not inherited at all, and extra may not
# set them): each one can change which tests run, which plugins load or which Python runs them.
FORBIDDEN_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSTARTUP", "PYTHONHOME", "VIRTUAL_ENV",
                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD")


_PATH = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"

# Passed to every test process as the person's own environment has them (andon's, never the
# agent's): a fixed value, or a variable missing only under the harness, lets code tell a
# harness run from the person's own run (issue 19, kind 4: ``LC_ALL == "C.UTF-8"``, ``"USER"
# not in os.environ``). None of them changes which tests run or which Python runs them; with no
# locale set, Python coerces the C locale to UTF-8 itself (PEP 538), as in the person's run.
PASSED_ENV = ("USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
              # what a shell and a desktop session add, as the person has them: names of
              # places and of the session, no handle on it (a test could compute them anyway)
              "SHLVL", "OLDPWD", "COLORTERM", "DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR",
              "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_CURRENT_DESKTOP", "XDG_DATA_DIRS",
              "XDG_CONFIG_DIRS")
# The person's own state folders, when they name them: set under the fresh HOME instead (the
# same place relative to it, else the XDG default), so that the variable is there as in the
# person's run but no state of theirs (or one the agent left) is read. The ssh agent, the
# session bus and a tmux server's socket (SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS, TMUX) are
# never passed: each is a handle on the person's session; reading them is a patterns finding.
STATE_HOMES = {"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share",
               "XDG_CACHE_HOME": ".cache", "XDG_STATE_HOME": ".local/state"}

# The plain profile undoes what pytest itself changes in the process, so that code that tells a
# pytest run from real use sees real use (issue 19): no faulthandler, ``sys.stdout`` the real
# TextIOWrapper (``--capture=no``; sys capture would leave a ``CaptureIO``), test modules
# loaded by the ordinary loader (``--assert=plain``), and ``sys.unraisablehook`` /
# ``threading.excepthook`` left alone. Fixtures (capsys, caplog, tmp_path), warnings filters and
# ``pytest.raises`` keep working, so an honest test has the same outcome in both profiles.
PLAIN_PROFILE = ("-p", "no:faulthandler", "--capture=no", "--assert=plain",
                 "-p", "no:unraisableexception", "-p", "no:threadexception")
PROFILES = ("normal", "plain")


def collectable(path: str) -> bool:
    """A file pytest collects by its default naming rule (``test_*.py`` / ``*_test.py``)."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def harness_env(
    home: Path, pythonpath: Sequence[Path] = (), extra: Mapping[str, str] | None = None,
    *, flags_in_env: bool = True, cwd: Path | None = None,
) -> dict[str, str]:
    """The whole environment of a harness-run test process, built from an allowlist.

    Nothing is inherited from ``os.environ``. ``PATH`` is fixed (this Python's bin dir first, so
    a ``./bin/pytest`` or ``python`` wrapper in the tree is never found); ``HOME`` is ``home`` and
    ``TMPDIR`` is ``home/tmp`` (created here), so no cache survives from run to run; ``PYTHONPATH``
    holds ``pythonpath`` made absolute, in order. ``flags_in_env`` adds the variables a process
    not started through contain/boot.py needs (no bytecode, no plugin autoload);
    a boot.py run gets none of them, so it looks like an ordinary run. ``PASSED_ENV`` (user,
    shell, terminal, locale) come from andon's own environment when set there, so that
    nothing about them differs from the person's run. ``extra`` is applied
    last; a key of FORBIDDEN_ENV in it raises InvalidArgument (a ValueError). ``cwd``, the
    run's working directory, is ``PWD`` as a shell exports it; STATE_HOMES the person sets are
    moved under ``home``. No
    ``PYTHONHASHSEED``: the hash seed
    is random, as in production (a fixed seed only the harness sets is a tell, issue 19).
    """
    if bad := sorted(set(extra or {}) & set(FORBIDDEN_ENV)):
        raise InvalidArgument(f"extra must not set {', '.join(FORBIDDEN_ENV)}; "
                              f"got {', '.join(bad)}")
    home = Path(home).absolute()
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": _PATH,
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        **{k: os.environ[k] for k in PASSED_ENV if k in os.environ},
    }
    if cwd is not None:
        env["PWD"] = str(Path(cwd).absolute())
    real_home = os.environ.get("HOME", "")
    for k, default in STATE_HOMES.items():
        if v := os.environ.get(k):
            rel = os.path.relpath(v, real_home) if real_home and v.startswith(real_home + "/") \
                else default
            env[k] = str(home / rel)
    if flags_in_env:
        env.update({
            "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ written into the worktree
            # No plugin loads through a setuptools entry point (``pytest11``): an agent could
            # add one to the package metadata. The plugins a project needs are named with -p.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        })
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in pythonpath)
    env.update(extra or {})
    return env


def resolved_command(command: Sequence[str]) -> list[str]:
    """``command`` with a bare tool name resolved on the fixed PATH (never the tree's
    ./bin): it is run, and recorded, by its absolute path."""
    command = list(command)
    if command and "/" not in command[0]:
        command[0] = shutil.which(command[0], path=_PATH) or command[0]
    return command


def harness_args(junit: Path, plugins: Sequence[str], profile: str,
                 random_seed: int | None) -> list[str]:
    """The flags the harness adds to every pytest run (before the selection)."""
    args = [
        f"--junitxml={junit}",
        "-o", "junit_family=xunit1",  # testcases carry file and line
        "-o", "addopts=",  # the repository's addopts must not narrow what runs
        "-p", "no:cacheprovider",  # write nothing into the tree
        # one module that fails to import must not hide the results of all the others
        "--continue-on-collection-errors",
        "-q", "-rA",
    ]  # fmt: skip
    for plugin in plugins:
        args += ["-p", plugin]
    if profile == "plain":
        args += PLAIN_PROFILE
    if random_seed is not None:
        # -p no:randomly: an installed pytest-randomly would reorder by its own seed.
        args += ["-p", "andon_shuffle", f"--andon-shuffle-seed={random_seed}", "-p", "no:randomly"]
    return args


def _tail(path: Path) -> str:
    try:
        text = plain_file.tail(path, _TAIL_BYTES)
    except OSError as exc:  # a tool's log, which the tool could replace (gates/tools.py)
        return f"[{exc}]"
    return "\n".join(text.splitlines()[-TAIL_LINES:])


def run_suite(
    command: Sequence[str],
    cwd: Path,
    evidence_dir: Path,
    name: str,
    *,
    select: Sequence[str] = (),
    random_seed: int | None = None,
    pythonpath: Sequence[Path] = (),
    timeout_s: float = 600,
    extra_env: Mapping[str, str] | None = None,
    plugins: Sequence[str] = (),
    network: Literal["on", "off"] = "on",
    canaries: Sequence[str] | None = None,
    own_files: Sequence[str] = (),
    profile: Literal["normal", "plain"] = "normal",
    fork_server: bool = True,
    slot: int = 0,
    readonly: Sequence[Path] = (),
) -> SuiteRun:
    """Run ``command`` (pytest argv) in ``cwd`` with harness-decided flags; read its JUnit report.

    Writes ``<evidence_dir>/<name>.log`` (stdout+stderr) and ``<name>.junit.xml``; evidence_dir
    must lie outside ``cwd``. ``select`` names test files or node ids. ``random_seed`` shuffles
    the order with the andon_shuffle plugin. Plugin autoloading is off; ``plugins`` are
    loaded by name with ``-p`` (e.g. ``["xdist.plugin", "pytest_asyncio"]``). After
    ``timeout_s`` seconds the whole process group is killed. Any process the suite leaves
    behind in its group is killed too. ``network="off"`` runs it through ``netless.wrap`` (its
    own network namespace, loopback only) when ``netless.available()``; otherwise it runs with
    the network and ``SuiteRun.network`` says ``"not cut: <reason>"``.

    The process starts through contain/boot.py (the verdict channel, see docs/gates.md "What
    the verdict is read from") whenever the command maps to an interpreter. ``canaries``: the
    planted test files of a run of agent code; canary tests are written beside the first one
    for this run only and taken out of ``results``. ``own_files``: test files whose test
    functions must be defined in them. ``SuiteRun.integrity`` holds what was found.
    ``profile="plain"`` adds PLAIN_PROFILE (the process then looks like ordinary Python use; see
    gates/suite.py for the differential run). ``fork_server``: a run through boot.py is forked
    from a fork server of its interpreter when one can be had (contain/forkserver.py; else it
    starts fresh and ``SuiteRun.start`` says why); ``slot``: the run's place in a set of
    repeated runs (0 for a run made once), so that repeated runs come from different servers
    and never share a hash seed. ``readonly``: folders the run may not write (the user's
    checkout, the worktree root…; ``cwd`` and the run's HOME and TMPDIR stay writable): the
    run is contained (contain/netless.py ``enter``) when ``netless.contain_available()``,
    and ``SuiteRun.contained`` says how or why not. Raises InvalidArgument for a bad ``name``,
    ``evidence_dir``, ``network`` or ``profile``; everything the suite does is recorded, not
    raised.
    """
    if network not in ("on", "off"):
        raise InvalidArgument(f'network must be "on" or "off", got {network!r}')
    if profile not in PROFILES:
        raise InvalidArgument(f'profile must be "normal" or "plain", got {profile!r}')
    if not name or "/" in name or name.startswith("."):
        raise InvalidArgument(f"name must be a plain file name stem, got {name!r}")
    cwd = Path(cwd).absolute()
    evidence_dir = Path(evidence_dir).absolute()
    if evidence_dir.resolve().is_relative_to(cwd.resolve()):
        raise InvalidArgument(f"evidence_dir must be outside cwd {cwd}, got {evidence_dir}")
    evidence_dir.mkdir(parents=True, exist_ok=True)
    log_path = evidence_dir / f"{name}.log"
    junit_path = evidence_dir / f"{name}.junit.xml"
    junit_path.unlink(missing_ok=True)  # a stale report must never be read as this run's
    # Neutral names: nothing the test process can see (HOME, TMPDIR, its report's path, its
    # output file) names andon; the report and log are moved to the evidence afterwards.
    scratch = Path(tempfile.mkdtemp(dir=tempdir.harness_dir()))
    run_junit, run_log = scratch / "report.xml", scratch / "output.log"

    command = resolved_command(command)
    start = plan_start(command)
    args = harness_args(run_junit, plugins, profile, random_seed)
    paths = [*pythonpath, *([PLUGIN_DIR] if random_seed is not None else [])]
    canary = canary_mod.plant(cwd, list(canaries)) if canaries is not None else None
    wrapped = decorated(cwd, list(own_files))  # before the run: nothing it runs can add one
    selected = list(select)
    if canary is not None and selected:
        selected.append(canary.path)
    args += selected

    channel = Channel(canary.path if canary else "") if start.interpreter else None
    try:
        home = scratch / "home"
        boot_args = (start.mode, [os.path.abspath(p) for p in paths], [*start.args, *args])
        if channel is not None and start.interpreter is not None:
            env = harness_env(home, (), extra_env, flags_in_env=False, cwd=cwd)
            argv = channel.boot_argv(start.interpreter, *boot_args)
        else:
            env = harness_env(home, paths, extra_env, cwd=cwd)
            argv = [*command, *args]
        can_cut, why_not = netless.available() if network == "off" else (False, "")
        cut = network == "off" and can_cut
        state = "on" if network == "on" else "cut" if cut else f"not cut: {why_not}"
        fence = netless.fence(readonly, [cwd, scratch])
        # a fork server is readied first: it is no leftover of this run (before_child)
        launch = forkpool.Launch(start.interpreter if channel is not None else None, slot,
                                 boot_args, env, fork_server, cut, fence.paths)
        started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        started = time.monotonic()
        # code under test may leave helpers in sessions of their own; the fork servers are not
        known = before_child() | forkpool.pids()
        with run_log.open("w+b") as log:  # read back through it, not by name (plain_file.py)
            try:
                proc = launch.start(argv, cwd, env, log, channel.child_fds if channel else ())
            except BaseException:
                if channel is not None:
                    channel.abandon()
                raise
            if channel is not None:
                channel.started()
            try:
                timed_out = wait_unreaped(proc, timeout_s)
            finally:
                end_child(proc, known)  # on timeout too; and whatever the suite left running
                status = proc.returncode
            log.seek(0)
            with plain_file.create(log_path) as kept:
                shutil.copyfileobj(log, kept)
        duration = time.monotonic() - started
        record: Record | None = channel.record() if channel is not None else None
        why_not = start.why
        if record is not None and record.unarmed:
            why_not, record = record.unarmed, None  # an honest "not used", see channel.verify
        replaced = keep_report(run_junit, junit_path)
    finally:
        if canary is not None:
            canary.remove()
        reaper.discard(scratch)  # the code under test wrote there: any depth, any mode

    results: dict[str, TestResult] = {}
    if timed_out:
        problem: str | None = f"timed out after {timeout_s:g} s"
    elif replaced:
        problem = replaced
    elif not junit_path.exists():
        problem = f"no JUnit report written (the run ended early: exit status {status})"
        if (cut or fence.paths) and status == netless.NETLESS_FAILED:
            problem += "; the run's namespaces could not be made (see the log)"
    else:
        try:
            results, problem = module_files(parse_junit(junit_path), cwd), None
        except JUnitError as exc:
            problem = str(exc)
    integrity = None
    if problem is None:
        integrity = judge_integrity(results, record, why_not, canary, list(own_files),
                                     wrapped)
        if canary is not None:
            results = {i: r for i, r in results.items() if i not in canary.expected
                       and r.file != canary.path}
    elif record is not None or why_not:
        integrity = Integrity("used" if record is not None else f"not used ({why_not})")
    return SuiteRun(
        name=name, argv=argv, cwd=str(cwd), exit_status=None if timed_out else status,
        timed_out=timed_out, duration_s=duration, log_path=log_path, junit_path=junit_path,
        output_tail=_tail(log_path), results=results, report_problem=problem, seed=random_seed,
        network=state, contained=fence.state, wrapper=launch.wrapper, integrity=integrity,
        profile=profile,
        started_at=started_at, start=launch.how,
    )  # fmt: skip
