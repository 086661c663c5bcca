"""The launcher of a capped agent stage: join its cgroups, set its rlimits, exec the agent.

Where only cgroups are to be joined, ``wrap`` uses a /bin/sh one-liner that does the same
(``echo $$ > DIR/cgroup.procs``, then ``exec``). Otherwise it runs as a script, isolated
like ``contain/netless.py`` (``python -I -S launch.py``), so the tree the agent works in
cannot replace it::

    launch.py [--cgroup DIR]... [--nproc N] [--as BYTES] -- command [args...]

It writes its own pid to ``DIR/cgroup.procs`` for each group (before exec: every process the
agent starts is in the group from its first instruction), sets ``RLIMIT_NPROC`` /
``RLIMIT_AS`` when asked, resets SIGPIPE and SIGXFSZ to their defaults (Python ignores them
and an ignored signal survives exec) and execs the command: same pid, so the caller's wait
and process-group kill work unchanged. Exit 125 when it cannot join a group or set a limit
(a line on stderr says why), 127 when the command cannot be executed, 2 for a bad argv.
"""

import os
import resource
import signal
import sys
from pathlib import Path

LAUNCH_FAILED = 125
SCRIPT = Path(__file__).resolve()


# Only cgroups to join: the same in /bin/sh, which starts in a few ms where an interpreter
# takes 50-250 (the cost of every agent stage; benchmarks/sandbox.py).
SH_JOIN = ('while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; '
           'shift; exec "$@"')


def wrap(argv, options):
    """``argv`` behind the launcher with ``options`` (``Caps.launcher_args()``): a /bin/sh
    one-liner when they only name cgroups, else this script."""
    if options and all(k == "--cgroup" for k in options[::2]):
        return ["/bin/sh", "-c", SH_JOIN, "andon-launch", *options[1::2], "--", *argv]
    return [sys.executable, "-I", "-S", str(SCRIPT), *options, "--", *argv]


def main(argv):
    if "--" not in argv:
        sys.stderr.write("usage: launch.py [--cgroup DIR]... [--nproc N] [--as BYTES] -- cmd\n")
        return 2
    cut = argv.index("--")
    opts, cmd = argv[:cut], argv[cut + 1:]
    if not cmd or len(opts) % 2:
        sys.stderr.write("launch.py: bad arguments\n")
        return 2
    try:
        for key, value in zip(opts[::2], opts[1::2], strict=False):
            if key == "--cgroup":
                with open(os.path.join(value, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            elif key == "--nproc":
                resource.setrlimit(resource.RLIMIT_NPROC, (int(value), int(value)))
            elif key == "--as":
                resource.setrlimit(resource.RLIMIT_AS, (int(value), int(value)))
            else:
                sys.stderr.write(f"launch.py: unknown option {key}\n")
                return 2
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"andon.sandbox: cannot cap the agent: {exc}\n")
        return LAUNCH_FAILED
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvpe(cmd[0], cmd, os.environ)
    except OSError as exc:
        sys.stderr.write(f"andon.sandbox: cannot run {cmd[0]}: {exc}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
