"""Which dotted names are modules, for ``monkeypatch`` on a name a ``from`` import binds.

``from calc import ops`` may bind a module or an object (a class, a function, a constant), and
only a module's attribute store is monkeypatching. The gate decides by files, never by
importing: ``P.N`` is a module when

- the project has it: the candidate's tree holds ``P/N.py`` or ``P/N/__init__.py`` under one
  of its source roots (the repository root and the ``[test] pythonpath`` folders) —
  :func:`project_modules` turns ``git ls-tree`` paths into dotted names;
- or, for a top-level name the project does not have, andon's own interpreter has it as a
  file in its standard library or site-packages (``P/N.py``, ``P/N/__init__.py``, a compiled
  ``P/N.*.so`` / ``.pyd``), or it is ``os.path`` (a module named by no file of its own).

Limits: the test interpreter's installed packages may differ from andon's (as in
shadowing.py); a module a package's ``__init__`` binds by assignment is not seen.
"""

from __future__ import annotations

import functools
import sysconfig
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

# modules that are attributes of their parent with no file of that name
NO_FILE_MODULES = frozenset({"os.path"})


def module_name(path: str, roots: Sequence[str]) -> list[str]:
    """The dotted names a ``.py`` path has under each root that holds it (``src/calc/ops.py``
    under ``src`` → ``calc.ops``; a package's ``__init__.py`` is the package); ``[]`` for
    other paths."""
    if not path.endswith(".py"):
        return []
    out = []
    for root in roots:
        root = root.strip("/")
        if root and not path.startswith(root + "/"):
            continue
        parts = path[len(root) + 1 if root else 0:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            out.append(".".join(parts))
    return out


def project_modules(paths: Iterable[str], roots: Sequence[str]) -> frozenset[str]:
    """Dotted names of every module the tree's ``paths`` hold under ``roots`` (see
    :func:`module_name`)."""
    return frozenset(n for p in paths for n in module_name(p, roots))


@functools.lru_cache(maxsize=1024)
def _installed(dotted: str) -> bool:
    rel = Path(*dotted.split("."))
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        where = sysconfig.get_paths().get(key)
        if not where:
            continue
        base = Path(where) / rel
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() \
                or any(base.parent.glob(f"{base.name}.*.so")) \
                or any(base.parent.glob(f"{base.name}.*.pyd")):
            return True
    return False


def is_module(dotted: str, project: AbstractSet[str]) -> bool:
    """``dotted`` (``P.N`` of ``from P import N``) names a module (module docstring).
    ``project``: the project's dotted module names; a top-level name the project has is
    decided by them alone."""
    if dotted in project:
        return True
    if dotted.split(".")[0] in {p.split(".")[0] for p in project}:
        return False
    return dotted in NO_FILE_MODULES or _installed(dotted)
