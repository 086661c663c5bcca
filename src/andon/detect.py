"""What ``andon init`` can tell about a project from its files: a set-up step, its virtualenv,
the pytest plugins installed there. Read-only; each finding says what it saw.

``detect(root)`` returns ``Detected`` items: a ``[test]`` key, its TOML value, and why. The
sources are the project's own declarations:

- ``[tool.setuptools_scm]`` naming a ``version_file``/``write_to``: setuptools-scm (>= 8) writes
  it without a build.
- ``[tool.hatch.version] source = "vcs"`` (hatch-vcs) or ``[tool.setuptools_scm]`` /
  ``setuptools_scm`` / ``setuptools-scm`` in ``[build-system] requires``: the version file is
  written by a build, so ``setup`` builds a wheel into a throwaway dir. When every
  ``[build-system] requires`` distribution is installed for the test interpreter, offline
  (``pip wheel --no-deps --no-build-isolation --no-index``); otherwise — the usual case for a
  ``.venv`` made with ``pip install -e .``, where pip put the backend only in a throwaway build
  environment — with build isolation (pip fetches the backend from the package index when a
  clone is set up; the set-up cache makes that once per set-up inputs).
- a ``setup.py`` that names ``ext_modules``: ``setup`` builds the extensions in place.
- ``.venv/`` or ``venv/`` with ``bin/python``: ``command`` runs pytest on that interpreter.
- pytest plugins registered (entry point group ``pytest11``) in that interpreter: ``plugins``
  names their modules, since andon turns plugin autoloading off.
- a flat layout (a package or module at the repository root, no ``src/``): ``pythonpath`` is
  ``["."]``, the root first on ``sys.path`` (the default ``["src"]`` names no folder there).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

WHEEL_SETUP = ["python", "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
               "--no-index", "--wheel-dir", "{scratch}", "."]
# the same build where the backend is not installed for the test interpreter: pip installs
# it into a throwaway build environment, from the package index
ISOLATED_SETUP = ["python", "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
                  "{scratch}", "."]
# setuptools-scm >= 8 writes its version file without a build (no wheel package needed)
SCM_SETUP = ["python", "-m", "setuptools_scm", "--force-write-version-files"]
EXT_SETUP = ["python", "setup.py", "build_ext", "--inplace"]
# plugins that must not be loaded by name: xdist changes how the harness's runs execute, and
# andon's own shuffle replaces randomly
_SKIP_PLUGINS = {"xdist.plugin", "xdist.looponfail", "pytest_randomly"}

# which of the distributions named in argv are not installed (importlib.metadata normalises)
_MISSING = ("import importlib.metadata as m, json, sys\nout = []\nfor n in sys.argv[1:]:\n"
            "    try:\n        m.distribution(n)\n    except m.PackageNotFoundError:\n"
            "        out.append(n)\nprint(json.dumps(out))\n")
_REQ_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")

_LIST_PLUGINS = ("import importlib.metadata as m, json; print(json.dumps(sorted({e.value.split("
                 "':')[0] for e in m.entry_points(group='pytest11')})))")


@dataclass(frozen=True)
class Detected:
    key: str      # the [test] key
    value: list   # its value (written as TOML)
    why: str      # what was seen


def _pyproject(root: Path) -> dict:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def build_requires(root: Path) -> list[str]:
    """Distribution names in ``[build-system] requires`` of ``root``'s pyproject.toml (version
    specifiers and extras dropped); setuptools' defaults when the table is absent."""
    doc = _pyproject(root)
    system = doc.get("build-system")
    if not isinstance(system, dict) or not isinstance(system.get("requires"), list):
        return ["setuptools"]
    names = [m.group(1) for r in system["requires"] if (m := _REQ_NAME.match(str(r)))]
    return list(dict.fromkeys(names))


def missing_build_requires(root: Path, python: Path | str) -> list[str] | None:
    """The names of ``build_requires(root)`` not installed for ``python``, in order; None
    when ``python`` cannot be asked."""
    names = build_requires(root)
    try:
        out = subprocess.run([str(python), "-I", "-B", "-c", _MISSING, *names], capture_output=True,
                             text=True, timeout=60, check=False)
        missing = json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return missing if isinstance(missing, list) else None


