"""A fingerprint of the Python environment the harness tests with, outside every worktree.

An agent runs as the same user as andon: it can drop a ``.pth`` (or a ``sitecustomize.py``)
into the site-packages of the interpreter the suite runs on, or edit an installed module, and
every later test run imports it before any test. Nothing of that is in the worktree, so no
gate that reads the candidate sees it. The runner takes this fingerprint when a run starts
and compares it after every agent stage and every gate that ran agent code: a difference is
an ``outside-worktree`` finding (see :func:`describe`), and andon never deletes anything in
the user's environment itself — it prints the commands that restore it.

What is watched, for the interpreter of ``[test] command`` (:func:`layout`):

- its site-packages folders, every file recursively (byte-code caches too): path, size,
  ``mtime_ns``, ``ctime_ns`` (no process can set it back, so a rewrite of the same size with
  the old mtime put back is seen) and inode; ``.pth`` files and ``*customize.py`` also by
  content (SHA-256);
- its ``pyvenv.cfg`` by content (``include-system-site-packages`` adds a folder to the path);
- its user site folder (computed from ``HOME``/``PYTHONUSERBASE`` *now*, not when andon
  started), also when it does not exist: creating it is a change;
- the other folders on its start-up ``sys.path`` outside the user's checkout, top level only
  (the standard library, ``lib-dynload``, editable installs' source folders).

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
import json
import os
import shlex
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .. import treewalk
from ..errors import ConfigError
from . import bytecode

_HASHED_SUFFIXES = (".pth", "customize.py")

# Run by the interpreter under test when it is not andon's own: where it looks at start-up.
# -S would hide the site folders we ask for; -I keeps the agent's PYTHONPATH/user site out.
_PROBE = (
    "import json, site, sys\n"
    "print(json.dumps({'prefix': sys.prefix, 'site': site.getsitepackages(),"
    " 'user_site': site.getusersitepackages(), 'path': sys.path,"
    " 'version': '%d.%d' % sys.version_info[:2]}))\n"
)


@dataclass(frozen=True)
class Layout:
    """Where one interpreter looks: ``site`` folders (walked recursively), ``user_site``
    (a path, existing or not; None where the platform has none) and ``top`` folders
    (top level only). All absolute paths."""

    interpreter: str
    prefix: str
    site: tuple[str, ...]
    user_site: str | None
    top: tuple[str, ...]


def layout(interpreter: str | None, exclude: tuple[Path, ...] = ()) -> Layout:
    """Where ``interpreter`` (None: andon's own) looks when a test process starts: asked once
    with a tiny subprocess (``-I``), since andon's own ``sys.path`` is not
    the one a fresh process starts with. The user site is computed from ``HOME`` as it is
    now. ``sys.path`` folders under any of ``exclude`` (the user's checkout, the worktrees)
    are left out: they are the gates' business.

    Raises:
        ConfigError: the interpreter cannot be run or gives no answer.
    """
    exe = interpreter or sys.executable
    try:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
        if "PYTHONUSERBASE" in os.environ:
            env["PYTHONUSERBASE"] = os.environ["PYTHONUSERBASE"]
        # -I ignores PYTHON* variables, so PYTHONUSERBASE is applied by _user_site below
        proc = subprocess.run([exe, "-I", "-c", _PROBE], capture_output=True, text=True,
                              check=False, timeout=30, env=env)
        info = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise ConfigError(f"[test] command: cannot ask {exe} where it looks for "
                          f"packages: {exc}") from None
    user_site = (_user_site(info["version"]) if "PYTHONUSERBASE" in os.environ
                 else info["user_site"])
    site_dirs = tuple(dict.fromkeys(os.path.abspath(p) for p in info["site"]
                                    if os.path.isdir(p)))
    skip = [Path(p).resolve() for p in exclude]
    top = []
    for p in info["path"]:
        if not p or not os.path.isabs(p) or not os.path.isdir(p):
            continue  # '' is the test run's own cwd (a worktree); zips never change in place
        ap = os.path.abspath(p)
        if ap in site_dirs or ap == user_site or any(
                Path(ap).resolve().is_relative_to(s) for s in skip):
            continue
        top.append(ap)
    return Layout(exe, info["prefix"], site_dirs, user_site, tuple(dict.fromkeys(top)))


def _user_site(version: str) -> str | None:
    base = os.environ.get("PYTHONUSERBASE") or os.path.join(os.path.expanduser("~"), ".local")
    scheme = f"{os.name}_user"
    if scheme not in sysconfig.get_scheme_names():
        return None
    py = version.replace(".", "")
    return sysconfig.get_path("purelib", scheme, vars={
        "userbase": base, "py_version_short": version, "py_version_nodot": py})


def fingerprint(where: Layout) -> dict[str, str]:
    """Absolute path → marker of everything :class:`Layout` names (see the module doc).
    A folder is ``"dir"``, a file ``"size:mtime_ns:ctime_ns:inode"`` (plus ``:sha256`` for
    ``.pth`` and ``*customize.py``), the venv's ``pyvenv.cfg`` ``"sha256:<hex>"``, a missing
    one or user site ``"absent"``. Unreadable folders contribute
    what can be read. About 0.1 s for a venv of 15,000 entries (one stat per file)."""
    out: dict[str, str] = {}
    # a venv's settings: include-system-site-packages = true puts an unwatched folder on
    # every test process's path
    cfg = os.path.join(where.prefix, "pyvenv.cfg")
    try:
        out[cfg] = "sha256:" + hashlib.sha256(Path(cfg).read_bytes()).hexdigest()
    except OSError:
        out[cfg] = "absent"
    for d in where.site:
        _walk(d, out, recursive=True)
    if where.user_site:
        if os.path.isdir(where.user_site):
            out[where.user_site] = "dir"
            _walk(where.user_site, out, recursive=True)
        else:
            out[where.user_site] = "absent"
    for d in where.top:
        _walk(d, out, recursive=False)
    return out


def _walk(folder: str, out: dict[str, str], recursive: bool) -> None:
    for _, e in treewalk.entries(folder, descend=lambda _r, _e: recursive):
        try:
            if e.is_dir(follow_symlinks=False):
                # one the walk cannot list hides its files, which Python opens by path
                out[e.path] = "dir" if os.access(e.path, os.R_OK | os.X_OK) else "dir:unlistable"
                continue
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        # ctime too: a rewrite of the same size with its mtime put back still moves it
        marker = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{e.inode()}"
        if e.name.endswith(_HASHED_SUFFIXES):
            try:
                marker += ":" + hashlib.sha256(Path(e.path).read_bytes()).hexdigest()
            except OSError:
                pass
        out[e.path] = marker


def changes(before: dict[str, str], after: dict[str, str]) -> list[tuple[str, str]]:
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



class Watch:
    """The fingerprint of one :class:`Layout` taken when a run starts, compared again at
    every :meth:`changed` (after each agent stage and each gate)."""

    def __init__(self, where: Layout):
        self.where = where
        self.base = fingerprint(where)

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
