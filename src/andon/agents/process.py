"""Run one agent process the harness's way; every adapter uses this.

The process gets its own session (process group), reads stdin from a file, and its stdout
and stderr are streamed to a transcript on disk up to ``max_bytes`` (the rest is counted and
dropped, so a runaway agent cannot fill memory or disk). On timeout — and also after a
normal exit, so background children cannot keep writing into the worktree while the harness
gates it — the whole process group is killed with SIGKILL. Then, on Linux, so are the
processes the agent started in sessions of their own (``setsid``, a double fork), which the
group kill misses: the runner is a child subreaper, so they are its children by then (see
``procgroup.kill_leftovers``); how many were killed is in ``ProcessRun.leftovers_killed``.
Elsewhere only the group is killed. Bytes are kept as they are (non-UTF-8 output survives).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, BinaryIO

from .. import plain_file
from ..contain import netless
from ..contain.procgroup import before_child, end_child, wait_unreaped
from ..sandbox import launch
from ..sandbox.limits import Caps
from ..sandbox.netproxy import NetProxy
from ..sandbox.plan import Plan

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024
READER_JOIN_S = 30.0  # how long the output readers may drain after the agent has ended


@dataclass(frozen=True)
class ProcessRun:
    exit_status: int | None   # None when killed for the timeout; -N when ended by signal N
    timed_out: bool
    duration_s: float         # wall seconds
    transcript_path: Path
    bytes_written: int
    bytes_dropped: int        # output past max_bytes, counted but not kept
    stderr_path: Path | None = None   # set when stderr was kept apart from the transcript
    leftovers_killed: int = 0  # processes the agent left running outside its group, killed
    leftovers_left: int = 0    # ...and those still running when the bounded sweep gave up
    sandbox: str = "none"      # the level achieved: "none", "fs" or "fs+net"
    limit_hit: str | None = None  # the [agent] cap the stage hit (memory_mb, max_processes)
    network: tuple[str, ...] = ()  # what andon's proxy refused and let through (notes)
    unenforced: tuple[str, ...] = ()  # the [agent] caps nothing enforced here, and why


def stage_notes(p: ProcessRun, plan: Plan | None) -> list[str]:
    """The lines a stage's usage notes start with, in order: the cap it hit, the caps
    nothing enforced, the sandbox level achieved (``Plan.describe``), what andon's proxy
    refused and let through, the processes the agent left running."""
    notes = [f"ended at a limit: {p.limit_hit}"] if p.limit_hit else []
    notes += p.unenforced
    if plan is not None:
        notes.append(plan.describe())
    notes += p.network
    if note := leftover_note(p):
        notes.append(note)
    return notes


def leftover_note(p: ProcessRun) -> str | None:
    """The line for the stage's usage notes when the agent left processes running."""
    if not p.leftovers_killed and not p.leftovers_left:
        return None
    n = p.leftovers_killed
    note = f"killed {n} process{'' if n == 1 else 'es'} the agent left running"
    if p.leftovers_left:
        note += f"; {p.leftovers_left} still running when andon gave up"
    return note


class _Sink:
    """Writes one output stream to a file: the first bytes up to a cap, and optionally the
    last ``keep_tail`` bytes (held in a bounded buffer, written when the stream ends)."""

    def __init__(self, f: BinaryIO, max_bytes: int, keep_tail: int):
        self.f, self.keep_tail = f, max(0, min(keep_tail, max_bytes))
        self.head_cap = max_bytes - self.keep_tail
        self.written = self.dropped = 0
        self.tail = bytearray()

    def write(self, chunk: bytes) -> None:
        keep = max(0, min(len(chunk), self.head_cap - self.written))
        if keep:
            self.f.write(chunk[:keep])
            self.written += keep
        rest = chunk[keep:]
        if not rest:
            return
        if not self.keep_tail:
            self.dropped += len(rest)
            return
        self.tail += rest
        over = len(self.tail) - self.keep_tail
        if over > 0:
            del self.tail[:over]
            self.dropped += over

    def close(self) -> None:
        if self.tail:
            if self.dropped:
                self.f.write(f"\n[andon: {self.dropped} bytes dropped]\n".encode())
            self.f.write(self.tail)
            self.written += len(self.tail)


