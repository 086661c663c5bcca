#!/usr/bin/env python3
"""How many git processes andon starts for one honest attempt of the tests' small project.

Builds the project the end-to-end tests use (``tests/helpers.make_project``: ``src/calc``
with two passing tests, one packet planting ``test_mul_p1.py``, andon.toml ``FAST``: one
red run, one hermetic run, no random-order run; ``--defaults``: the shipped gate settings,
three red runs, three hermetic runs and the random-order one) and drains it with an
in-process ``Runner`` and the tests' honest scripted agent and accepting reviewer
(``runner_for``, ``honest_mul``), as tests/test_e2e_gates.py does.

Every git process andon starts is counted, whichever code path starts it: a ``git`` script
first on PATH appends its arguments to a log and execs the real git. Git's own children
(``upload-pack`` behind a clone, ``pack-objects``, ``index-pack``, ``maintenance run
--auto``) find the real git through its exec path and are not in that log; ``--children``
runs the same measurement again under ``strace -f`` and counts every exec of a git binary.

Prints the processes of the attempt (claim to merge: ``Runner._attempt``) and of the whole
``Runner.run()``, both by subcommand. ``--sites`` also prints, for the attempt, the andon
call site (the innermost frames under ``src/andon``) of each process started from this
interpreter. Exits 1 if the packet was not merged (the count would not be an honest
attempt's).

Run: ``.venv/bin/python benchmarks/git_processes.py [--defaults] [--children] [--sites]``
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers import config_toml, honest_mul, make_project, mul_packet, runner_for

MARK = "=== attempt"
WRAPPER = """#!/bin/sh
printf '%s\\n' "$*" >> "$ANDON_GIT_LOG"
exec {git} "$@"
"""


def subcommand(args: list[str]) -> str:
    """The git subcommand in ``args`` (after ``-c k=v``, ``-C dir`` and other options);
    ``worktree``'s own verb kept."""
    i = 0
    while i < len(args):
        if args[i] in ("-c", "-C", "--git-dir", "--work-tree"):
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            verb = args[i + 1] if args[i] == "worktree" and i + 1 < len(args) else ""
            return f"{args[i]} {verb}".strip()
    return "?"


def drain(work: Path, defaults: bool, sites: list[str] | None) -> tuple[list[str], str]:
    """Make the project under ``work``, run it; (the log lines, the packet's state)."""
    root = work / "project"
    root.mkdir()
    config = config_toml() if defaults else config_toml(red_runs=1, hermetic_runs=1,
                                                         hermetic_random_order=False)
    make_project(root, {"P1-mul": mul_packet()}, config=config)
    log = Path(os.environ["ANDON_GIT_LOG"])
    log.write_text("")
    runner = runner_for(root, honest_mul)
    attempt = runner._attempt

    def marked(packet):
        with log.open("a") as f:
            f.write(f"{MARK} start\n")
        try:
            return attempt(packet)
        finally:
            with log.open("a") as f:
                f.write(f"{MARK} end\n")

    runner._attempt = marked
    if sites is not None:
        _record_sites(sites)
    runner.run()
    row = runner.store.packet("P1")
    return log.read_text().splitlines(), row["state"] if row else "missing"


def _record_sites(sites: list[str]) -> None:
    """Append, for every git process this interpreter starts, its andon call site."""
    init = subprocess.Popen.__init__

    def popen(self, args, *a, **kw):
        if isinstance(args, (list, tuple)) and args and Path(str(args[0])).name == "git":
            frames = [f for f in traceback.extract_stack()[:-1] if "/src/andon/" in f.filename]
            where = " <- ".join(f"{Path(f.filename).stem}.{f.name}:{f.lineno}"
                                for f in reversed(frames[-4:]))
            sites.append(f"{subcommand([str(x) for x in args[1:]]):<16} {where}")
        init(self, args, *a, **kw)

    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]


def counts(lines: list[str]) -> tuple[collections.Counter, collections.Counter]:
    """(git processes by subcommand in the attempt, in the whole run) from the log."""
    inside, whole = collections.Counter(), collections.Counter()
    within = False
    for line in lines:
        if line.startswith(MARK):
            within = line.endswith("start")
            continue
        sub = subcommand(line.split(" "))
        whole[sub] += 1
        if within:
            inside[sub] += 1
    return inside, whole


def children(argv: list[str]) -> collections.Counter:
    """Every exec of a git binary (andon's and git's own children) while ``argv`` runs under
    ``strace -f``, by what was run."""
    with tempfile.NamedTemporaryFile(prefix="git-strace-", delete=False) as out:
        trace = Path(out.name)
    try:
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none",
                        "-s", "120", "-o", str(trace), *argv], check=False,
                       stdout=subprocess.DEVNULL)
        found: collections.Counter = collections.Counter()
        for line in trace.read_text(errors="replace").splitlines():
            if "execve(" not in line or "ENOENT" in line:
                continue
            binary = line.split('execve("', 1)[1].split('"', 1)[0]
            if binary.endswith("/git") or "/git-core/" in binary:
                words = line.split("[", 1)[1].split("]", 1)[0].replace('"', "").split(", ")
                name = Path(binary).name  # git-upload-pack and the like: their own name
                found[f"git {subcommand(words[1:])}" if name == "git" else name] += 1
        return found
    finally:
        trace.unlink(missing_ok=True)


def show(title: str, found: collections.Counter) -> None:
    print(f"{title}: {sum(found.values())}")
    print("  " + ", ".join(f"{sub} {n}" for sub, n in found.most_common()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--defaults", action="store_true",
                    help="the shipped gate settings (3 red, 3 hermetic + random order)")
    ap.add_argument("--children", action="store_true",
                    help="also count git's own children (runs again under strace -f)")
    ap.add_argument("--sites", action="store_true", help="andon's call site of each process")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    real = shutil.which("git")
    if real is None:
        print("git is not on PATH", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="andon-git-count-") as tmp:
        work = Path(tmp)
        (work / "bin").mkdir()
        wrapper = work / "bin" / "git"
        wrapper.write_text(WRAPPER.format(git=real))
        wrapper.chmod(0o755)
        if not args.inner:  # under strace the wrapper's own execs would count twice
            os.environ["PATH"] = f"{work / 'bin'}{os.pathsep}{os.environ['PATH']}"
        os.environ["ANDON_GIT_LOG"] = str(work / "git.log")
        sites: list[str] | None = [] if args.sites else None
        lines, state = drain(work, args.defaults, sites)
    if args.inner:
        return 0
    inside, whole = counts(lines)
    version = subprocess.run([real, "--version"], capture_output=True, text=True).stdout
    print(f"one honest attempt of the tests' small project "
          f"({'shipped gate settings' if args.defaults else 'FAST'}), packet {state}; "
          f"git {version.split()[-1]}")
    show("git processes andon started in the attempt (claim to merge)", inside)
    show("git processes andon started in the whole run (Repo, preflight, attempt, end)", whole)
    if sites is not None:
        print("call sites, whole run:")
        for s in sites:
            print("  " + s)
    if args.children:
        if shutil.which("strace") is None:
            print("--children: strace is not installed")
        else:
            argv = [sys.executable, __file__, "--inner", *(["--defaults"] if args.defaults
                                                           else [])]
            show("every exec of a git binary in the whole run, git's own children included "
                 "(strace -f; the project's own set-up commits too)", children(argv))
    return 0 if state == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
