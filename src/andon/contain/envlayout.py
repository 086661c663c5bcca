"""Where the tests' interpreter looks when a test process starts: what contain/envprint.py
fingerprints.

Asked of the interpreter itself (a tiny ``-I`` subprocess), since andon's own ``sys.path``
is not the one a fresh process of another interpreter starts with. Besides the folders on
its start-up path, a process reads files that are not on it, each a way to change what the
tests run without touching a watched folder, so each is named here too:

- a venv's own ``bin`` (top level): a replaced ``bin/python``, a ``python._pth`` (read on
  Linux too since 3.11, and ``-I`` does not turn it off: it replaces ``sys.path``), a
  ``bin/pyvenv.cfg`` (read before the prefix's), its console scripts;
- by content, ``"absent"`` when missing, so creating one is a change: every executable on
  the way from the command to the real binary (each link, the base's), ``<executable>._pth``,
  ``pyvenv.cfg`` beside each and in the folder above, ``pybuilddir.txt``, every start-up
  path entry that is not a folder (``lib/python311.zip`` comes first and almost never
  exists), every shared library mapped into the process at start-up (``libpython``, found
  through the executable's RUNPATH, and the C libraries; from ``/proc/self/maps``),
  ``/etc/ld.so.preload`` and ``/etc/ld.so.cache`` (where the loader finds each library);
  in each folder from an executable's up to its prefix, the landmarks by which a start-up
  would take that folder as its prefix instead (``lib/pythonX.Y/os.py``, ``lib-dynload``,
  the zipped library, ``Modules/Setup.local``), absent until someone makes them.
  A base interpreter's ``bin`` is not walked: the tools installed beside it are no test
  process's business;
- ``encodings``, the one standard-library package every process imports from source before
  any test or ``.pth`` (3.11 freezes the rest of start-up), recursively;
- every site folder ``site.getsitepackages()`` names, existing or not (a Debian
  ``dist-packages`` nobody installed into yet is created with a ``.pth`` in it);
- code installed in development mode, walked to the bottom (``sources``): the folders
  setuptools' editable finders map packages to (``__editable___*_finder.py``'s ``MAPPING``:
  on no path, imported all the same) and every start-up path entry that is not the standard
  library (a ``.pth`` naming a sibling checkout's ``src``: hatchling's, flit's, PDM's editable
  installs, ``setup.py develop``), without the hidden folders there (``.git``, ``.venv``: no
  import names them). A path entry that holds the interpreter itself, the home folder or
  ``/`` stays top level only.

Folders under the user's checkout or the worktrees are left to the gates, except the
interpreter's own (a ``.venv`` in the checkout is watched).

Not named: the standard library's other subfolders (top level only, see envprint), finders
of other build back-ends, what a ``.pth`` line imports from elsewhere, and shared libraries
loaded after start-up (an extension module's own dependencies).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

# -S would hide the site folders we ask for; -I keeps the agent's PYTHONPATH/user site out.
_PROBE = (
    "import encodings, json, os, site, sys\n"
    "try:\n"
    "    maps = [l.split(None, 5)[5].strip() for l in open('/proc/self/maps')"
    " if len(l.split(None, 5)) == 6]\n"
    "except OSError:\n"
    "    maps = []\n"
    "import sysconfig\n"
    "print(json.dumps({'stdlib': [sysconfig.get_path('stdlib'), sysconfig.get_path('platstdlib')],"
    " 'prefix': sys.prefix, 'base_prefix': sys.base_prefix,"
    " 'site': site.getsitepackages(), 'user_site': site.getusersitepackages(),"
    " 'path': sys.path, 'encodings': os.path.dirname(encodings.__file__),"
    " 'executables': [sys.executable, getattr(sys, '_base_executable', '') or ''],"
    " 'maps': sorted({m for m in maps if m.startswith('/') and os.path.isfile(m)}),"
    " 'version': '%d.%d' % sys.version_info[:2]}))\n"
)


@dataclass(frozen=True)
class Layout:
    """Where one interpreter looks: ``site`` folders (walked recursively, ``"absent"`` when
    missing), ``user_site`` (a path, existing or not; None where the platform has none),
    ``top`` folders (top level and its ``__pycache__`` only), ``files`` (each by content,
    as the prefix's ``pyvenv.cfg`` always is), ``deep`` folders (walked recursively, not
    site folders: ``encodings``), ``sources`` (code installed in development mode: walked
    recursively without hidden folders) and ``exclude``
    (resolved folders a linked folder is not followed into: the user's checkout, the
    worktrees). All absolute paths."""

    interpreter: str
    prefix: str
    site: tuple[str, ...]
    user_site: str | None
    top: tuple[str, ...]
    files: tuple[str, ...] = ()
    deep: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


def layout(interpreter: str | None, exclude: tuple[Path, ...] = ()) -> Layout:
    """Where ``interpreter`` (None: andon's own) looks when a test process starts (module
    doc). The user site is computed from ``HOME`` as it is now. Folders under any of
    ``exclude`` (the user's checkout, the worktrees) are left out: they are the gates'
    business.

    Raises:
        ConfigError: the interpreter cannot be run or gives no answer.
    """
    exe = interpreter or sys.executable
    try:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
        if "PYTHONUSERBASE" in os.environ:
            env["PYTHONUSERBASE"] = os.environ["PYTHONUSERBASE"]
        # -I ignores PYTHON* variables, so PYTHONUSERBASE is applied by _user_site below
        proc = subprocess.run([exe, "-I", "-B", "-c", _PROBE], capture_output=True, text=True,
                              check=False, timeout=30, env=env)
        info = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise ConfigError(f"[test] command: cannot ask {exe} where it looks for "
                          f"packages: {exc}") from None
    user_site = (_user_site(info["version"]) if "PYTHONUSERBASE" in os.environ
                 else info["user_site"])
    skip = [Path(p).resolve() for p in exclude]
    prefix = Path(info["prefix"]).resolve()

    def outside(p: str) -> bool:
        # the interpreter's own folders stay watched even in the checkout (a .venv there)
        r = Path(p).resolve()
        return r.is_relative_to(prefix) or not any(r.is_relative_to(s) for s in skip)

    site_dirs = tuple(dict.fromkeys(os.path.abspath(p) for p in info["site"]
                                    if os.path.isabs(p) and outside(p)))
    top: list[str] = []
    sources: list[str] = []
    # loaded into every process, Python or not; which file each shared library is
    files: list[str] = ["/etc/ld.so.preload", "/etc/ld.so.cache"]
    stdlib = [Path(p).resolve() for p in info.get("stdlib", ()) if p]
    never_deep = {Path("/"), Path.home().resolve(), prefix, Path(info["base_prefix"]).resolve()}

    def source(d: str) -> bool:
        # a folder of code in development mode, walked to the bottom; not the standard
        # library (lib-dynload below it), nor a folder holding the interpreter, home or /
        r = Path(d).resolve()
        return not (r in never_deep or any(r.is_relative_to(s) for s in stdlib)
                    or any(x.is_relative_to(r) for x in never_deep if x != Path("/")))

    for p in info["path"]:
        if not p or not os.path.isabs(p):
            continue  # '' is the test run's own cwd (a worktree)
        ap = os.path.abspath(p)
        if ap in site_dirs or ap == user_site or not outside(ap):
            continue
        if not os.path.isdir(ap):
            files.append(ap)
        else:
            (sources if source(ap) else top).append(ap)
    venv = info["prefix"] != info["base_prefix"]
    # /proc/self/maps names the file after every link: libpython is found through the
    # executable's RUNPATH ($ORIGIN/../lib, or the build's prefix/lib), a link there
    libpython = [os.path.basename(m) for m in info.get("maps", [])
                 if os.path.basename(m).startswith("libpython")]
    for link in _links(exe, *info["executables"]):
        folder = os.path.dirname(link)
        # a venv's bin is its own (a replaced python, its console scripts); a base's bin is
        # shared with every tool installed beside it: only what start-up reads there
        if venv and Path(folder).resolve().is_relative_to(prefix):
            top.append(folder)
        files += [link, link + "._pth", os.path.join(folder, "pyvenv.cfg"),
                  os.path.join(folder, "pybuilddir.txt"),
                  os.path.join(os.path.dirname(folder), "pyvenv.cfg")]
        files += [os.path.join(os.path.dirname(folder), "lib", name) for name in libpython]
        files += _landmarks(folder, info["version"],
                            {prefix, Path(info["base_prefix"]).resolve()})
    files += info.get("maps", [])  # libpython and every shared library start-up loaded
    for d in _editable_folders(site_dirs):
        if outside(d):
            if not os.path.isdir(d):
                files.append(d)
            else:
                (sources if source(d) else top).append(d)
    deep = [info["encodings"]] if info.get("encodings") else []
    return Layout(exe, info["prefix"], site_dirs, user_site,
                  tuple(dict.fromkeys(t for t in top if t not in site_dirs)),
                  tuple(dict.fromkeys(files)), tuple(deep), tuple(str(s) for s in skip),
                  tuple(dict.fromkeys(s for s in sources if s not in site_dirs)))


def _landmarks(folder: str, version: str, prefixes: set[Path]) -> list[str]:
    """What a start-up looks for in each folder from the executable's ``folder`` up to its
    prefix (excluded) to take that folder as its prefix instead: the standard library's
    ``os.py``, its ``lib-dynload``, the zipped library, a build folder's
    ``Modules/Setup.local``. Absent there (else the prefix would be that folder); made by
    anyone who can write there (the base's ``bin`` under pyenv, uv or conda), they would
    replace the standard library of every test process."""
    out: list[str] = []
    here = Path(folder).resolve()
    while here not in prefixes and here.parent != here:
        std = here / "lib" / f"python{version}"
        out += [str(std / "os.py"), str(std / "lib-dynload"),
                str(here / "lib" / f"python{version.replace('.', '')}.zip"),
                str(here / "Modules" / "Setup.local")]
        here = here.parent
    return out


def _links(*executables: str) -> list[str]:
    """Every path on the way from each executable to the file it finally is: the names, each
    link's target, the real file (absolute)."""
    out: list[str] = []
    for exe in filter(None, executables):
        path, seen = os.path.abspath(exe), 0
        while seen < 40:  # a loop of links ends the way
            out.append(path)
            if not os.path.islink(path):
                break
            path = os.path.join(os.path.dirname(path), os.readlink(path))
            path, seen = os.path.normpath(path), seen + 1
        out.append(os.path.realpath(exe))
    return list(dict.fromkeys(out))


def _editable_folders(site_dirs: tuple[str, ...]) -> list[str]:
    """The folders (and single modules) setuptools' editable finders map packages to
    (their ``MAPPING`` literal, read, never run); a finder that cannot be read or parsed
    maps nothing."""
    out = []
    for d in site_dirs:
        for finder in sorted(Path(d).glob("__editable___*_finder.py")):
            try:
                tree = ast.parse(finder.read_bytes())
            except (OSError, SyntaxError, ValueError):
                continue
            for node in tree.body:
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)
                        and node.targets[0].id == "MAPPING"):
                    try:
                        mapping = ast.literal_eval(node.value)
                    except ValueError:
                        continue
                    if isinstance(mapping, dict):
                        out += [os.path.abspath(v) for v in mapping.values()
                                if isinstance(v, str) and os.path.isabs(v)]
    return out


def _user_site(version: str) -> str | None:
    base = os.environ.get("PYTHONUSERBASE") or os.path.join(os.path.expanduser("~"), ".local")
    scheme = f"{os.name}_user"
    if scheme not in sysconfig.get_scheme_names():
        return None
    py = version.replace(".", "")
    return sysconfig.get_path("purelib", scheme, vars={
        "userbase": base, "py_version_short": version, "py_version_nodot": py})
