"""Run a command without the network: in a new network namespace whose only interface is an
up loopback (catalogue kind 16: fetching the upstream fix, installing a package); and, with
read-only folders given, contained (``enter``: docs/gates.md, "What a test run can write").

``wrap(argv)`` gives the argv: ``[sys.executable, "-I", "-S", ".../netless.py", <options>,
"--", *argv]``. The wrapper (this file, run as a script) calls ``unshare(2)`` through ctypes,
brings ``lo`` up with the SIOCGIFFLAGS/SIOCSIFFLAGS ioctls, resets SIGPIPE and SIGXFSZ (Python
ignores them, and an ignored signal survives exec) and then ``execvpe``s ``argv`` with its
environment and cwd unchanged. Exec keeps the pid (uncontained), so the caller's pidfd wait and
process-group kill work as for an unwrapped command; the exit status (or death by signal) is
the command's own. It runs isolated (``-I -S``: no PYTHONPATH, no site, no script dir on
sys.path), so a tree holding its own ``andon`` package cannot replace it.

Which namespaces:

- with CAP_SYS_ADMIN (root outside a restricted container): ``CLONE_NEWNET`` alone; nothing
  else about the process changes;
- otherwise ``CLONE_NEWUSER | CLONE_NEWNET`` with the caller's uid and gid mapped to
  themselves (``setgroups`` denied): ids, file ownership and permission checks stay what they
  were — unlike ``unshare -r``, which makes the command root. The capabilities the new user
  namespace grants are lost at exec for a non-zero uid, which is why ``lo`` is brought up here,
  before exec.

Exit statuses of the wrapper itself: ``NETLESS_FAILED`` (125) when the kernel refuses a
namespace (a line on stderr says why: user namespaces off, seccomp, AppArmor…); 127 when the
command cannot be executed; 2 for a bad wrapper argv. ``available()`` probes once per process.
Python 3.11 has no ``os.unshare``; nothing here uses ``preexec_fn`` (unsafe with threads).
"""

import os
import re
import stat
import sys
import threading
from pathlib import Path

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME = 1 << 21
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
NETLESS_FAILED = 125
PROBE_TIMEOUT_S = 30.0
WRAPPER = Path(__file__).resolve()
# Only ORed into the flags, so it can make unshare fail (tests) but never drop a namespace.
TEST_FLAGS_ENV = "ANDON_NETLESS_TEST_FLAGS"

_lock = threading.Lock()
_cached: "tuple[bool, str] | None" = None
_contain_cached: "tuple[bool, str] | None" = None


def wrap(argv, cut=True, readonly=(), writable=()):
    """``argv`` (list of str, argv[0] found on the command's PATH) prefixed with the wrapper
    that runs it without network (``cut``) and, with ``readonly``, contained (see
    :func:`enter`). Does not check that namespaces are available here."""
    opts = ([] if cut else ["--keep-network"]) + [f"--ro={p}" for p in readonly] \
        + [f"--rw={p}" for p in writable]
    return [sys.executable, "-I", "-S", str(WRAPPER), *opts, "--", *argv]


def probe(env=None, timeout_s=PROBE_TIMEOUT_S, argv=None):
    """Run the wrapper on ``/bin/true`` now: ``(True, "")`` if it worked, else ``(False,
    reason)`` with the kernel's refusal (or why the probe could not run). ``env``: the
    wrapper's whole environment (default: a fixed PATH, plus ANDON_NETLESS_TEST_FLAGS if set
    here); ``argv``: the wrapped command (default ``wrap(["/bin/true"])``). Never raises."""
    import subprocess

    if not sys.platform.startswith("linux"):
        return False, f"network namespaces exist only on Linux (this is {sys.platform})"
    if env is None:
        env = {"PATH": "/usr/bin:/bin"}
        if os.environ.get(TEST_FLAGS_ENV):  # lets a test make the kernel refuse, for real
            env[TEST_FLAGS_ENV] = os.environ[TEST_FLAGS_ENV]
    try:
        p = subprocess.run(argv or wrap(["/bin/true"]), capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=timeout_s, env=dict(env))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the probe could not run: {exc}"
    if p.returncode == 0:
        return True, ""
    lines = p.stderr.strip().splitlines()
    return False, (lines[-1] if lines else f"the probe exited {p.returncode}")


