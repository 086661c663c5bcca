"""andon.contain.netless: a command run in its own network namespace reaches only its own loopback.

Real subprocesses, real sockets. A TCP server started here (in the test's own network namespace)
must be unreachable from inside; a server the child starts on its own 127.0.0.1 must work; the
uid and gid stay what they were; the exit status and argv pass through unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from andon.contain import netless

AVAILABLE, WHY = netless.available()
needs_netns = pytest.mark.skipif(not AVAILABLE, reason=f"network namespaces: {WHY}")


def run_cut(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(netless.wrap([sys.executable, "-c", code, *args]),
                          capture_output=True, text=True, timeout=60)


CONNECT = """
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as s:
        print("got", s.recv(16).decode())
except OSError as exc:
    print("refused", type(exc).__name__)
"""


def test_outside_server_is_reachable_without_the_wrapper(outside_server):
    """The control: the same child, not wrapped, does reach the server."""
    p = subprocess.run([sys.executable, "-c", CONNECT, str(outside_server)],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "got answer"


@needs_netns
def test_child_cannot_reach_a_server_outside(outside_server):
    p = run_cut(CONNECT, str(outside_server))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("refused"), p.stdout


@needs_netns
def test_child_can_serve_and_connect_on_its_own_loopback():
    code = """
import socket, threading
srv = socket.create_server(("127.0.0.1", 0))
port = srv.getsockname()[1]
def serve():
    conn, _ = srv.accept()
    with conn:
        conn.sendall(conn.recv(16).upper())
t = threading.Thread(target=serve); t.start()
with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
    c.sendall(b"ping")
    print(c.recv(16).decode())
t.join()
"""
    p = run_cut(code)
    assert (p.returncode, p.stdout.strip()) == (0, "PING"), p.stderr


@needs_netns
def test_only_loopback_exists_inside():
    p = run_cut("import socket; print(sorted(n for _, n in socket.if_nameindex()))")
    assert p.stdout.strip() == "['lo']", (p.stdout, p.stderr)


@needs_netns
def test_uid_and_gid_are_unchanged():
    p = run_cut("import os; print(os.getuid(), os.getgid(), os.geteuid(), os.getegid())")
    assert p.stdout.split() == [str(os.getuid()), str(os.getgid()),
                                str(os.geteuid()), str(os.getegid())], p.stderr


@needs_netns
def test_exit_status_and_argv_pass_through():
    p = run_cut("import sys; print(repr(sys.argv[1:])); sys.exit(7)", "a b", "", "c'd\"e")
    assert p.returncode == 7
    assert p.stdout.strip() == repr(["a b", "", "c'd\"e"])


@needs_netns
def test_signal_death_passes_through_and_pid_is_the_childs():
    """The wrapper execs the command: the pid Popen sees is the command's own, and a signal
    it dies of is reported as such (-N)."""
    proc = subprocess.Popen(netless.wrap([sys.executable, "-c",
                                          "import os, signal; print(os.getpid(), flush=True);"
                                          "os.kill(os.getpid(), signal.SIGTERM)"]),
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -15
    assert int(out.strip()) == proc.pid


@needs_netns
def test_environment_and_cwd_pass_through(tmp_path):
    p = subprocess.run(netless.wrap([sys.executable, "-c",
                                     "import os; print(os.getcwd()); print(os.environ['X_Y'])"]),
                       cwd=tmp_path, env={"X_Y": "z w", "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.splitlines() == [str(tmp_path), "z w"], p.stderr


@needs_netns
def test_ignored_signals_are_as_without_the_wrapper():
    """Python ignores SIGPIPE and SIGXFSZ, and an ignored signal survives exec; the wrapper must
    not hand that on: the command's ignored-signal mask is what it is when run directly."""
    cmd = ["grep", "SigIgn", "/proc/self/status"]
    direct = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    cut = subprocess.run(netless.wrap(cmd), capture_output=True, text=True, timeout=60)
    assert cut.stdout == direct.stdout, cut.stderr


def test_missing_command_exits_127_with_a_message():
    if not AVAILABLE:
        pytest.skip(f"network namespaces: {WHY}")
    p = subprocess.run(netless.wrap(["/nonexistent/prog", "x"]), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 127
    assert "/nonexistent/prog" in p.stderr


def test_available_is_cached_and_explains_itself():
    first = netless.available()
    assert netless.available() is first
    ok, why = first
    assert isinstance(ok, bool) and isinstance(why, str)
    assert ok or why  # a refusal always says why


def test_refusal_is_reported_with_the_kernels_reason(monkeypatch):
    """When unshare fails the wrapper exits NETLESS_FAILED and says why; the probe turns that
    into (False, reason). Provoked with a bad flag word the kernel rejects (EINVAL)."""
    p = subprocess.run([*netless.wrap(["/bin/true"])], env={"ANDON_NETLESS_TEST_FLAGS": "1"},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == netless.NETLESS_FAILED
    assert "network namespace" in p.stderr
    assert netless.probe(env={"ANDON_NETLESS_TEST_FLAGS": "1"})[0] is False


def test_wrap_runs_the_wrapper_isolated():
    """The wrapper file runs with -I -S: no PYTHONPATH, no site, no script dir on sys.path,
    so a tree that holds its own ``andon`` package cannot replace it."""
    argv = netless.wrap(["pytest", "-q"])
    assert argv[:4] == [sys.executable, "-I", "-S", str(netless.WRAPPER)]
    assert argv[4:] == ["--", "pytest", "-q"]


@pytest.fixture
def request_cleanup():
    """Folders to remove after the test."""
    import shutil

    folders: list = []
    yield folders
    for f in folders:
        shutil.rmtree(f, ignore_errors=True)


@needs_netns
def test_unprivileged_user_gets_a_user_namespace_with_its_own_ids(outside_server,
                                                                   request_cleanup):
    """As root the wrapper needs only a network namespace; an ordinary user needs a user
    namespace too. Run the wrapper as nobody (setpriv) to cover that path: ids unchanged,
    loopback up, the outside server unreachable."""
    import shutil
    import stat

    py = "/usr/bin/python3"  # one nobody may run (andon's own may live under /root)
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(py):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to act as an unprivileged user")
    import tempfile
    from pathlib import Path

    # tmp_path and the suite's TMPDIR are root-only: a folder nobody can enter, removed after
    where = Path(tempfile.mkdtemp(prefix="andon-netless-nobody-",
                                  dir=os.environ.get("ANDON_TESTS_SYSTEM_TMPDIR")))
    os.chmod(where, 0o755)
    request_cleanup.append(where)
    wrapper = where / "netless.py"
    shutil.copy(netless.WRAPPER, wrapper)
    os.chmod(wrapper, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    code = (CONNECT + "import os; print(os.getuid(), os.getgid())\n"
            "s = socket.create_server(('127.0.0.1', 0)); "
            "socket.create_connection(s.getsockname()); print('lo up')\n")
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        py, "-I", "-S", str(wrapper), "--", py, "-c", code, str(outside_server)],
                       capture_output=True, text=True, timeout=60, cwd="/")
    if p.returncode == netless.NETLESS_FAILED:
        pytest.skip(f"unprivileged user namespaces refused here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("refused") and lines[1:] == ["65534 65534", "lo up"], p.stdout