def _build(root: Path, python: Path | str | None, why: str) -> Detected:
    """The wheel build that writes the version file: offline when the test interpreter has
    the build backend (or cannot be asked), else with build isolation (see the module
    docstring)."""
    missing = missing_build_requires(root, python) if python is not None else None
    if not missing:
        return Detected("setup", WHEEL_SETUP, why)
    return Detected("setup", ISOLATED_SETUP, f"{why}; the build backend ({', '.join(missing)}) "
                    f"is not installed for {python}, so the build fetches it from the package "
                    "index when a clone is set up (cached per set-up inputs). To build offline, "
                    "install it there and run `andon init --force`")


def setup_step(root: Path, python: Path | str | None = None) -> Detected | None:
    """The set-up a fresh clone of ``root`` needs, from its build declarations, or None.
    ``python``: the test interpreter, asked whether the build backend is installed (None:
    not asked; the offline forms are written)."""
    doc = _pyproject(root)
    tool = doc.get("tool", {}) if isinstance(doc.get("tool"), dict) else {}
    requires = " ".join(str(r) for r in doc.get("build-system", {}).get("requires", []))
    hatch = tool.get("hatch", {}).get("version", {}) if isinstance(tool.get("hatch"), dict) \
        else {}
    if isinstance(hatch, dict) and hatch.get("source") == "vcs":
        return _build(root, python, 'pyproject.toml: [tool.hatch.version] source = "vcs" '
                      "(hatch-vcs writes the version file during a build)")
    scm = tool.get("setuptools_scm")
    if isinstance(scm, dict) and ("version_file" in scm or "write_to" in scm):
        lacks = missing_build_requires(root, python) if python is not None else None
        if not lacks or "setuptools_scm" not in {n.lower().replace("-", "_") for n in lacks}:
            return Detected("setup", SCM_SETUP, "pyproject.toml: [tool.setuptools_scm] writes "
                            f"{scm.get('version_file') or scm.get('write_to')} (from git)")
        return _build(root, python, "pyproject.toml: [tool.setuptools_scm] writes "
                      f"{scm.get('version_file') or scm.get('write_to')} during a build")
    # a version read from an attribute or a file is not computed from git: nothing generated
    dyn = tool.get("setuptools", {}).get("dynamic") if isinstance(tool.get("setuptools"),
                                                                  dict) else None
    from_git = not (isinstance(dyn, dict) and "version" in dyn)
    if from_git and ("setuptools_scm" in tool or "setuptools-scm" in requires
                     or "setuptools_scm" in requires):
        return _build(root, python, "pyproject.toml: setuptools-scm (it writes the version "
                      "file during a build)")
    try:
        setup_py = (root / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        setup_py = ""
    if "ext_modules" in setup_py:
        return Detected("setup", EXT_SETUP, "setup.py names ext_modules (compiled extensions "
                        "are not in git)")
    return None


def venv_python(root: Path) -> Path | None:
    """The project's virtualenv interpreter (``.venv`` or ``venv`` in ``root``), or None."""
    for name in (".venv", "venv"):
        p = root / name / "bin" / "python"
        if p.exists():
            return p
    return None


def plugins_of(python: Path | str) -> list[str]:
    """Module names of the pytest plugins installed for ``python`` (``pytest11`` entry
    points), without the ones the harness must not load; [] when it cannot be asked."""
    try:
        out = subprocess.run([str(python), "-I", "-B", "-c", _LIST_PLUGINS], capture_output=True,
                             text=True, timeout=60, check=False)
        names = json.loads(out.stdout) if out.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    return [n for n in names if n not in _SKIP_PLUGINS]


# folders setuptools' automatic discovery never takes for packages (setuptools.discovery
# FlatLayoutPackageFinder's defaults, the common ones)
_NOT_PACKAGES = {"tests", "test", "docs", "doc", "examples", "example", "scripts", "tools",
                 "benchmarks", "benchmark", "build", "dist", "venv", "env", "bin", "ci"}
_NAMES_PACKAGES = re.compile(r"\b(packages|py_modules)\s*=")


def discovery_note(root: Path, packets_dir: str = "packets") -> str | None:
    """A note when setuptools finds the project's packages by itself in a flat layout: the
    packets folder holds .py files (planted tests, conftest.py), so the discovery counts it as
    one more top-level package and every build — the user's ``pip install .`` and a ``[test]
    setup`` that builds — fails ("Multiple top-level packages discovered in a flat-layout",
    seen on zipp). None when the project names its packages, uses a src layout, or another
    build backend."""
    doc = _pyproject(root)
    system = doc.get("build-system")
    backend = str(system.get("build-backend", "setuptools.build_meta")
                  if isinstance(system, dict) else "setuptools.build_meta")
    if not backend.startswith("setuptools") or (root / "src").is_dir():
        return None
    if not doc and not (root / "setup.py").is_file():
        return None  # not a package that builds
    tool = (doc.get("tool") or {}).get("setuptools") or {}
    if isinstance(tool, dict) and ("packages" in tool or "py-modules" in tool):
        return None
    for name in ("setup.py", "setup.cfg"):
        try:
            if _NAMES_PACKAGES.search((root / name).read_text(encoding="utf-8")):
                return None
        except (OSError, UnicodeDecodeError):
            pass
    ours = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                  and p.name not in _NOT_PACKAGES and p.name != packets_dir)
    include = ", ".join(f'"{n}*"' for n in ours) or '"yourpackage*"'
    return (f"note: setuptools finds this project's packages by itself (a flat layout that "
            f"names none), and {packets_dir}/ holds .py files: it counts as one more package, "
            "so `pip install .` and a [test] setup that builds fail with \"Multiple top-level "
            "packages discovered in a flat-layout\". Name your packages in pyproject.toml:\n"
            f"  [tool.setuptools.packages.find]\n  include = [{include}]")


