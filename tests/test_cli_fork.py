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
import time
from pathlib import Path

import cli_fork
import pytest

PROBE = textwrap.dedent('''
    import andon.cli, andon.demo, andon.doctor, andon.runner  # what a run loads
    import atexit, gc, json, os, signal, sys, tempfile, threading, time, warnings
    def stream(s):
        return [s.fileno(), s.encoding, s.errors, s.line_buffering, s.seekable(),
                type(s.buffer).__name__]
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status"))
    state = {
        "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path,
        "cwd": os.getcwd(), "env": dict(os.environ), "umask": os.umask(0o22),
        "fds": sorted(os.listdir("/proc/self/fd")),
        "handlers": {s.name: repr(signal.getsignal(s)) for s in signal.valid_signals()
                     if isinstance(s, signal.Signals)},
        # signals 1-31: glibc catches two of its real-time ones once a thread has run
        "masks": {k: int(status[k], 16) & 0x7FFFFFFF for k in ("SigBlk", "SigIgn", "SigCgt")},
        "no_new_privs": status["NoNewPrivs"],
        "streams": [stream(sys.stdin), stream(sys.stdout), stream(sys.stderr)],
        "main": [__name__, __spec__.name, __file__ == sys.argv[0]],
        "threads": [threading.active_count(), len(os.listdir("/proc/self/task"))],
        "gc": [gc.isenabled(), gc.get_threshold()], "atexit": atexit._ncallbacks(),
        "warnings": repr(warnings.filters), "tz": time.tzname,
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


def fresh(cwd: Path, *args: str, env: dict[str, str], timeout: float = 60
          ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "probe", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def forked(cwd: Path, *args: str, env: dict[str, str], timeout: float = 60
           ) -> subprocess.CompletedProcess:
    done = cli_fork.run(list(args), env, timeout, module="probe", cwd=cwd)
    assert done is not None, "no server: ANDON_TESTS_FRESH_CLI is set?"
    return done


def test_a_forked_child_starts_as_a_fresh_interpreter_and_ends_as_one(probe):
    env = {**os.environ, "ANDON_PROBE": "x y", "HOME": str(probe / "home")}
    (probe / "home" / ".local" / "lib" / f"python3.{sys.version_info[1]}" / "site-packages"
     ).mkdir(parents=True)  # a user site there, which a fresh start would put on sys.path
    want, got = fresh(probe, "3", env=env), forked(probe, "3", env=env)
    assert (got.returncode, got.stderr) == (want.returncode, want.stderr) == (3, "atexit ran\n")
    state, line_end = want.stdout.split("\n", 1)
    assert line_end == "unflushed"
    assert got.stdout.split("\n", 1) == [state, line_end]
    facts = json.loads(state)
    assert facts["cwd"] == str(probe) and facts["env"]["ANDON_PROBE"] == "x y"
    assert facts["fds"] == ["0", "1", "2", "3"]  # 3: the listing's own


def gone(pid: int) -> bool:
    try:  # one read: the process may end between a look for its folder and a read of it
        return ") Z " in Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True


# a child that outlives its timeout: with its output open, closed, or left to a grandchild
PID = "import os, time\nopen('pid', 'a').write(f'{os.getpid()} ')\nprint('started', flush=True)\n"
HANGS = {
    "sleeps": PID + "time.sleep(600)\n",
    "closes its output": PID + "os.close(1)\nos.close(2)\ntime.sleep(600)\n",
    "leaves it to a grandchild": PID + "if os.fork() == 0:\n    time.sleep(600)\n",
}


@pytest.mark.parametrize("hang", HANGS)
def test_a_child_past_its_timeout_is_killed_and_raises_as_subprocess_run(probe, hang):
    (probe / "probe.py").write_text(HANGS[hang])
    env = dict(os.environ)
    caught = []
    for start in (lambda: fresh(probe, env=env, timeout=1),
                  lambda: forked(probe, env=env, timeout=1)):
        with pytest.raises(subprocess.TimeoutExpired) as raised:
            start()
        assert 0 < raised.value.timeout <= 1  # subprocess gives what was left of it at times
        caught.append((raised.value.output, raised.value.stderr))
        pid = int((probe / "pid").read_text().split()[-1])
        assert gone(pid) or hang == "leaves it to a grandchild"
    subprocess.run(["pkill", "-f", f"{probe}"], check=False)  # the grandchildren
    assert caught[0] == caught[1]


def test_an_exception_while_waiting_kills_the_child(probe):
    (probe / "probe.py").write_text("import os, time\nopen('pid', 'w').write(str(os.getpid()))"
                                    "\ntime.sleep(600)\n")

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            forked(probe, env=dict(os.environ))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    pid = int((probe / "pid").read_text())
    deadline = time.monotonic() + 10
    while not gone(pid):  # SIGKILL lands asynchronously
        assert time.monotonic() < deadline, f"{pid} still runs"
        time.sleep(0.01)


def test_a_signal_that_ends_a_forked_child_is_its_negative_return_code(probe):
    (probe / "probe.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert forked(probe, env=dict(os.environ)).returncode == -signal.SIGTERM


def test_what_the_interpreter_reads_as_it_starts_gets_a_fresh_process(probe):
    for name, value in (("PYTHONHASHSEED", "7"), ("TZ", "Asia/Tokyo"), ("LD_PRELOAD", "")):
        env = {**os.environ, name: value + "x" if os.environ.get(name) == value else value}
        assert cli_fork.run([], env, 60, module="probe", cwd=probe) is None


# What makes a forked child's andon the same as a fresh one's: no andon module reads, as it is
# imported, what differs between the server and the child (the environment, the working
# folder, the temporary folder, the time, the process, the streams). Class bodies, defaults
# and decorators run at import too.
# matched by their last two names, however imported (``datetime.datetime.now``, ``Path.cwd``)
CALLS = {"os.getenv", "os.getcwd", "Path.cwd", "Path.home", "tempfile.gettempdir",
         "time.time", "time.monotonic", "os.getpid", "datetime.now", "os.get_terminal_size",
         "shutil.which", "os.cpu_count", "path.expanduser"}
READ_FROM = {"os.environ", "sys.stdin", "sys.stdout", "sys.stderr", "environ"}
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
            if ".".join(name.split(".")[-2:]) in CALLS or name.rpartition(".")[0] in READ_FROM:
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
                     "PID = field(default_factory=os.getpid)\n"
                     "from os import environ\nUSER = environ['USER']\n"
                     "WHEN = datetime.datetime.now()\nHERE = pathlib.Path.cwd()\n")
    assert sorted(_read_at_import(tree)) == [
        (3, "os.environ"), (4, "os.getcwd"), (6, "sys.stdout.isatty"), (10, "environ"),
        (11, "datetime.datetime.now"), (12, "pathlib.Path.cwd")]


def test_a_server_that_ended_is_started_again(probe):
    env = dict(os.environ)
    assert forked(probe, "0", env=env).returncode == 0
    first = cli_fork._started().proc
    first.kill()
    first.wait()
    assert forked(probe, "4", env=env).returncode == 4
    assert cli_fork._started().proc.pid != first.pid


# The same, seen from the other side: what the server's imports leave in every module's
# globals does not depend on the environment or the working folder they ran in (but for the
# variables tests/cli_fork.py's START_VARS name: a request that changes one is not forked).
# Values of plain types; sets sorted; the hash seed fixed, so that both see one order.
DUMP = textwrap.dedent('''
    import json, sys
    from pathlib import PurePath
    import cli_server
    cli_server.preload()
    def plain(v, depth=0):
        if isinstance(v, int) and abs(v) >= 1 << 40:
            return None  # an address (ctypes, thread idents): the loader's, not the import's
        if v is None or isinstance(v, (str, bytes, int, float, PurePath)):
            return repr(v)
        if depth < 3 and isinstance(v, (tuple, list)):
            return [plain(x, depth + 1) for x in v]
        if depth < 3 and isinstance(v, (set, frozenset)):
            return sorted(str(plain(x, depth + 1)) for x in v)
        if depth < 3 and isinstance(v, dict):
            return [[plain(k, depth + 1), plain(x, depth + 1)] for k, x in v.items()]
        return None
    out = {}
    for name, module in sorted(sys.modules.items()):
        for key, value in sorted(vars(module).items()):
            if not key.startswith("__") and (p := plain(value)) is not None:
                out[f"{name}.{key}"] = p
    print(json.dumps(out))
''')
DIFFER_BY_DESIGN = {
    "andon.contain.forkpool._owner",  # a pid, renewed by the module's fork hook
    "rich._IMPORT_CWD",  # the folder rich was imported in: Console.log's; andon never logs
    "posix.environ",  # the start-up environment os.environ was made from, and set anew
    "sys.path_importer_cache",  # a finder per folder of sys.path, whose first is the cwd
    # from HOME: a venv's interpreter puts no user site on sys.path (the probe above compares
    # sys.path under another HOME), and andon works one out from HOME when it needs it
    # (contain/envlayout.py)
    "site.USER_BASE", "site.USER_SITE", "sysconfig._CONFIG_VARS.userbase",
}


def test_what_the_server_imports_does_not_depend_on_its_environment(tmp_path):
    tests = Path(__file__).resolve().parent
    seen = []
    for n, cwd in enumerate((tests.parent, tmp_path)):
        env = {**os.environ, "PYTHONPATH": str(tests), "PYTHONHASHSEED": "0",
               "HOME": str(tmp_path / f"home{n}"), "TMPDIR": str(tmp_path),
               "COLUMNS": str(80 + n), "TERM": ("dumb", "xterm")[n], "NO_COLOR": str(n),
               "XDG_CONFIG_HOME": str(tmp_path / f"config{n}"), "USER": f"someone{n}"}
        done = subprocess.run([sys.executable, "-c", DUMP], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        dump = json.loads(done.stdout)
        config = dict(map(tuple, dump.pop("sysconfig._CONFIG_VARS")))
        dump["sysconfig._CONFIG_VARS.userbase"] = config.pop("'userbase'")
        dump["sysconfig._CONFIG_VARS"] = config
        seen.append(dump)
    assert len(seen[0]) > 3000  # the dump saw the modules
    differ = {k for k in seen[0].keys() | seen[1].keys() if seen[0].get(k) != seen[1].get(k)}
    assert differ - DIFFER_BY_DESIGN == set()
