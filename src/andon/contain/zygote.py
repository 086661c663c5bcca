"""The fork server's side in the tests' interpreter (loaded by boot.py by path; Python >= 3.8,
stdlib only). The harness's side, and why there is a fork server at all: forkserver.py.

``boot.py serve <fd>`` imports what every harness run imports before any project code (boot's
own modules, pytest, pluggy), then calls :func:`serve` on ``<fd>``, one end of an ``AF_UNIX``
``SOCK_SEQPACKET`` socket pair. Each message is one JSON document; file descriptors ride along
as ``SCM_RIGHTS``. The harness speaks first::

    harness → server   {"given": [names]}            the variables it started the server with
    server  → harness  {"ready": pid, "coerced": {}}  variables Python added at start-up
    harness → server   {"spawn": {...}} + fds [log, channel w, channel r]
    server  → harness  {"pid": pid} | {"stale": why}
    harness → server   {"reap": pid}
    server  → harness  {"status": wait status}

A spawn forks. The server closes its copies of the fds and answers with the child's pid once
the child is the leader of a session of its own (the harness kills runs by process group). It
never reaps a child until asked: while a pid is unreaped no other process can take it, so the
harness's group kill cannot hit a stranger. ``stale``: a file the start-up or pytest's import
read has changed since the server started (its stat differs), so a fresh process would not
start like this one: the server exits and the harness starts another. End of file on the
socket (the harness ended): every child not yet reaped is killed with its group, then the
server exits.

The child (:func:`_child`) makes itself what a fresh ``boot.py`` process is at the same point:
its own session; fd 0 on ``/dev/null``, 1 and 2 on the run's log, the channel's two fds, and no
other; the run's working folder and environment (plus what Python's start-up added to the
server's, e.g. PEP 538's ``LC_CTYPE``); its own network namespace when the run is cut off; the
modules only the server used taken out of ``sys.modules``; ``sys.orig_argv`` as a fresh
start's. It then returns boot.py's argv, and boot.py carries on as for a fresh process: nonce,
audit hook, plugin, pytest. What stays shared with the server and its other children: the hash
seed (set once per interpreter; the harness asks a different server for each run of a repeated
set) and ``/proc/self/cmdline``.
"""

import array
import json
import os
import socket
import sys

MAX_MESSAGE = 1 << 20  # a spawn's argv and environment; far more than any run needs
NETLESS_FAILED = 125  # as contain/netless.py's wrapper: the kernel refused a namespace


_SERVER_PID = [os.getpid()]  # set at load, in the server: a child's pid differs


def serve(fd, before, own):
    """Answer the harness on socket ``fd`` until it hangs up (then exit) or a spawn forks:
    in the child, return the boot argv (``["<w>:<r>", mode, *paths, "--", *args]``).
    ``before``: the names in ``sys.modules`` and the keys of ``sys.path_importer_cache``
    before this module loaded (what a fresh run has at the same point); the modules only the
    server imports, and the finders of their folders, are taken out of each child's.
    ``own``: andon's files a run loads by path (boot.py's folder: ``netless.py`` among them),
    watched like the modules' files."""
    netless = _load_netless(next(p for p in own if p.endswith("netless.py")))
    modules_before, finders_before = before
    server_only = set(sys.modules) - modules_before
    sock = socket.socket(fileno=fd)
    children: set[int] = set()
    try:
        hello = _recv(sock)[0]
        given = set(hello.get("given", ())) if isinstance(hello, dict) else set()
        coerced = {k: v for k, v in os.environ.items() if k not in given}
        watched = sorted(set(_watched()) | set(own))
        signature = _signature(watched)
        _subreaper()
        _send(sock, {"ready": os.getpid(), "coerced": coerced, "id": hello.get("id")})
        while True:
            msg, fds = _recv(sock)
            if msg is None:
                return _hang_up(children)
            answer = {"id": msg.get("id")}  # a borrower killed mid-request left an answer
            if "reap" in msg:
                pid = msg["reap"]
                status = os.waitpid(pid, 0)[1] if pid in children else None
                children.discard(pid)
                _sweep(children)  # what the run left in sessions of its own is ours now
                _send(sock, {**answer, "status": status})
                continue
            spec = msg.get("spawn")
            if not isinstance(spec, dict) or len(fds) != 3:
                _close(fds)
                _send(sock, {**answer, "error": "a spawn needs its settings and three fds"})
                continue
            now = _signature(watched)
            if now != signature:
                _close(fds)
                _send(sock, {**answer, "stale": _first_change(signature, now)})
                return _hang_up(children)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                sock.close()
                return _child(spec, fds, w, coerced, (server_only, finders_before), netless)
            os.close(w)
            _close(fds)
            os.read(r, 1)  # end of file: the child has its own session
            os.close(r)
            children.add(pid)
            _send(sock, {**answer, "pid": pid})
    except BaseException as exc:  # the server ends (the harness starts fresh); a child raises
        if os.getpid() == _SERVER_PID[0]:
            sys.stderr.write(f"andon fork server: {type(exc).__name__}: {exc}\n")
            _hang_up(children)
        raise


def _hang_up(children):
    """Kill every child not reaped yet (with its group) and what they left, reap them, leave."""
    _sweep(set())
    os._exit(0)