# top-level .py files that are a project's tooling, not its code
_NOT_MODULES = {"setup", "conftest", "noxfile", "fabfile", "tasks"}


def pythonpath_of(root: Path, packets_dir: str = "packets") -> Detected | None:
    """``[test] pythonpath`` for a flat layout — the project's packages (folders with an
    ``__init__.py``) or modules at the repository root and no ``src/`` — ``["."]``: the root
    goes first on ``sys.path`` in every harness run, as the tests need it. ``python -m pytest``
    adds the working directory by itself, a pytest script does not (pytest's "prepend" import
    mode puts there the test file's first folder without an ``__init__.py``, e.g. ``tests/``),
    and either way an installed copy of the project must not come first. None for a src
    layout, or where no code of the project's can be seen yet: the default ``["src"]``."""
    if (root / "src").is_dir():
        return None
    names = sorted(p.name + "/" for p in root.iterdir() if p.is_dir()
                   and (p / "__init__.py").is_file() and p.name.isidentifier()
                   and p.name not in _NOT_PACKAGES and p.name != packets_dir)
    names += sorted(p.name for p in root.glob("*.py")
                    if p.stem.isidentifier() and p.stem not in _NOT_MODULES)
    if not names:
        return None
    return Detected("pythonpath", ["."], f"a flat layout ({', '.join(names[:3])}"
                    f"{' …' if len(names) > 3 else ''} at the repository root, no src/): the "
                    "root goes first on sys.path")


def detect(root: Path) -> list[Detected]:
    """Everything ``andon init`` writes beyond the defaults for the project at ``root``."""
    root = Path(root)
    found = []
    if layout := pythonpath_of(root):
        found.append(layout)
    python = venv_python(root)
    if python is not None:
        found.append(Detected("command", [str(python.absolute()), "-m", "pytest"],
                              f"{python.parent.parent.name}/ holds the project's virtualenv"))
        if plugins := plugins_of(python):
            found.append(Detected("plugins", plugins, f"pytest plugins installed in "
                                  f"{python.parent.parent.name}/ (autoloading is off in "
                                  "harness runs, so they are loaded by name)"))
    # the test interpreter: the project's, else andon's own (the default command's "python")
    if step := setup_step(root, python if python is not None else sys.executable):
        found.append(step)
    return found


def apply(toml_text: str, found: list[Detected]) -> str:
    """``toml_text`` (andon's default file) with each detected ``[test]`` key set, and a
    comment saying why."""
    lines = toml_text.splitlines(keepends=True)
    start = lines.index("[test]\n")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")),
               len(lines))
    body = lines[start + 1:end]
    for d in found:
        new = [f"# detected: {d.why}\n", f"{d.key} = {json.dumps(d.value)}\n"]
        at = next((i for i, ln in enumerate(body) if ln.startswith(f"{d.key} =")), None)
        if at is None:
            while body and body[-1].strip() == "":
                body.pop()
            body += new
        else:
            body[at:at + 1] = new
    if body and body[-1].strip():
        body.append("\n")
    return "".join(lines[:start + 1] + body + lines[end:])
