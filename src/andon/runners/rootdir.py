"""One rootdir, one config file for every pytest run of a packet, whatever paths are selected.

pytest derives its rootdir and its config file from the paths on its command line
(https://docs.pytest.org/en/stable/reference/customize.html#initialization-determining-rootdir-and-configfile,
pytest-dev/pytest#11107): ``pytest pkg/tests/test_x.py`` in a monorepo whose ``pkg/`` has its own
``pyproject.toml`` roots at ``pkg/`` and names the test ``tests/test_x.py::…``, while the full-suite
run roots at the repository and says ``pkg/tests/test_x.py``. Test ids then differ between the red
gate (planted files selected) and the suite gates (nothing selected), and a valid packet is blocked.

``pinned_args(cwd, pytest_args)`` resolves, once per run and from the *configured* command only
(never the selection), the config file pytest would pick for the full-suite run in ``cwd``, and
returns the flags that make every run use exactly that: ``--rootdir=<cwd>``, ``-c <file>``
(``/dev/null`` when there is none: pytest's documented way to ask for no configuration) and
``--confcutdir`` (the config file's directory inside ``cwd``, else ``cwd``: no conftest.py above
the clone is ever loaded). Flags the project's command already sets are left to it.

``ini_values(path)`` reads the few pytest settings other checks need (``testpaths``,
``python_files``), from the same file; ``kept_addopts(path)`` the options of its ``addopts``
that widen a run (doctests, ``-W``, strict markers), which ``pinned_args`` adds, since every
run passes ``-o addopts=``.
"""

from __future__ import annotations

import configparser
import shlex
import tomllib
from collections.abc import Sequence
from pathlib import Path

# The names pytest looks for in each directory, in its order of precedence (pytest 9; the
# .toml names are new in 9 and harmless for older versions, which never see such a file).
# The scope gate flags each by name (pyproject.toml by its [tool.pytest…] table): a name
# added here is one an agent cannot add or edit unnoticed.
DEDICATED = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini")  # config even empty
CONFIG_NAMES = (*DEDICATED, "pyproject.toml", "tox.ini", "setup.cfg")
NO_CONFIG = "/dev/null"
# options whose value is the next word: that word is not a path
_VALUED = {"-k", "-m", "-p", "-o", "-W", "-c", "--config-file", "--rootdir", "--confcutdir",
           "--ignore", "--ignore-glob", "--deselect", "--import-mode", "--basetemp", "-n",
           "--junitxml", "--override-ini", "--maxfail", "--tb", "--durations"}


def _toml(path: Path) -> dict | None:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return None


def _ini(path: Path) -> configparser.RawConfigParser | None:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error):
        return None
    return parser


def _holds_config(path: Path) -> bool:
    """Does pytest take ``path`` (one of ``CONFIG_NAMES``) as its config file?"""
    name = path.name
    if name in DEDICATED:
        return True
    if name == "pyproject.toml":
        tool = ((_toml(path) or {}).get("tool") or {})
        return isinstance(tool, dict) and "pytest" in tool
    parser = _ini(path)
    if parser is None:
        return False
    return parser.has_section("pytest" if name == "tox.ini" else "tool:pytest")


def _paths_in(cwd: Path, args: list[str]) -> list[Path]:
    """The existing paths among the command's own arguments, absolute."""
    out, skip = [], False
    for word in args:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in _VALUED
            continue
        p = (cwd / word.split("::", 1)[0]).absolute()
        if p.exists():
            out.append(p if p.is_dir() else p.parent)
    return out


def locate(cwd: Path, args: Sequence[str] = ()) -> Path | None:
    """The config file pytest would use when run in ``cwd`` with ``args`` (the project's own
    test command arguments), or None. Searches from the common ancestor of the path
    arguments (``cwd`` when there are none) upwards, but never above ``cwd``: a file outside
    the clone is not the project's."""
    cwd = Path(cwd).absolute()
    dirs = _paths_in(cwd, list(args)) or [cwd]
    common = dirs[0]
    for d in dirs[1:]:
        while not d.is_relative_to(common):
            common = common.parent
    start = common if common.is_relative_to(cwd) else cwd
    first_pyproject = None
    for base in (start, *start.parents):
        for name in CONFIG_NAMES:
            p = base / name
            if p.is_file():
                if name == "pyproject.toml" and first_pyproject is None:
                    first_pyproject = p
                if _holds_config(p):
                    return p
        if base == cwd:
            break
    # pytest >= 8.1 roots at the first pyproject.toml even without a pytest table
    return first_pyproject


