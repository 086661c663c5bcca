"""What ``andon init`` can tell about a project from its files: a set-up step, its virtualenv,
the pytest plugins installed there. Read-only; each finding says what it saw.

``detect(root)`` returns ``Detected`` items: a ``[test]`` key, its TOML value, and why. The
sources are the project's own declarations:

- ``[tool.setuptools_scm]`` naming a ``version_file``/``write_to``: setuptools-scm (>= 8) writes
  it without a build.
- ``[tool.hatch.version] source = "vcs"`` (hatch-vcs) or ``[tool.setuptools_scm]`` /
  ``setuptools_scm`` / ``setuptools-scm`` in ``[build-system] requires``: the version file is
  written by a build, so ``setup`` builds a wheel into a throwaway dir (``pip wheel --no-deps
  --no-build-isolation --no-index``: no network; the build backend must be installed for the
  test interpreter).
- a ``setup.py`` that names ``ext_modules``: ``setup`` builds the extensions in place.
- ``.venv/`` or ``venv/`` with ``bin/python``: ``command`` runs pytest on that interpreter.
- pytest plugins registered (entry point group ``pytest11``) in that interpreter: ``plugins``
  names their modules, since andon turns plugin autoloading off.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

WHEEL_SETUP = ["python", "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
               "--no-index", "--wheel-dir", "{scratch}", "."]
# setuptools-scm >= 8 writes its version file without a build (no wheel package needed)
SCM_SETUP = ["python", "-m", "setuptools_scm", "--force-write-version-files"]
EXT_SETUP = ["python", "setup.py", "build_ext", "--inplace"]
# plugins that must not be loaded by name: xdist changes how the harness's runs execute, and
# andon's own shuffle replaces randomly
_SKIP_PLUGINS = {"xdist.plugin", "xdist.looponfail", "pytest_randomly"}

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


def setup_step(root: Path) -> Detected | None:
    """The set-up a fresh clone of ``root`` needs, from its build declarations, or None."""
    doc = _pyproject(root)
    tool = doc.get("tool", {}) if isinstance(doc.get("tool"), dict) else {}
    requires = " ".join(str(r) for r in doc.get("build-system", {}).get("requires", []))
    hatch = tool.get("hatch", {}).get("version", {}) if isinstance(tool.get("hatch"), dict) \
        else {}
    if isinstance(hatch, dict) and hatch.get("source") == "vcs":
        return Detected("setup", WHEEL_SETUP, "pyproject.toml: [tool.hatch.version] source = "
                        '"vcs" (hatch-vcs writes the version file during a build)')
    scm = tool.get("setuptools_scm")
    if isinstance(scm, dict) and ("version_file" in scm or "write_to" in scm):
        return Detected("setup", SCM_SETUP, "pyproject.toml: [tool.setuptools_scm] writes "
                        f"{scm.get('version_file') or scm.get('write_to')} (from git)")
    # a version read from an attribute or a file is not computed from git: nothing generated
    dyn = tool.get("setuptools", {}).get("dynamic") if isinstance(tool.get("setuptools"),
                                                                  dict) else None
    from_git = not (isinstance(dyn, dict) and "version" in dyn)
    if from_git and ("setuptools_scm" in tool or "setuptools-scm" in requires
                     or "setuptools_scm" in requires):
        return Detected("setup", WHEEL_SETUP, "pyproject.toml: setuptools-scm (it writes the "
                        "version file during a build)")
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
        out = subprocess.run([str(python), "-I", "-c", _LIST_PLUGINS], capture_output=True,
                             text=True, timeout=60, check=False)
        names = json.loads(out.stdout) if out.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    return [n for n in names if n not in _SKIP_PLUGINS]


def detect(root: Path) -> list[Detected]:
    """Everything ``andon init`` writes beyond the defaults for the project at ``root``."""
    root = Path(root)
    found = []
    python = venv_python(root)
    if python is not None:
        found.append(Detected("command", [str(python.absolute()), "-m", "pytest"],
                              f"{python.parent.parent.name}/ holds the project's virtualenv"))
        if plugins := plugins_of(python):
            found.append(Detected("plugins", plugins, f"pytest plugins installed in "
                                  f"{python.parent.parent.name}/ (autoloading is off in "
                                  "harness runs, so they are loaded by name)"))
    if step := setup_step(root):
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
