"""``[test] setup``: the project's set-up step, run in every clone before its tests.

Projects whose version comes from git (hatch-vcs, setuptools-scm: a ``_version.py`` kept out of
git), or with compiled extensions, do not import from a fresh clone. ``[test] setup`` is an argv
the harness runs in the clone (worktree, preflight clone, hermetic clone, base re-run clone)
before the first test run there: ``"python"`` as its first word is the test command's
interpreter; ``{scratch}`` in any word is a throwaway directory outside the clone (for a wheel
or prefix nobody needs afterwards). The environment is the harness's (runners/pytest.py
``harness_env``: no inherited variables, a fresh HOME, the ``[test] pythonpath``).

**Timed, recorded.** ``SetupRun`` holds argv, cwd, exit status, seconds, the log and its tail.

**Cached where safe.** The files the step creates (untracked or ignored afterwards, not before)
are kept in ``.andon/setup-cache/<key>/`` when they are few and small. The key is the argv, the
interpreter, the tests' environment (``envprint.digest`` of its fingerprint, as the results
cache names it: an extension built against an upgraded package is built again), and the bytes
of the set-up inputs in the clone (``pyproject.toml``, ``setup.py``, ``setup.cfg``, and the
files named in ``[test] setup_inputs``): another clone with the same key gets the files copied
in instead of running the step. Where the environment is not known (a wrapper test command
such as ``uv run``; ``andon validate``, experiments, the plan stage and a merge check, which
take no fingerprint) the key names none, as before: a build made before an upgrade is
then copied after it. A version computed from the commit is then the one of the first
commit set up (the other limit of this cache; ``setup_cache = false`` runs the step in every
clone). A clone already set up with the same key in this process (and whose generated files
are still there) is not set up again.

**Only trusted code is kept.** A set-up in a clone holding an agent's change reads the cache
but writes nothing to it.

**Failure.** ``ensure`` returns a SetupRun whose ``problem`` says why (exit status and the first
error line of the output); the caller records it instead of running the tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import plain_file, reaper, tempdir
from .config import STATE_DIR, Config
from .contain.interpreter import python_of
from .contain.procgroup import before_child, end_child, wait_unreaped
from .git import watch
from .runners.pytest import TAIL_LINES, harness_env

INPUTS = ("pyproject.toml", "setup.py", "setup.cfg")
CACHE_MAX_FILES = 500
CACHE_MAX_BYTES = 20 * 1024 * 1024

_done: dict[str, tuple[str, list[str]]] = {}  # clone path -> (key, files it generated)


@dataclass
class SetupRun:
    """One set-up of one clone: run (``cached`` False) or copied from the cache (True)."""

    argv: list[str]
    cwd: str
    exit_status: int | None  # None: timed out, or copied from the cache
    duration_s: float        # wall seconds
    log_path: Path | None
    output_tail: str
    cached: bool
    key: str
    files: list[str]         # clone-relative files the step generated
    problem: str | None = None

    def to_evidence(self) -> dict:
        return {"argv": self.argv, "cwd": self.cwd, "exit_status": self.exit_status,
                "duration_s": round(self.duration_s, 3),
                "log_path": str(self.log_path) if self.log_path else None,
                "output_tail": self.output_tail, "cached": self.cached, "key": self.key,
                "files": self.files[:50], "problem": self.problem}


def _argv(config: Config, scratch: Path) -> list[str]:
    argv = [w.replace("{scratch}", str(scratch)) for w in config.test.setup]
    if argv and argv[0] == "python":
        argv[0] = python_of(config.test_argv()) or config.test_argv()[0]
    return argv


def key_of(config: Config, cwd: Path, env_digest: str | None) -> str:
    """The cache key of setting ``cwd`` up in the environment ``env_digest`` names (see the
    module docstring)."""
    h = hashlib.sha256(json.dumps([config.test.setup, python_of(config.test_argv()),
                                   env_digest]).encode())
    for rel in (*INPUTS, *config.test.setup_inputs):
        p = Path(cwd) / rel
        h.update(rel.encode() + b"\0")
        h.update(p.read_bytes() if p.is_file() else b"<none>")
    return h.hexdigest()[:20]


def _untracked(cwd: Path) -> set[str]:
    # watched (git/watch.py): the set-up command ran project code, which may have left a
    # .gitignore git would wait on for ever
    out = watch.run(["git", "status", "--porcelain", "--ignored", "-z",
                         "--untracked-files=all"], cwd, None, os.environ)
    entries = out.stdout.decode("utf-8", "replace").split("\0")
    return {e[3:] for e in entries if e[:2] in ("??", "!!")}


def _cache_root(evidence_dir: Path) -> Path | None:
    return next((p / "setup-cache" for p in Path(evidence_dir).parents if p.name == STATE_DIR),
                None)


# pip's own wrapper around a failed build: the build's error is further down
_PIP_WRAPPERS = ("error: subprocess-exited-with-error", "error: metadata-generation-failed")


def _first_error(text: str) -> str:
    """The line that says what went wrong: pip's own ``ERROR:`` or an exception line first
    (pip wraps a failed build in a generic "error: subprocess-exited-with-error" that names
    nothing), else any line with an error, else the last line."""
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and ln.strip() not in _PIP_WRAPPERS]
    for specific in (True, False):
        for ln in lines:
            if specific and (ln.startswith("ERROR:") or re.match(r"[\w.]*Error: ", ln)):
                return ln[:300]
            if not specific and ("Error" in ln or "error:" in ln.lower()):
                return ln[:300]
    return lines[-1][:300] if lines else "no output"


def _fetches_backend(argv: list[str]) -> bool:
    """A pip build with build isolation: pip fetches the build backend from the index."""
    return "pip" in argv and any(w in argv for w in ("wheel", "install")) \
        and "--no-build-isolation" not in argv


def ensure(config: Config, cwd: Path, evidence_dir: Path, name: str,
           env_digest: str | None = None, agent_code: bool = False) -> SetupRun | None:
    """Set ``cwd`` up for its tests (see the module docstring); None when there is nothing
    to do (no ``[test] setup``, or already set up). ``env_digest``: the tests' environment
    (``envprint.digest``; None: unknown, and the key names none). ``agent_code``: ``cwd``
    holds an agent's change; what its set-up generates is never kept for other clones (the
    key does not name every file a build reads: the base's next clone would get the agent's
    build). Writes ``<evidence_dir>/<name>.setup.log``. Never raises for what the step
    does."""
    if not config.test.setup:
        return None
    cwd = Path(cwd).absolute()
    key = key_of(config, cwd, env_digest)
    done = _done.get(str(cwd))
    if done and done[0] == key and all((cwd / f).exists() for f in done[1]):
        return None
    root = _cache_root(evidence_dir) if config.test.setup_cache else None
    cached = root / key if root else None
    started = time.monotonic()
    if cached is not None and (files := _restore(cached, cwd)) is not None:
        _done[str(cwd)] = (key, files)
        return SetupRun(_argv(config, Path("{scratch}")), str(cwd), None,
                        time.monotonic() - started, None, f"copied {len(files)} file(s) "
                        f"from the set-up cache {cached}", True, key, files)
    return _run(config, cwd, evidence_dir, name, key, None if agent_code else cached)


def _restore(cached: Path, cwd: Path) -> list[str] | None:
    """Copy the set-up cache entry ``cached`` into the clone ``cwd``; the clone-relative
    files copied, or None when there is no entry or it is not as :func:`_store` writes one
    (then it is discarded and the step runs). ``.andon/`` is reachable by absolute path
    from the code under test: ``files.json`` must list relative paths that stay inside the
    clone, each a regular file in the entry (no link on the way), within the entry's caps."""
    try:
        files = json.loads(plain_file.read(cached / "files.json", 1 << 20))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        files = None
    top = os.path.realpath(cached / "files")
    found: dict[str, tuple[bytes, int]] = {}
    listed = isinstance(files, list) and len(files) <= CACHE_MAX_FILES \
        and all(isinstance(f, str) and _inside(f) for f in files)
    if listed:
        try:
            for rel in files:
                src = cached / "files" / rel
                if not os.path.realpath(src).startswith(top + os.sep):
                    raise plain_file.NotPlain(src, "reached through a link")
                with plain_file.open_regular(src) as f:
                    found[rel] = (f.read(CACHE_MAX_BYTES + 1), os.fstat(f.fileno()).st_mode)
        except OSError:
            found.clear()
    if not listed or len(found) != len(files) or \
            sum(len(d) for d, _ in found.values()) > CACHE_MAX_BYTES:
        reaper.discard(cached)  # not one _store wrote: the step runs and writes a new one
        return None
    for rel, (data, mode) in found.items():
        dest = cwd / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.realpath(dest.parent).startswith(os.path.realpath(cwd) + os.sep) \
                and os.path.realpath(dest.parent) != os.path.realpath(cwd):
            return None  # a link in the clone leads out of it: the step runs instead
        with plain_file.create(dest) as out:
            out.write(data)
            os.fchmod(out.fileno(), stat.S_IMODE(mode) & 0o777)
    return list(found)


