"""A fingerprint of the Python environment the harness tests with, outside every worktree.

An agent runs as the same user as andon: it can drop a ``.pth`` (or a ``sitecustomize.py``)
into the site-packages of the interpreter the suite runs on, or edit an installed module, and
every later test run imports it before any test. Nothing of that is in the worktree, so no
gate that reads the candidate sees it. The runner takes this fingerprint when a run starts
and compares it after every agent stage and every gate that ran agent code: a difference is
an ``outside-worktree`` finding (see :func:`describe`), and andon never deletes anything in
the user's environment itself — it prints the commands that restore it.

What is watched, for the interpreter of ``[test] command`` (where it looks:
contain/envlayout.py):

- its site-packages folders, every file recursively (byte-code caches too): path, size,
  ``mtime_ns``, ``ctime_ns`` (no process can set it back, so a rewrite of the same size with
  the old mtime put back is seen) and inode; ``.pth`` files and ``*customize.py`` also by
  content (SHA-256); a link also by what it leads to, and a linked folder walked where it
  is; a site folder that does not exist yet as ``"absent"``: creating it is a change;
- its user site folder (computed from ``HOME``/``PYTHONUSERBASE`` *now*, not when andon
  started), likewise; ``encodings`` recursively (every process imports it from source);
- code installed in development mode (the folders editable finders map to, the start-up
  path entries a ``.pth`` adds), every file recursively, less hidden folders (``.git``,
  ``.venv``: no import names them);
- the other folders on its start-up ``sys.path`` outside the user's checkout and its
  executables' folders: their top level and its ``__pycache__`` only (the standard library,
  ``lib-dynload``, ``bin``);
- the files the interpreter reads at start-up from no watched folder (``pyvenv.cfg``,
  ``._pth``, a start-up path entry that is a zip or missing) by content.

Byte-code caches (``__pycache__`` folders, ``*.pyc`` files) are watched like any file, since
Python loads a cache in place of its source; :meth:`Watch.changed` then leaves out the
honest ones — a cache deleted, a ``__pycache__`` folder made, a new or rewritten cache that
is the faithful compilation of its source or that this interpreter never loads
(contain/bytecode.py) — so a person or an agent compiling modules is no finding. Folder
mtimes are not watched: they change with every honest cache written.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shlex
import stat
import sys
from pathlib import Path

from . import bytecode
from .envlayout import Layout, layout

__all__ = ["Layout", "Watch", "changes", "describe", "digest", "fingerprint", "layout",
           "watch"]

# read by site.py or the interpreter's start-up whatever their times say
_HASHED_SUFFIXES = (".pth", "customize.py", "._pth", "pyvenv.cfg")

# a file read by content past this is marked by its stat alone (its ctime moves with any
# rewrite), as every module in site-packages is: a sparse 64 GiB x.pth costs no disk and
# would not fit in memory, and the shared libraries a start-up maps (libc, libm, ld.so,
# the locale's LC_CTYPE: 1.8 MB on the tests' venv) were a quarter of each walk's time
HASH_CAP_BYTES = 64 * 1024


def fingerprint(where: Layout) -> dict[str, object]:
    """Absolute path → marker of everything :class:`Layout` names (see the module doc).
    A folder is ``"dir"``, a file the tuple ``(size, mtime_ns, ctime_ns, inode)`` (the
    string ``"size:mtime_ns:ctime_ns:inode:sha256"`` for ``.pth``, ``*customize.py``,
    ``._pth`` and ``pyvenv.cfg``), a link ``"size:mtime_ns:ctime_ns:inode"`` plus ``->`` and
    what it leads to (a file's marker, a folder's identity: its contents are walked); the
    prefix's ``pyvenv.cfg`` and each of ``Layout.files`` ``"sha256:<hex>"`` (a stat marker
    past ``HASH_CAP_BYTES``, ``"mode:<octal>"`` when not a regular file); a missing site
    folder, user site or named file ``"absent"``. Unreadable folders contribute what can be
    read; only regular files are read (a FIFO would block). Markers are compared, never
    parsed. About 50 ms for a venv of 16,000 entries, 30 of them in lstat (one per file;
    benchmarks/envprint.py)."""
    out: dict[str, object] = {}
    # the venv's settings: include-system-site-packages = true puts an unwatched folder on
    # every test process's path
    for f in (os.path.join(where.prefix, "pyvenv.cfg"), *where.files):
        out[f] = _content(f)
    linked: list[str] = []
    for d in (*where.site, *([where.user_site] if where.user_site else [])):
        if os.path.isdir(d):
            out[d] = "dir"
            _walk(d, out, recursive=True, linked=linked)
        else:
            out[d] = "absent"
    for d in where.deep:
        _walk(d, out, recursive=True, linked=linked)
    for d in where.sources:
        # the checkout and the worktrees may lie below a source folder: the gates' business
        real = os.path.realpath(d)
        inside = {os.path.join(d, os.path.relpath(x, real)) for x in where.exclude
                  if Path(x).is_relative_to(real)}
        _walk(d, out, recursive=True, linked=linked, prune=inside or True)
    # a folder a site folder links to is walked where it is, once (links may loop); not
    # one in the checkout or a worktree, the gates' business
    seen = {os.path.realpath(d) for d in (*where.site, *where.deep, *where.sources)}
    while linked:
        real = os.path.realpath(linked.pop())
        if real in seen or not os.path.isdir(real) or any(
                Path(real).is_relative_to(x) for x in where.exclude):
            continue
        seen.add(real)
        _walk(real, out, recursive=True, linked=linked)
    for d in where.top:
        _walk(d, out, recursive=False)
    return out


def _content(path: str) -> str:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return f"mode:{st.st_mode:o}"
        digest = _sha256(path, st)
        return "sha256:" + digest if digest else _marker(st, st.st_ino)
    except OSError:
        return "absent"


def _sha256(path: str, st: os.stat_result) -> str | None:
    """The hex digest of a regular file of at most HASH_CAP_BYTES, else None."""
    if st.st_size > HASH_CAP_BYTES:
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(HASH_CAP_BYTES + 1)).hexdigest()


def _walk(folder: str, out: dict[str, object], recursive: bool,
          linked: list[str] | None = None, prune: bool | set[str] = False) -> None:
    # Not treewalk.entries: its generator, callbacks and relative paths cost about half of a
    # fingerprint, taken ten times an attempt over venvs of 15,000+ entries (issue 18). Its
    # own stack all the same (no recursion limit), folders before what they hold.
    stack = [folder]
    while stack:
        where = stack.pop()
        try:
            with os.scandir(where) as it:
                found = list(it)  # closed before going on: no open folder per level
        except OSError:
            continue
        for e in found:
            try:
                if e.is_dir(follow_symlinks=False):
                    # one the walk cannot list hides its files, which Python opens by path
                    out[e.path] = ("dir" if os.access(e.path, os.R_OK | os.X_OK)
                                   else "dir:unlistable")
                    # top level only: the folder's own files and the caches Python loads
                    # in their place; a source folder (``prune``) without the folders no
                    # import can name (hidden ones: .git, .venv) and the checkout or
                    # worktrees below it. Nothing a file inside can make skipped (a
                    # pyvenv.cfg dropped into a __pycache__ hid its forged caches)
                    if prune and (e.name[0] == "." or (prune is not True and e.path in prune)):
                        continue
                    if recursive or (where == folder and e.name == "__pycache__"):
                        stack.append(e.path)
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                out[e.path] = _link_marker(e.path, st, linked)
            elif e.name.endswith(_HASHED_SUFFIXES) and stat.S_ISREG(st.st_mode):
                try:
                    digest = _sha256(e.path, st) or "large"
                except OSError:
                    digest = None
                out[e.path] = _marker(st, st.st_ino) + (":" + digest if digest else "")
            else:
                # compared, never read: a tuple costs a fraction of the string
                out[e.path] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _link_marker(path: str, st: os.stat_result, linked: list[str] | None) -> str:
    # what it leads to can be rewritten outside every watched folder
    marker = _marker(st, st.st_ino)
    try:
        to = os.stat(path)
    except OSError:
        return marker + "->missing"
    if stat.S_ISDIR(to.st_mode):
        # which folder, not its times (every honest cache written moves them)
        if linked is not None:
            linked.append(path)
        return marker + f"->dir:{os.path.realpath(path)}:{to.st_dev}:{to.st_ino}"
    return marker + "->" + _marker(to, to.st_ino)


def _marker(st: os.stat_result, inode: int) -> str:
    # ctime too: a rewrite of the same size with its mtime put back still moves it
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{inode}"


def changes(before: dict[str, object], after: dict[str, object]) -> list[tuple[str, str]]:
    """(absolute path, "added" | "deleted" | "modified") for every difference, sorted."""
    if before == after:  # the usual answer, without sorting 8,000 paths (issue 18)
        return []
    paths = sorted(set(before) | set(after))
    out = []
    for p in paths:
        if before.get(p) == after.get(p):
            continue
        if before.get(p) in (None, "absent"):
            out.append((p, "added"))
        elif after.get(p) in (None, "absent"):
            out.append((p, "deleted"))
        else:
            out.append((p, "modified"))
    return out


def owners(where: Layout) -> dict[str, tuple[str, str]]:
    """Absolute file path → (distribution name, version) from every ``*.dist-info/RECORD``
    in the site folders (the user site too)."""
    out: dict[str, tuple[str, str]] = {}
    for d in (*where.site, *([where.user_site] if where.user_site else [])):
        for record in Path(d).glob("*.dist-info/RECORD"):
            meta = _name_version(record.parent)
            if meta is None:
                continue
            try:
                rows = list(csv.reader(record.read_text(encoding="utf-8").splitlines()))
            except (OSError, csv.Error, UnicodeDecodeError):
                continue
            for row in rows:
                if row:
                    out[os.path.normpath(os.path.join(d, row[0]))] = meta
    return out


def _name_version(dist_info: Path) -> tuple[str, str] | None:
    name = version = None
    try:
        for line in (dist_info / "METADATA").read_text(encoding="utf-8").splitlines():
            if line.startswith("Name:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("Version:"):
                version = line.split(":", 1)[1].strip()
            elif not line:
                break
    except (OSError, UnicodeDecodeError):
        return None
    return (name, version) if name and version else None


def restore_commands(changed: list[tuple[str, str]], where: Layout) -> list[str]:
    """Shell commands a person can run to put the environment back: ``pip install
    --force-reinstall --no-deps <dist>==<version>`` with the tested interpreter for files an
    installed distribution owns (by its RECORD), ``rm`` for added files no distribution owns.
    A deleted file no RECORD names cannot be restored by andon and gets no command."""
    own = owners(where)
    dists: dict[tuple[str, str], None] = {}
    removals: list[str] = []
    added = {p for p, how in changed if how == "added"}
    for path, how in changed:
        if path in own:
            dists[own[path]] = None
        elif how == "added" and os.path.dirname(path) not in added:
            removals.append(path)  # a new folder is removed whole, its files with it
    cmds = [f"{shlex.quote(where.interpreter)} -m pip install --force-reinstall --no-deps "
            f"{shlex.quote(f'{n}=={v}')}" for n, v in dists]
    cmds += [("rm -r " if os.path.isdir(p) else "rm ") + shlex.quote(p) for p in removals]
    return cmds


def describe(changed: list[tuple[str, str]], where: Layout, when: str,
             limit: int = 5) -> tuple[str, list[str]]:
    """(one sentence for a gate summary, restore commands) for ``changed``, which appeared
    ``when`` (e.g. "while the implement agent ran")."""
    shown = ", ".join(f"{p} ({how})" for p, how in changed[:limit])
    more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
    cmds = restore_commands(changed, where)
    text = (f"the Python environment the tests run with ({where.prefix}) changed {when}: "
            f"{shown}{more}. If you did not make this change, an agent did; andon removes "
            "nothing there itself")
    if cmds:
        text += "; to restore: " + " && ".join(cmds)
    return text, cmds



def digest(fp: dict[str, object], caches: bool = False) -> str:
    """64 hex digits (SHA-256) naming a :func:`fingerprint` less its ``__pycache__`` folders
    (with them when ``caches``): equal exactly when every other path and marker is. A key of
    the results cache (gates/cache.py) names it: what is installed where the tests'
    interpreter looks decides their outcome as much as the tree does. Byte-code caches are
    left out because any Python run that imports a module not yet compiled writes one
    (andon's own commands, when the tests share its interpreter; uv installs none): counted,
    they would empty the cache until everything was compiled. A forged one is the walk's
    business within a run (:meth:`Watch.changed`)."""
    h = hashlib.sha256()
    for path, marker in sorted(fp.items()):
        if not caches and ("/__pycache__/" in path or path.endswith("/__pycache__")):
            continue
        h.update(f"{path}\0{marker!r}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


# (interpreter, exclude, HOME, PATH, PYTHONUSERBASE) -> the layout asked, the digest of the
# walk taken right after asking: this process's answers (see watch)
_asked: dict[tuple, tuple[Layout, str]] = {}


def watch(interpreter: str | None, exclude: tuple[Path, ...] = ()) -> Watch:
    """A :class:`Watch` of where ``interpreter`` (None: andon's own) looks, as
    ``Watch(layout(interpreter, exclude))`` — without asking the interpreter again
    (:func:`layout` starts a subprocess, 15-30 ms) when this process asked it before, with
    the same ``HOME``, ``PATH`` and ``PYTHONUSERBASE``, and a walk of that answer now equals
    the walk right after asking, byte-code caches included (a forged cache of a module a
    ``.pth`` imports can move the start-up path). The answer rests only on files that walk covers:
    the interpreter and the libraries it maps at start-up, its ``pyvenv.cfg`` and ``._pth``
    files, ``site.py`` and the rest of the standard library's top level, every ``.pth``,
    ``*customize.py`` and editable finder in its site folders and user site. Otherwise it
    asks, and walks the new answer. Raises ConfigError as :func:`layout` does."""
    exe = interpreter or sys.executable
    key = (exe, tuple(str(x) for x in exclude), os.environ.get("HOME", "/"),
           os.environ.get("PATH", ""), os.environ.get("PYTHONUSERBASE"))
    if key in _asked:
        where, then = _asked[key]
        w = Watch(where)
        if digest(w.base, caches=True) == then:
            return w
    w = Watch(layout(interpreter, exclude))
    _asked[key] = (w.where, digest(w.base, caches=True))
    return w


class Watch:
    """The fingerprint of one :class:`Layout` taken when a run starts (or ``base``, one
    taken since with nothing run in between), compared again at every :meth:`changed`
    (after each agent stage and each gate). ``digest``: :func:`digest` of the base."""

    def __init__(self, where: Layout, base: dict[str, object] | None = None):
        self.where = where
        self.base = fingerprint(where) if base is None else base
        self.digest = digest(self.base)

    def changed(self) -> list[tuple[str, str]]:
        """Every difference from the fingerprint taken at the start (see :func:`changes`),
        less the honest byte-code caches (module doc): one probe in the tests' interpreter,
        only when a cache file was added or rewritten."""
        now = fingerprint(self.where)
        found = changes(self.base, now)
        what = {p: bytecode.honest_or_judged(p, how, now.get(p)) for p, how in found}
        fine = bytecode.harmless([p for p, w in what.items() if w == "judge"],
                                 self.where.interpreter)
        return [(p, how) for p, how in found
                if what[p] == "keep" or (what[p] == "judge" and p not in fine)]