def _subreaper():
    """Become a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): what a run leaves running
    in a session of its own is re-parented here when the run ends, not to a process that
    did not start it (the harness process that borrowed this server may be another one than
    the one that started it: gates/lanes.py), and :func:`_sweep` ends it."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _sweep(runs, rounds=100, deadline_s=10.0):
    """SIGKILL (its group, then itself) and reap every child of this server that is not a
    run in ``runs``, round after round (killing one hands its children over), as the harness
    does after a fresh run (contain/procgroup.py ``kill_leftovers``). Called when a run was
    reaped: the server has no other run then."""
    import signal
    import time

    end = time.monotonic() + deadline_s
    mine, group = str(os.getpid()), os.getpgrp()
    for _ in range(rounds):
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in runs:
                try:
                    with open(f"/proc/{name}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if fields[1] == mine:
                    found.append((int(name), int(fields[2])))
        if not found or time.monotonic() > end:
            return
        for pid, pgrp in found:
            for kill, target in ((os.killpg, pgrp), (os.kill, pid)):
                if kill is os.kill or pgrp != group:
                    try:
                        kill(target, signal.SIGKILL)
                    except OSError:
                        pass
        for pid, _ in found:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass


def _child(spec, fds, ready_w, coerced, fresh_has, netless):
    """In the forked child: make this process what a fresh boot.py run is at this point and
    return boot's argv. ``fresh_has``: (the modules only the server imported, the
    ``sys.path_importer_cache`` keys a fresh run has), what is taken out and what is kept."""
    log, wfd, rfd = fds
    try:
        os.setsid()
    finally:
        os.close(ready_w)  # the server answers the harness now
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    keep = {0, 1, 2, wfd, rfd}
    for name in os.listdir("/proc/self/fd"):
        n = int(name)
        if n not in keep:
            try:
                os.close(n)
            except OSError:
                pass  # the listing's own fd, already gone
    os.chdir(spec["cwd"])
    os.environ.clear()
    os.environ.update(spec["env"])
    os.environ.update(coerced)
    present = set(sys.modules)
    if spec.get("netless") or spec.get("readonly"):
        try:  # contained: on return this is pid 2 of a pid namespace of its own
            netless.enter(0, bool(spec.get("netless")), spec.get("readonly") or (),
                          spec.get("writable") or (), spec["cwd"])
        except OSError as exc:
            why = netless.refusal(spec.get("readonly"))
            os.write(2, f"andon.netless: {why}: {exc}\n".encode())
            os._exit(NETLESS_FAILED)
    server_only, finders = fresh_has
    for name in list(sys.modules):
        if name in server_only or name not in present:
            del sys.modules[name]
    for folder in list(sys.path_importer_cache):  # the server's ctypes/ folder, say
        if folder not in finders:
            del sys.path_importer_cache[folder]
    argv = [f"{wfd}:{rfd}", spec["mode"], *spec["paths"], "--", *spec["args"]]
    if hasattr(sys, "orig_argv"):  # as a fresh `<python> -I -B boot.py <argv>` has it
        sys.orig_argv = [*sys.orig_argv[:4], *argv]
    return argv


def _load_netless(path):
    """contain/netless.py (loaded by path, never entered in sys.modules) with what its
    ``enter`` imports, so that a child cut off from the network enters a namespace of its own
    as the wrapper of a fresh run does, without importing anything (what the server imported
    for this is taken out of each child's ``sys.modules``)."""
    import ctypes  # noqa: F401
    import fcntl  # noqa: F401
    import importlib.util
    import struct  # noqa: F401

    spec = importlib.util.spec_from_file_location("_andon_netless", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _watched():
    """What a fresh start reads that could make it differ from this process: the file (and
    byte-code cache) of every module imported so far, their folders, the site folders (a new
    ``.pth`` or ``sitecustomize.py``), the executable and ``pyvenv.cfg``."""
    paths = {sys.executable, os.path.realpath(sys.executable),
             os.path.join(sys.prefix, "pyvenv.cfg")}
    for m in list(sys.modules.values()):
        for attr in ("__file__", "__cached__"):
            f = getattr(m, attr, None)
            if isinstance(f, str):
                paths.add(f)
                paths.add(os.path.dirname(f))
    try:
        import site

        paths.update(site.getsitepackages())
    except (AttributeError, ImportError):
        pass
    paths.update(p for p in sys.path if isinstance(p, str) and p)
    return sorted(paths)


def _signature(paths):
    out: list[object] = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    out.append(tuple(paths))
    return out


def _first_change(before, now):
    for i, name in enumerate(before[-1]):
        if before[i] != now[i]:
            return f"{name} changed since the fork server started"
    return "the interpreter's files changed since the fork server started"


def _send(sock, doc):
    sock.sendall(json.dumps(doc).encode("utf-8"))


def _recv(sock):
    """One message and the fds that came with it; (None, []) at end of file."""
    fds = array.array("i")
    data, anc, _flags, _addr = sock.recvmsg(MAX_MESSAGE, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if not data:
        _close(list(fds))
        return None, []
    return json.loads(data.decode("utf-8")), list(fds)


def _close(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