def _inside(rel: str) -> bool:
    # a clone-relative path as _store writes them: relative, no "..", no empty part
    parts = rel.split("/")
    return bool(rel) and "\0" not in rel and not rel.startswith("/") \
        and all(p not in ("", ".", "..") for p in parts)


def _run(config: Config, cwd: Path, evidence_dir: Path, name: str, key: str,
         cached: Path | None) -> SetupRun:
    before = _untracked(cwd)
    scratch = Path(tempfile.mkdtemp(dir=tempdir.harness_dir()))
    argv = _argv(config, scratch / "out")
    log_path = Path(evidence_dir) / f"{name}.setup.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = harness_env(scratch / "home", [cwd / p for p in config.test.pythonpath])
    started = time.monotonic()
    try:
        known = before_child()
        # read back through it, not by name: what the step runs can replace the name
        with plain_file.create(log_path, readable=True) as log:
            try:
                proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            except OSError as exc:
                log.write(f"cannot start {argv[0]}: {exc.strerror}\n".encode())
                proc = None
            if proc is not None:
                try:
                    timed_out = wait_unreaped(proc, config.test.setup_timeout_s)
                finally:
                    end_child(proc, known)
            log.seek(0)
            output = log.read().decode(errors="replace")
    finally:
        reaper.discard(scratch)  # the project's set-up wrote there: any depth, any mode
    duration = time.monotonic() - started
    tail = "\n".join(output.splitlines()[-TAIL_LINES:])
    status = None if proc is None or timed_out else proc.returncode
    files = sorted(_untracked(cwd) - before)
    run = SetupRun(argv, str(cwd), status, duration, log_path, tail, False, key, files)
    if proc is None:
        run.problem = (f"[test] setup could not start: {tail.strip()}; install it, or set "
                       "[test] setup in andon.toml to a command that exists here")
    elif timed_out:
        run.problem = (f"[test] setup timed out after {config.test.setup_timeout_s:g} s; "
                       f"raise [test] setup_timeout_s in andon.toml (log: {log_path})")
    elif status != 0:
        run.problem = (f"[test] setup {' '.join(config.test.setup)} failed (exit status "
                       f"{status}): {_first_error(output)}")
        if "top-level packages discovered in a flat-layout" in output:
            run.problem += (f" ({config.andon.packets_dir}/ holds .py files, so setuptools' "
                            "automatic discovery counts it as a package: name your packages "
                            "in pyproject.toml, [tool.setuptools.packages.find] include = "
                            "[\"yourpackage*\"])")
        elif _fetches_backend(config.test.setup):
            run.problem += (f" (this build fetches the build backend from the package index; "
                            f"to build offline install the backend for {argv[0]} and run "
                            "`andon init --force`)")
        else:
            run.problem += (f"; the whole output is in {log_path}: fix the build, or set "
                            "[test] setup in andon.toml to the step this project needs "
                            "(`andon init --force` writes the one it detects; `setup = []` "
                            "when none)")
    if run.problem is None:
        _done[str(cwd)] = (key, files)
        if cached is not None:
            _store(cwd, files, cached)
    return run


def _store(cwd: Path, files: list[str], dest: Path) -> None:
    """Keep ``files`` (clone-relative) under ``dest`` when they are few and small enough."""
    paths = [cwd / f for f in files]
    if len(paths) > CACHE_MAX_FILES or any(p.is_symlink() or not p.is_file() for p in paths):
        return
    if sum(p.stat().st_size for p in paths) > CACHE_MAX_BYTES:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent))
    try:
        for rel, p in zip(files, paths, strict=True):
            (tmp / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, tmp / "files" / rel)
        (tmp / "files.json").write_text(json.dumps(files))
        os.replace(tmp, dest)  # whole or not at all; a concurrent writer's copy is as good
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