def available():
    """``(True, "")`` when commands can run without network here, else ``(False, reason)``.
    Probed once per process (``probe()``), then cached."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = probe()
        return _cached


class Fence:
    """How one run is contained: ``paths`` (the resolved read-only folders, the writable ones
    below them) for :func:`wrap` and the fork server, or None; ``state`` for its evidence:
    ``"read-only: <folders>"``, ``"not contained: <reason>"``, or ``""`` (none asked)."""

    def __init__(self, paths, state):
        self.paths, self.state = paths, state


def fence(readonly, writable):
    """The :class:`Fence` of a run that may not write the folders ``readonly`` (those that
    exist; resolved) except ``writable`` ones below them (its own tree, HOME, TMPDIR), as
    far as this machine allows (:func:`contain_available`)."""
    ro = sorted({os.path.realpath(p) for p in readonly if os.path.isdir(p)})
    ro = [p for p in ro if not any(p != q and _below(p, q) for q in ro)]  # the tops
    can, why = contain_available() if ro else (False, "")
    if not can:
        return Fence(None, why and f"not contained: {why}")
    return Fence((ro, sorted({os.path.realpath(p) for p in writable})),
                 "read-only: " + ", ".join(ro))


def contain_available():
    """``(True, "")`` when test runs can be contained here (:func:`enter` with
    ``readonly``), else ``(False, reason)``. Probed once per process, then cached."""
    global _contain_cached
    with _lock:
        if _contain_cached is None:
            _contain_cached = probe(argv=wrap(["/bin/true"], cut=False,
                                               readonly=[str(WRAPPER.parent)]))
        return _contain_cached


def enter(extra_flags=0, cut=True, readonly=(), writable=(), cwd=None):
    """Move this process into a new network namespace (``cut``; unless privileged, with a
    new user namespace whose uid/gid map to themselves) and bring its loopback up. With
    ``readonly`` (absolute, resolved folder paths) also contain it (:func:`_contain`): on
    return this is a new process, pid 2 of a pid namespace of its own, in which those
    folders are read-only except ``writable`` ones below them, in the folder ``cwd``; the
    process that called waits for it and ends as it ends. Raises OSError with the kernel's
    reason (in the new process too, when a mount is refused)."""
    import ctypes

    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    flags = (CLONE_NEWNET if cut else 0) | (CLONE_NEWNS | CLONE_NEWPID if readonly else 0)
    privileged = _unshare(libc, flags | extra_flags, uid, gid)
    if cut:
        loopback_up()
    if readonly:
        _contain(libc, readonly, writable, cwd or os.getcwd(), uid, gid, privileged)


def _unshare(libc, flags, uid, gid, user=False):
    """unshare(2) ``flags``: without a user namespace when privileged (root outside a
    restricted container; returns True), else with one mapping uid/gid to themselves
    (returns False); ``user``: always with one."""
    from ctypes import get_errno

    if not user and libc.unshare(flags) == 0:
        return True
    first = "" if user else os.strerror(get_errno())
    if libc.unshare(CLONE_NEWUSER | flags) != 0:
        err = get_errno()
        raise OSError(err, f"unshare({_names(flags)}) failed ({first}) and "
                           f"unshare(CLONE_NEWUSER|{_names(flags)}) failed "
                           f"({os.strerror(err)})" + _hint())
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    return False


def _names(flags):
    return "|".join(n for n, f in (("CLONE_NEWNS", CLONE_NEWNS), ("CLONE_NEWPID", CLONE_NEWPID),
                                   ("CLONE_NEWNET", CLONE_NEWNET)) if flags & f) or "0"


def _contain(libc, readonly, writable, cwd, uid, gid, privileged):
    """The containment of a test run, in the namespaces :func:`enter` made (``privileged``:
    without a user namespace, as root). A fork whose child is pid 1 of the new pid namespace,
    which forks the run (pid 2) and waits for it; this process, outside, waits for pid 1. The
    run mounts its own ``/proc`` (so ``/proc/<pid>/cwd`` of a process outside, such as the
    shell that started andon, leads nowhere), makes each ``readonly`` folder read-only (a
    recursive bind mount of itself, remounted read-only) after binding each ``writable``
    folder below one to itself (so it stays writable), and then enters a user namespace of
    its own, which locks those mounts: no capability it has there can undo them. As root,
    pid 1 maps every id of it to itself (a process cannot map more than its own id into its
    own new namespace), so that the run's root owns and can chown what root can outside. The
    two waiting processes end as the run ended: its exit status, or the same signal."""
    import ctypes

    status_r, status_w = os.pipe()  # pid 1 -> outside: the run's wait status
    ask_r, ask_w = os.pipe()  # the run -> pid 1: map my ids (as root)
    done_r, done_w = os.pipe()  # pid 1 -> the run: mapped
    one = os.fork()
    if one:  # outside: waits for pid 1
        _close(ask_r, ask_w, done_r, done_w, status_w)
        _end_as(_wait_for(one), os.read(status_r, 32))
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG SIGKILL: pid 1 (its namespace) ends with it
    run = os.fork()
    if run:  # pid 1
        _close(status_r, ask_w, done_r)
        os.chdir("/")  # holds nothing of the tree below the mounts
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/1/... for the run to follow
        _deaf()
        if os.read(ask_r, 1) == b"m":
            for name in ("uid_map", "gid_map"):
                _write(f"/proc/{run}/{name}", "0 0 4294967295\n")
        os.write(done_w, b".")  # pid 1 is ready: deaf, not dumpable, out of the tree
        _close(ask_r, done_w)
        os.write(status_w, str(_wait_for(run)).encode())
        os._exit(0)
    _close(status_r, status_w, ask_r, done_w)
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing here reaches the host's
    _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    tops = [p for p in readonly if os.path.isdir(p)
            and not any(p != q and _below(p, q) for q in readonly)]
    for folder in writable:
        if os.path.isdir(folder) and any(_below(folder, top) for top in tops):
            _mount(libc, folder, folder, None, MS_BIND | MS_REC)
    for top in tops:
        _mount(libc, top, top, None, MS_BIND | MS_REC)
    for dev in _DEVICES:  # /dev without its devices but these: a raw disk would write anything
        if os.path.exists(dev) and stat.S_ISCHR(os.lstat(dev).st_mode):
            _mount(libc, dev, dev, None, MS_BIND)
    _mount(libc, None, "/dev", None, MS_REMOUNT | MS_BIND | MS_NODEV | _kept_flags("/dev"))
    kept = [f for f in writable if os.path.isdir(f)]
    for point in _mount_points():  # each mount below a top too (a volume inside the checkout)
        if any(_below(point, top) for top in tops) and point not in kept:
            _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY
                   | _kept_flags(point))
    if privileged and uid == 0:
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER|CLONE_NEWNS) failed")
        os.write(ask_w, b"m")
    else:
        _unshare(libc, CLONE_NEWNS, uid, gid, user=True)
        os.write(ask_w, b"-")
    if not os.read(done_r, 1):  # nothing of the project runs before pid 1 is ready
        raise OSError(0, "pid 1 of the run's namespace ended before it was ready")
    _close(ask_w, done_r)
    os.chdir(cwd)  # onto the new mounts: the old folder is the one below them


def _deaf():
    # pid 1 ignores every signal a process of its namespace may send it (the kernel drops
    # those without a handler; Python's own SIGINT handler would be one): only SIGKILL from
    # outside ends it. SIGCHLD keeps its default, or children would be reaped unseen.
    import signal

    for sig in signal.valid_signals():
        if sig not in (signal.SIGCHLD, signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                pass


def _mount_points():
    """The mount points of this mount namespace, innermost last (``/proc/self/mountinfo``;
    octal escapes such as ``\\040`` for a space decoded)."""
    points = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            raw = line.split(b" ")[4]
            points.append(os.fsdecode(re.sub(rb"\\([0-7]{3})",
                                             lambda m: bytes([int(m[1], 8)]), raw)))
    return points


def _close(*fds):
    for fd in fds:
        os.close(fd)


def _wait_for(pid):
    """The wait status of child ``pid``, reaping any other child meanwhile (pid 1 is handed
    every orphan of its namespace)."""
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(NETLESS_FAILED)
        if got == pid:
            return status


def _end_as(status, reported):
    """End this process as the run ended: ``reported`` (what pid 1 sent: the run's wait
    status) when there is one, else ``status`` (pid 1's own: killed with the namespace). Pid 1
    cannot end by a signal it sends itself; this process, outside, can."""
    import signal

    status = int(reported) if reported.isdigit() else status
    if os.WIFSIGNALED(status):
        import resource

        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else NETLESS_FAILED)


def _below(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def _kept_flags(path):
    # a bind remount must repeat the flags a user namespace may not drop (mount(2))
    f = os.statvfs(path).f_flag
    return sum(ms for st, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV),
                                 (os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME),
                                 (os.ST_NODIRATIME, MS_NODIRATIME),
                                 (os.ST_RELATIME, MS_RELATIME)) if f & st)


def _mount(libc, source, target, fstype, flags):
    import ctypes

    enc = [None if x is None else os.fsencode(x) for x in (source, target, fstype)]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                           ctypes.c_void_p]
    if libc.mount(enc[0], enc[1], enc[2], flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount of {target} failed: {os.strerror(err)}")


def refusal(readonly):
    # the first words of the line a run that could not enter its namespaces ends with
    return "cannot contain the run" if readonly else "no network namespace"


def _hint():
    for path, bad in (("/proc/sys/user/max_user_namespaces", "0"),
                      ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
                      ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1")):
        try:
            if Path(path).read_text().strip() == bad:
                return f"; {path} is {bad}"
        except OSError:
            pass
    return ""


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def loopback_up():
    """Set IFF_UP on ``lo`` of the current network namespace (needs CAP_NET_ADMIN there)."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", ifreq)[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def main(argv):
    """The wrapper: ``netless.py -- command [args...]``. Returns only on failure."""
    import signal

    opts = argv[:argv.index("--")] if "--" in argv else ["?"]
    cmd = argv[len(opts) + 1:]
    ro = [o[len("--ro="):] for o in opts if o.startswith("--ro=")]
    rw = [o[len("--rw="):] for o in opts if o.startswith("--rw=")]
    if not cmd or len(ro) + len(rw) + opts.count("--keep-network") != len(opts):
        sys.stderr.write("usage: netless.py [--keep-network] [--ro=DIR]... [--rw=DIR]... "
                         "-- command [args...]\n")
        return 2
    try:
        extra = int(os.environ.get(TEST_FLAGS_ENV) or "0")
        enter(extra, "--keep-network" not in opts, ro, rw)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"andon.netless: {refusal(ro)}: {exc}\n")
        return NETLESS_FAILED
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    sys.stdout.flush()
    try:
        os.execvpe(cmd[0], cmd, os.environ)
    except OSError as exc:
        sys.stderr.write(f"andon.netless: cannot run {cmd[0]}: {exc}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
