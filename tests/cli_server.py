"""A process with andon's modules imported that forks one ``python -m andon ARGS`` per request:
the suite's CLI calls (``helpers.andon``) skip the ~0.2 CPU-s each fresh interpreter spends
importing andon, a few hundred times per suite run (benchmarks/README.md, twentieth pass).

Started by tests/cli_fork.py as ``python tests/cli_server.py`` with fd 0 one end of an
``AF_UNIX`` ``SOCK_SEQPACKET`` socket pair. A request is one message, the JSON document
``{"module": "andon", "argv": [...], "cwd": path, "env": {...}}`` with four fds as
``SCM_RIGHTS``: the child's 0, 1 and 2, and a stream socket for the answer, two lines: the
child's pid, then, once it has ended, its return code as ``subprocess`` gives it (negative:
killed by that signal). End of file on the socket (the test process ended): the server
exits; a child still running carries on.

What the child shares with this server, and a fresh ``python -m andon`` would not: the
modules already imported (their import-time state: no andon module reads the environment,
the working folder or the time as it is imported, tests/test_cli_fork.py), the hash seed,
``/proc/self/cmdline``. What it gets as a fresh process would: fds 0-2 and no others, the
working folder, the environment (the variables read at interpreter start-up, ``PYTHON*`` and
the locale's, must be the server's: tests/cli_fork.py starts a fresh process otherwise),
``sys.argv``, ``sys.orig_argv``, ``sys.path[0]``, ``__main__`` run by ``runpy`` as ``-m``
runs it, then the interpreter's own exit (``atexit`` hooks, flushed streams, threads
joined). Signal dispositions are a fresh interpreter's: this server sets none.
"""

import gc
import json
import os
import runpy
import select
import socket
import sys

MAX_REQUEST = 1 << 20


def preload() -> None:
    """Import every andon module a CLI command may load (all of them but ``__main__``)."""
    import pkgutil

    import andon

    for info in pkgutil.walk_packages(andon.__path__, "andon."):
        if not info.name.endswith("__main__"):
            __import__(info.name)


def serve(sock: socket.socket) -> tuple[dict, list[int]]:
    """Answer requests until end of file (then exit). In a forked child: return its request
    and its three fds."""
    children: dict[int, socket.socket] = {}  # pidfd -> where its return code goes
    while True:
        ready, _, _ = select.select([sock, *children], [], [])
        for r in ready:
            if r is sock:
                msg, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 4)
                if not msg:
                    sys.exit(0)
                request = json.loads(msg)
                conn = socket.socket(fileno=fds.pop())
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    for pidfd, other in children.items():
                        os.close(pidfd)
                        other.close()
                    conn.close()
                    return request, fds
                for fd in fds:
                    os.close(fd)
                children[os.pidfd_open(pid)] = conn
                _answer(conn, pid)
            else:
                info = os.waitid(os.P_PIDFD, r, os.WEXITED)
                os.close(r)
                conn = children.pop(r)
                _answer(conn, info.si_status if info.si_code == os.CLD_EXITED
                        else -info.si_status)
                conn.close()


def _answer(conn: socket.socket, number: int) -> None:
    try:
        conn.sendall(f"{number}\n".encode())
    except OSError:  # the test stopped listening (its timeout, or it ended)
        pass


def become(request: dict, fds: list[int]) -> None:
    """Make this forked child what ``python -m MODULE ARGV`` is at start-up, then run it."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    module = request["module"]
    sys.argv = ["-m", *request["argv"]]  # runpy puts the module's path first
    sys.orig_argv = [sys.executable, "-m", module, *request["argv"]]
    sys.path[0] = os.getcwd()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # as for `python -m andon`: not this file's folder
    preload()
    gc.freeze()  # what the import made is never collected, so the children never copy it
    listener = socket.socket(fileno=os.dup(0))
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    become(*serve(listener))
