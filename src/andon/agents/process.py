"""Run one agent process the harness's way; every adapter uses this.

The process gets its own session (process group), reads stdin from a file, and its stdout
and stderr are streamed to a transcript on disk up to ``max_bytes`` (the rest is counted and
dropped, so a runaway agent cannot fill memory or disk). On timeout — and also after a
normal exit, so background children cannot keep writing into the worktree while the harness
gates it — the whole process group is killed with SIGKILL. Bytes are kept as they are
(non-UTF-8 output survives).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..procgroup import kill_group, wait_unreaped

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024


@dataclass(frozen=True)
class ProcessRun:
    exit_status: int | None   # None when killed for the timeout; -N when ended by signal N
    timed_out: bool
    duration_s: float         # wall seconds
    transcript_path: Path
    bytes_written: int
    bytes_dropped: int        # output past max_bytes, counted but not kept


def run_process(argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdin_path: Path,
                transcript_path: Path, timeout_s: float,
                max_bytes: int = DEFAULT_MAX_BYTES) -> ProcessRun:
    """Run ``argv`` in ``cwd`` and return what happened. Raises OSError if it cannot start
    (for example the executable does not exist)."""
    started = time.monotonic()
    counts = [0, 0]
    with open(transcript_path, "wb") as out, open(stdin_path, "rb") as stdin:
        proc = subprocess.Popen(list(argv), cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=dict(env),
                                start_new_session=True)

        def pump() -> None:
            assert proc.stdout is not None
            while chunk := proc.stdout.read1(CHUNK):
                keep = max(0, min(len(chunk), max_bytes - counts[0]))
                if keep:
                    out.write(chunk[:keep])
                counts[0] += keep
                counts[1] += len(chunk) - keep

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            timed_out = wait_unreaped(proc, timeout_s)
        finally:
            kill_group(proc.pid)
            proc.wait()
            reader.join()
    return ProcessRun(None if timed_out else proc.returncode, timed_out,
                      time.monotonic() - started, transcript_path, counts[0], counts[1])
