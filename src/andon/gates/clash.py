"""Planted test files that can never be collected together with the project's suite.

Under pytest's default import mode (``prepend``) a test file is imported under a module name
made from its path: its basename when its folder has no ``__init__.py``, else the dotted path
from the first folder up that is not a package
(https://docs.pytest.org/en/stable/explanation/pythonpath.html#import-modes). Two test files with
the same module name cannot both be imported in one run: the second fails with "import file
mismatch" (py2many/py2many#370). Which of the two fails depends on collection order, and on the
base a planted file that does not import yet hides the clash, so running the red gate cannot
show it; it is found here from the file names alone, before any agent spends an attempt.

``clashes(tree, new, args, ini, packets_dir)``: ``tree`` is every file at the base (repo-relative
POSIX paths), ``new`` the packet's own test files (planted, hidden). Returns ``basename-clash``
findings (layer ``specification``: the packet's file name is wrong, no agent can fix it) naming
both files and the three fixes. ``--import-mode=importlib`` in the test command: none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

from ..config import Config
from ..contain.channel import plan as plan_start
from ..git.repo import Repo
from ..runners.rootdir import ini_values, locate
from .base import Finding

# pytest's default norecursedirs: folders a full-suite run never enters
_NORECURSE = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")
_DEFAULT_FILES = ("test_*.py", "*_test.py")


def import_mode(args: Sequence[str]) -> str:
    """The ``--import-mode`` the test command sets (``prepend`` when it sets none). The
    project's ``addopts`` do not count: the harness runs with ``-o addopts=``."""
    mode = "prepend"
    for i, a in enumerate(args):
        if a.startswith("--import-mode="):
            mode = a.split("=", 1)[1]
        elif a == "--import-mode" and i + 1 < len(args):
            mode = args[i + 1]
    return mode


def module_name(path: str, packages: set[str]) -> str:
    """The module name ``prepend``/``append`` mode imports the test file ``path`` as;
    ``packages`` holds the folders that have an ``__init__.py``."""
    p = PurePosixPath(path)
    parts = [p.stem]
    d = p.parent
    while str(d) != "." and str(d) in packages:
        parts.insert(0, d.name)
        d = d.parent
    return ".".join(parts)


def _collected(path: str, patterns: Sequence[str], roots: Sequence[str], skip: str) -> bool:
    # split as strings: called for every file of the tree (a PurePosixPath each was most of
    # the check at 6,000 files)
    *folders, name = path.split("/")
    if not any(fnmatch(name, pat) for pat in patterns):
        return False
    if path.startswith(skip.strip("/") + "/") or any(fnmatch(part, pat) for part in folders
                                            for pat in _NORECURSE):
        return False
    return not roots or any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _renamed(path: str) -> str:
    p = PurePosixPath(path)
    rest = p.name.removeprefix("test_")
    return str(p.parent / f"test_{p.parent.name or 'new'}_{rest}")


def clashes(tree: Iterable[str], new: Iterable[str], args: Sequence[str] = (),
            ini: Mapping[str, list[str]] | None = None,
            packets_dir: str = "packets") -> list[Finding]:
    """Findings for each file of ``new`` whose module name another test file of the suite
    (or of ``new``) already has. ``args``: the test command's pytest arguments (import mode,
    path arguments); ``ini``: ``testpaths``/``python_files`` of its config (rootdir.py)."""
    if import_mode(args) == "importlib":
        return []
    ini = ini or {}
    new = sorted(set(new))
    files = set(tree) | set(new)
    packages = {f.rpartition("/")[0] or "." for f in files
                if f.rpartition("/")[2] == "__init__.py"}
    patterns = ini.get("python_files") or _DEFAULT_FILES
    words = [a for a in args if not a.startswith("-")]
    roots = [w.split("::")[0] for w in words if any(
        f == w or f.startswith(w.rstrip("/") + "/") for f in files)] or ini.get("testpaths", [])
    suite = sorted(f for f in files if _collected(f, patterns, roots, packets_dir))
    by_name: dict[str, list[str]] = {}
    for f in suite:
        by_name.setdefault(module_name(f, packages), []).append(f)
    found = []
    for f in new:
        if f not in suite:
            continue
        others = [o for o in by_name[module_name(f, packages)] if o != f]
        if others:
            name = module_name(f, packages)
            found.append(Finding(
                "basename-clash",
                f"planted test file {f} and {others[0]} are both imported as module {name!r} "
                "(pytest's default import mode), so one of them can never be collected with "
                f"the suite: rename {f} (e.g. to {_renamed(f)}), "
                "or give both folders an __init__.py, or add --import-mode=importlib to "
                "[test] command", path=f))
    return found


def of_packet(repo: Repo, rev: str, config: Config, cwd: Path, tests: Iterable[str],
              hidden: Iterable[str] = ()) -> list[Finding]:
    """``clashes`` for the test files ``tests`` and ``hidden`` of a packet against the tree of
    ``rev`` in ``repo``, with the test command and pytest config of ``config`` as seen from
    ``cwd`` (a checkout of ``rev``, or the repository root)."""
    args = plan_start(config.test_argv()).args
    tree = [e.path for e in repo.entries(rev)]
    ini = ini_values(locate(cwd, args))
    return clashes(tree, [*tests, *hidden], args, ini,
                   config.andon.packets_dir)