def _given(args: list[str], *names: str) -> bool:
    """Is one of the options ``names`` among ``args`` (``--x v``, ``--x=v`` or ``-cv``)?"""
    for a in args:
        for n in names:
            if a == n or a.startswith(n + "=") or (len(n) == 2 and a.startswith(n)):
                return True
    return False


def _given_value(args: list[str], *names: str) -> str | None:
    """The value of the first of the options ``names`` in ``args`` (``--x v`` or ``--x=v``)."""
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a[len(n) + 1:]
    return None


def pinned_args(cwd: Path, args: Sequence[str] = ()) -> list[str]:
    """``--rootdir``, ``-c`` and ``--confcutdir`` for a pytest run in ``cwd`` (see
    the module docstring), then the widening options of the config file's addopts
    (:func:`kept_addopts`); an option already in ``args`` (the project's pytest arguments)
    is not repeated."""
    cwd = Path(cwd).absolute()
    args = list(args)
    out = []
    if not _given(args, "--rootdir"):
        out.append(f"--rootdir={cwd}")
    config = None
    if not _given(args, "-c", "--config-file", "--inifile"):
        config = locate(cwd, args)
        out += ["-c", str(config or NO_CONFIG)]  # -c: also pytest < 7.2 knows it
    if not _given(args, "--confcutdir"):
        cut = config.parent if config and config.parent.is_relative_to(cwd) else cwd
        out.append(f"--confcutdir={cut}")
    named = _given_value(args, "-c", "--config-file", "--inifile")
    source = config if named is None else (cwd / named if named != NO_CONFIG else None)
    # a flag the command gives already is not repeated (valued options may repeat)
    return out + [w for w in kept_addopts(source) if not (w in _KEPT_FLAGS and w in args)]


def _raw_ini(path: Path) -> dict:
    """The pytest settings of the config file ``path``, as the file holds them."""
    if path.suffix == ".toml":
        doc = _toml(path) or {}
        tool = doc.get("tool", {}).get("pytest", {}) if path.name == "pyproject.toml" \
            else {"ini_options": doc.get("pytest", {})}
        raw = tool.get("ini_options", tool) if isinstance(tool, dict) else {}
        return raw if isinstance(raw, dict) else {}
    parser = _ini(path)
    section = "tool:pytest" if path.name == "setup.cfg" else "pytest"
    if parser is not None and parser.has_section(section):
        return dict(parser.items(section))
    return {}


def _words(v: object) -> list[str] | None:
    if isinstance(v, str):
        try:
            return shlex.split(v)
        except ValueError:
            return v.split()
    if isinstance(v, list):
        return [str(x) for x in v]
    return None


def ini_values(path: Path | None) -> dict[str, list[str]]:
    """``testpaths`` and ``python_files`` from the pytest config file ``path`` (None: no
    file), as lists of words; a key the file does not set is absent."""
    raw = _raw_ini(path) if path is not None else {}
    return {key: words for key in ("testpaths", "python_files")
            if (words := _words(raw.get(key))) is not None}


# addopts options that only add tests or make them stricter: kept where ``-o addopts=`` drops
# the rest (``-k``, ``-m``, ``-x``, ``--deselect``, paths, ``-p`` narrow or change the runner)
_KEPT_FLAGS = {"--doctest-modules", "--doctest-continue-on-failure", "--strict-markers",
               "--strict-config"}
# --import-mode: how test modules are imported (importlib: two tests/*/test_util.py without
# __init__.py are fine; under the default prepend they clash, and preflight refused a
# project whose own pytest passed)
_KEPT_VALUED = {"--doctest-glob", "-W", "--pythonwarnings", "--import-mode"}


def kept_addopts(path: Path | None) -> list[str]:
    """The options of the config file's ``addopts`` that widen a run or say how it imports:
    doctests (``--doctest-modules``, ``--doctest-glob``, ``--doctest-continue-on-failure``),
    warnings as errors (``-W``), ``--strict-markers`` / ``--strict-config`` and
    ``--import-mode``, in their order, each with its value. Every harness run passes
    ``-o addopts=`` (an addopts ``-k`` would narrow what the gates see); without these, a
    change that breaks only a doctest was merged."""
    words = _words(_raw_ini(path).get("addopts")) if path is not None else None
    out: list[str] = []
    it = iter(words or [])
    for w in it:
        name = w.split("=", 1)[0]
        if w in _KEPT_FLAGS or (name in _KEPT_VALUED and "=" in w):
            out.append(w)
        elif w in _KEPT_VALUED:
            value = next(it, None)
            if value is not None:
                out += [w, value]
        elif w.startswith("-W") and len(w) > 2:
            out.append(w)
    return out
