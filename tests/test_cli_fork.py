"""The suite's forked ``python -m andon`` (tests/cli_fork.py) starts as a fresh interpreter
would: the same argv, working folder, environment, fds, signal dispositions, streams and
``__main__``; its exit code, atexit hooks and unflushed output as a fresh process's."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import cli_fork
import pytest

PROBE = textwrap.dedent('''
    import atexit, gc, json, os, signal, sys, tempfile, threading
    def stream(s):
        return [s.fileno(), s.encoding, s.errors, s.line_buffering, type(s.buffer).__name__]
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status"))
    state = {
        "argv": sys.argv, "orig_argv": sys.orig_argv, "path0": sys.path[0],
        "cwd": os.getcwd(), "env": dict(os.environ), "umask": os.umask(0o22),
        "fds": sorted(os.listdir("/proc/self/fd")),
        "handlers": {s.name: repr(signal.getsignal(s)) for s in signal.valid_signals()
                     if isinstance(s, signal.Signals)},
        # signals 1-31: glibc catches two of its real-time ones once a thread has run
        "masks": {k: int(status[k], 16) & 0x7FFFFFFF for k in ("SigBlk", "SigIgn", "SigCgt")},
        "no_new_privs": status["NoNewPrivs"],
        "streams": [stream(sys.stdin), stream(sys.stdout), stream(sys.stderr)],
        "main": [__name__, __spec__.name, __file__ == sys.argv[0]],
        "threads": threading.active_count(), "gc": [gc.isenabled(), gc.get_threshold()],
        "group": [os.getpgrp() == os.getpgid(os.getppid()), os.getsid(0)],
        "flags": repr(sys.flags), "tempdir": tempfile.tempdir,
    }
    print(json.dumps(state))
    atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
    sys.stdout.write("unflushed")
    sys.exit(int(sys.argv[1]))
''')


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


def fresh(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "probe", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def forked(cwd: Path, *args: str, env: dict[str, str], timeout: float = 60
           ) -> subprocess.CompletedProcess:
    done = cli_fork.run(list(args), env, timeout, module="probe", cwd=cwd)
    assert done is not None, "no server: ANDON_TESTS_FRESH_CLI is set?"
    return done


def test_a_forked_child_starts_as_a_fresh_interpreter_and_ends_as_one(probe):
    env = {**os.environ, "ANDON_PROBE": "x y"}
    env.pop("ANDON_TESTS_FRESH_CLI", None)
    want, got = fresh(probe, "3", env=env), forked(probe, "3", env=env)
    assert (got.returncode, got.stderr) == (want.returncode, want.stderr) == (3, "atexit ran\n")
    state, line_end = want.stdout.split("\n", 1)
    assert line_end == "unflushed"
    assert got.stdout.split("\n", 1) == [state, line_end]
    facts = json.loads(state)
    assert facts["cwd"] == str(probe) and facts["env"]["ANDON_PROBE"] == "x y"
    assert facts["fds"] == ["0", "1", "2", "3"]  # 3: the listing's own


def test_a_forked_child_is_killed_at_its_timeout(probe):
    (probe / "probe.py").write_text("import time, os\nprint(os.getpid(), flush=True)\n"
                                    "time.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        forked(probe, env=dict(os.environ), timeout=1)
    pid = int(caught.value.output)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_a_signal_that_ends_a_forked_child_is_its_negative_return_code(probe):
    (probe / "probe.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert forked(probe, env=dict(os.environ)).returncode == -signal.SIGTERM


def test_what_the_interpreter_reads_as_it_starts_gets_a_fresh_process(probe):
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    assert cli_fork.run([], env, 60, module="probe", cwd=probe) is None


# What makes a forked child's andon the same as a fresh one's: no andon module reads, as it is
# imported, what differs between the server and the child (the environment, the working
# folder, the temporary folder, the time, the process, the streams). Class bodies, defaults
# and decorators run at import too.
CALLS = {"os.getenv", "os.getcwd", "Path.cwd", "Path.home", "tempfile.gettempdir",
         "time.time", "time.monotonic", "os.getpid", "datetime.now", "os.get_terminal_size"}
READ_FROM = {"os.environ", "sys.stdin", "sys.stdout", "sys.stderr"}
# loaded by path into the tests' interpreter by contain/boot.py, never by the CLI
NOT_THE_CLIS = {"contain/zygote.py"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _read_at_import(tree: ast.Module) -> list[tuple[int, str]]:
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # their defaults and decorators run at import; their bodies do not
            todo.extend(n for n in (*node.args.defaults, *node.args.kw_defaults,
                                    *getattr(node, "decorator_list", ())) if n is not None)
            continue
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in CALLS or name.rpartition(".")[0] in READ_FROM:
                found.append((node.lineno, name))
        elif isinstance(node, ast.Subscript) and _dotted(node.value) in READ_FROM:
            found.append((node.lineno, _dotted(node.value)))
        todo.extend(ast.iter_child_nodes(node))
    return found


def test_no_andon_module_reads_the_environment_or_the_process_as_it_is_imported():
    src = Path(__file__).resolve().parent.parent / "src" / "andon"
    found = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text()
        for line, name in _read_at_import(ast.parse(text)):
            # a pid kept at import is fine where a fork hook renews it (contain/forkpool.py)
            renewed = name == "os.getpid" and "register_at_fork(after_in_child=" in text
            if str(path.relative_to(src)) not in NOT_THE_CLIS and not renewed:
                found.append(f"{path.relative_to(src)}:{line}: {name}")
    assert found == []


def test_the_import_check_sees_reads_in_a_class_body_a_default_and_a_decorator():
    tree = ast.parse("import os, sys\nclass A:\n    home = os.environ['HOME']\n"
                     "def f(x=os.getcwd()):\n    return os.getenv('X')\n"
                     "@cache(sys.stdout.isatty())\ndef g(): pass\n"
                     "PID = field(default_factory=os.getpid)\n")
    assert sorted(_read_at_import(tree)) == [(3, "os.environ"), (4, "os.getcwd"),
                                             (6, "sys.stdout.isatty")]


def test_a_server_that_ended_is_started_again(probe):
    env = dict(os.environ)
    assert forked(probe, "0", env=env).returncode == 0
    first = cli_fork._started()[0]
    first.kill()
    first.wait()
    assert forked(probe, "4", env=env).returncode == 4
    assert cli_fork._started()[0].pid != first.pid
