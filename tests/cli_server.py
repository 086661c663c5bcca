"""A process with andon's modules imported that forks one ``python -m andon ARGS`` per request:
the suite's CLI calls (``helpers.andon``) skip the ~0.2 CPU-s each fresh interpreter spends
importing andon, a few hundred times per suite run (benchmarks/README.md, twentieth pass).

Started by tests/cli_fork.py as ``python tests/cli_server.py FD``, FD one end of an
``AF_UNIX`` ``SOCK_SEQPACKET`` socket pair; its stdin the test process's, its stdout and
stderr pipes, as its children's standard streams will be (Python notes at start-up whether
each can seek). A request is one message, the JSON document
``{"module": "andon", "argv": [...], "cwd": path, "env": {...}}`` with four fds as
``SCM_RIGHTS``: the child's 0, 1 and 2, and a stream socket for the answer, two lines: the
child's pid (with its pidfd), then, once it has ended, its return code as ``subprocess``
gives it (negative: killed by that signal). End of file on the socket (the test process
ended): the server exits; a child still running carries on.

What the child shares with this server, and a fresh ``python -m andon`` would not: the
modules already imported (their import-time state: no andon module reads the environment,
the working folder or the time as it is imported, tests/test_cli_fork.py), the hash seed,
``/proc/self/cmdline``. What it gets as a fresh process would: fds 0-2 and no others, the
working folder, the environment (the variables read as the interpreter, libc or the loader
start, ``PYTHON*``, the locale's, ``TZ``, ``LD_*``, ``MALLOC_*``, must be the server's:
tests/cli_fork.py starts a fresh process otherwise),
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

# What only some commands load, with dependencies a run never needs (numpy and scipy, a
# tokenizer, starlette, uvicorn, asyncio; their own atexit hooks and threads): the commands
# of their own, and the scripted model server of the real agent CLIs' demo. A child that
# needs them imports them, as a fresh process does.
NOT_PRELOADED = ("andon.experiments", "andon.context", "andon.web", "andon.grill",
                 "andon.plan", "andon.demo.modelserver", "andon.demo.real_cli",
                 "andon.demo.chat_api", "andon.demo.gemini_api", "andon.demo.responses_api")
# loaded by path into the tests' interpreter (contain/boot.py), never into andon's
BY_PATH = {"andon.contain.boot", "andon.contain.zygote", "andon.contain.hook",
           "andon.contain.plugins"}


def preload() -> None:
    """Import the andon modules a ``run``, ``demo`` or ``doctor`` may load."""
    import pkgutil

    import andon

    for info in pkgutil.walk_packages(andon.__path__, "andon."):
        name = info.name
        if not (name.endswith("__main__") or name.startswith(NOT_PRELOADED) or name in BY_PATH):
            __import__(name)


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
                pidfd = os.pidfd_open(pid)
                children[pidfd] = conn
                try:  # the pidfd too: the test kills by it, never a pid reused meanwhile
                    socket.send_fds(conn, [f"{pid}\n".encode()], [pidfd])
                except OSError:
                    pass
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
    become(*serve(socket.socket(fileno=int(sys.argv[1]))))
