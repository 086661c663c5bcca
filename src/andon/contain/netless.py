"""Run a command without the network: in a new network namespace whose only interface is an
up loopback (catalogue kind 16: fetching the upstream fix, installing a package).

``wrap(argv)`` gives the argv that does it::

    [sys.executable, "-I", "-S", ".../andon/contain/netless.py", "--", *argv]

The wrapper (this file, run as a script) calls ``unshare(2)`` through ctypes, brings ``lo``
up with the SIOCGIFFLAGS/SIOCSIFFLAGS ioctls, resets SIGPIPE and SIGXFSZ (Python ignores them,
and an ignored signal survives exec) and then ``execvpe``s ``argv`` with its environment and
cwd unchanged. Exec keeps the pid, so the caller's pidfd wait and process-group kill work as
for an unwrapped command; the exit status (or death by signal) is the command's own. It runs
isolated (``-I -S``: no PYTHONPATH, no site, no script dir on sys.path), so a tree holding
its own ``andon`` package cannot replace it.

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
import sys
import threading
from pathlib import Path

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
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


def wrap(argv):
    """``argv`` (list of str, argv[0] found on the command's PATH) prefixed with the wrapper
    that runs it without network. Does not check that namespaces are available here."""
    return [sys.executable, "-I", "-S", str(WRAPPER), "--", *argv]


def probe(env=None, timeout_s=PROBE_TIMEOUT_S):
    """Run the wrapper on ``/bin/true`` now: ``(True, "")`` if it worked, else ``(False,
    reason)`` with the kernel's refusal (or why the probe could not run). ``env``: the
    wrapper's whole environment (default: a fixed PATH, plus ANDON_NETLESS_TEST_FLAGS if set
    here). Never raises."""
    import subprocess

    if not sys.platform.startswith("linux"):
        return False, f"network namespaces exist only on Linux (this is {sys.platform})"
    if env is None:
        env = {"PATH": "/usr/bin:/bin"}
        if os.environ.get(TEST_FLAGS_ENV):  # lets a test make the kernel refuse, for real
            env[TEST_FLAGS_ENV] = os.environ[TEST_FLAGS_ENV]
    try:
        p = subprocess.run(wrap(["/bin/true"]), capture_output=True, text=True,
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


def enter(extra_flags=0):
    """Move this process into a new network namespace (and, unless privileged, a new user
    namespace with uid/gid mapped to themselves) and bring its loopback up. Raises OSError
    with the kernel's reason."""
    import ctypes

    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    if libc.unshare(CLONE_NEWNET | extra_flags) != 0:
        first = ctypes.get_errno()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | extra_flags) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare(CLONE_NEWNET) failed ({os.strerror(first)}) and "
                               f"unshare(CLONE_NEWUSER|CLONE_NEWNET) failed ({os.strerror(err)})"
                               + _hint())
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    loopback_up()


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

    if len(argv) < 2 or argv[0] != "--":
        sys.stderr.write("usage: netless.py -- command [args...]\n")
        return 2
    cmd = argv[1:]
    try:
        extra = int(os.environ.get(TEST_FLAGS_ENV) or "0")
        enter(extra)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"andon.netless: no network namespace: {exc}\n")
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