def run_process(argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdin_path: Path,
                transcript_path: Path, timeout_s: float,
                max_bytes: int = DEFAULT_MAX_BYTES, *, stderr_path: Path | None = None,
                keep_tail: int = 0, cut_network: bool = False,
                sandbox: Plan | None = None) -> ProcessRun:
    """Run ``argv`` in ``cwd`` and return what happened. Raises OSError if it cannot start
    (for example the executable does not exist).

    ``stderr_path``: stderr goes to that file (with its own cap of ``max_bytes``) instead of
    into the transcript, so a machine-readable stdout stays parseable. ``keep_tail``: when the
    output passes ``max_bytes``, its last ``keep_tail`` bytes are kept as well, written after
    the first ``max_bytes - keep_tail`` bytes behind a line ``[andon: N bytes dropped]`` —
    agents print their result (and cost) last. Memory stays bounded by ``keep_tail``.
    ``cut_network``: run it through ``netless.wrap`` (its own network namespace, loopback
    only; same pid). The caller checks ``netless.available()`` first; where it is not, the
    wrapper exits 125 and says why on stderr — never a run with the network.
    ``sandbox``: the stage's plan (``andon.sandbox``): the command runs inside bubblewrap at
    its level, capped by its ``memory_mb`` / ``max_processes`` (``ProcessRun.limit_hit``
    names a cap it hit; the stage was killed then). A plan with ``allow_hosts`` at
    ``fs+net`` gets andon's filtering proxy for the length of the run
    (``sandbox.netproxy``); ``ProcessRun.network`` says what it refused and let through.
    """
    proxy = None
    if sandbox is not None and sandbox.proxied:
        proxy = NetProxy(sandbox.allow_hosts or ())
        sandbox = sandbox.with_proxy(proxy.folder)
    try:
        run = _run(argv, cwd, env, stdin_path, transcript_path, timeout_s, max_bytes,
                   stderr_path, keep_tail, cut_network, sandbox)
    finally:
        if proxy is not None:
            proxy.close()
    return replace(run, network=tuple(proxy.notes())) if proxy is not None else run


def _run(argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdin_path: Path,
         transcript_path: Path, timeout_s: float, max_bytes: int, stderr_path: Path | None,
         keep_tail: int, cut_network: bool, sandbox: Plan | None) -> ProcessRun:
    caps = None
    if sandbox is not None:
        argv, env = sandbox.wrap(list(argv), Path(cwd), env)
        cut_network = cut_network and sandbox.level != "fs+net"  # bwrap cut it already
        if sandbox.memory_mb or sandbox.max_processes:
            caps = Caps(sandbox.memory_mb, sandbox.max_processes)
    if cut_network:
        argv = netless.wrap(list(argv))
    if caps is not None and caps.launcher_args():
        argv = launch.wrap(list(argv), caps.launcher_args())
    # Set once, here rather than in the Runner: only a process that runs agents needs it
    # (and every adapter's agent runs through this function, in tests as in `andon run`).
    known = before_child()  # this process's children before the agent: never the agent's
    started = time.monotonic()
    with contextlib.ExitStack() as files:
        # in the evidence, which the agent may write too: a link there is not written through
        out = _Sink(files.enter_context(plain_file.create(transcript_path)), max_bytes,
                    keep_tail)
        err = (_Sink(files.enter_context(plain_file.create(stderr_path)), max_bytes, keep_tail)
               if stderr_path else None)
        stdin = files.enter_context(open(stdin_path, "rb"))
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE if err else subprocess.STDOUT,
                                    env=dict(env), start_new_session=True)
        except OSError:
            if caps is not None:
                caps.close()
            raise
        if caps is not None:
            caps.watch()
        # If the runner is killed (kill -9) the agent's group lives on; this file lets the
        # next runner find and end it (see procgroup.kill_leftover_group): its group, and
        # where it works
        pid_file = transcript_path.with_suffix(".pid")
        plain_file.write(pid_file, f"{proc.pid}\n{Path(cwd).resolve()}\n")

        def pump(stream: IO[bytes], sink: _Sink) -> None:
            while chunk := stream.read1(CHUNK):  # type: ignore[attr-defined]
                sink.write(chunk)

        readers = [threading.Thread(target=pump, args=(proc.stdout, out), daemon=True)]
        if err:
            readers.append(threading.Thread(target=pump, args=(proc.stderr, err),
                                            daemon=True))
        for r in readers:
            r.start()
        leftovers = (0, 0)
        try:
            timed_out = wait_unreaped(proc, timeout_s)
        finally:
            # Before the readers are joined: a helper may hold the output pipe open.
            leftovers = end_child(proc, known, sandboxed=sandbox is not None
                                  and sandbox.level != "none")
            if caps is not None:
                caps.close()
            for r in readers:
                # a process out of reach (no subreaper here, or the sweep gave up) may hold
                # the pipe open for ever: the transcript then ends here rather than the run
                r.join(READER_JOIN_S)
            out.close()
            if err:
                err.close()
            pid_file.unlink(missing_ok=True)
    return ProcessRun(None if timed_out else proc.returncode, timed_out,
                      time.monotonic() - started, transcript_path, out.written, out.dropped,
                      stderr_path, *leftovers,
                      sandbox=sandbox.level if sandbox is not None else "none",
                      limit_hit=caps.hit() if caps is not None else None,
                      unenforced=tuple(caps.unenforced) if caps is not None else ())
