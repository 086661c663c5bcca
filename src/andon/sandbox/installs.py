"""The installations an agent stage runs from, bound read-only into its sandbox.

The stage's ``/tmp`` is a private tmpfs and the user's checkout is hidden, so a tool that
lives there (an agent CLI installed below ``/tmp``, a virtualenv in the checkout, andon's own
interpreter in a CI clone below ``/tmp``) would vanish inside the sandbox and the agent would
fail with "No module named ..." or "not found". The rule (docs/sandbox.md, "Tools"):

- the agent command's resolved executable, and the installation it belongs to:
  a node package's ``node_modules`` folder (npm's ``.bin`` links point into it); a
  virtualenv's prefix (the folder holding ``pyvenv.cfg``), found from the executable itself
  or from its ``#!`` interpreter (a console script such as ``aider``), with the prefix of
  the interpreter it was made from (``pyvenv.cfg``'s ``home``: pyenv keeps it under HOME,
  which is private); else the executable's prefix (the folder above its ``bin/``) or its
  own folder;
- the same for every absolute path the command names (``python3 /x/agent.py``,
  ``/tmp/venv/bin/python agent.py``), and each such file itself (its folder is not bound
  when it holds a hidden path: a script kept beside the checkout);
- the project's test interpreter (``[test] command``'s first word; ``python`` there means the
  interpreter running andon, ``sys.executable``), since the agent runs the tests with it;
- for a folder on the agent's ``PATH`` that lies where the stage cannot see (under ``HOME``
  or a private ``/tmp``), what its tools run from (``behind_path``): a version manager's root
  for its ``shims`` folder, and the installation behind each link in it.

``Plan.wrap`` binds these after the private tmpfs and the hidden paths are mounted, so they
show through both, read-only; a folder that is ``/`` or holds a hidden path is never bound.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

SHEBANG_BYTES = 256  # a #! line longer than this is not an interpreter we follow


def installation_of(exe: str | os.PathLike[str]) -> list[Path]:
    """The folders ``exe`` (an executable file, absolute) needs to run, real paths: its
    ``node_modules``, its virtualenv's prefix (also through its ``#!`` interpreter), else
    its own folder. [] for a missing file."""
    p = Path(exe)
    if not p.is_absolute() or not p.exists():
        return []
    out: list[Path] = []
    for cand in (p, *_interpreter(p)):
        out += _home_of(cand)
    return _unique(out)


def tools_for(command: str | None, path_env: str | None, test_argv: Iterable[str] = ()
              ) -> list[Path]:
    """Every installation the rule above binds for an agent ``command`` (a shell string; its
    first word looked up on ``path_env``) and the project's ``test_argv``."""
    words: list[str] = []
    try:
        words = shlex.split(command) if command else []
    except ValueError:  # a command /bin/sh would reject is not ours to second-guess
        words = []
    exes = [w for w in words if os.path.isabs(w) and os.path.isfile(w)]
    if words and not os.path.isabs(words[0]) and (
            found := shutil.which(words[0], path=path_env or os.defpath)):
        exes.append(found)
    test = list(test_argv)[:1]
    if test:
        exes.append(sys.executable if test[0] == "python" else
                    (shutil.which(test[0], path=path_env or os.defpath) or test[0]))
    out: list[Path] = []
    for e in exes:
        out += installation_of(e)
    # each named file itself too: its folder is dropped when it holds a hidden path (a
    # script kept beside the checkout), and the file must still be there to run or be read
    out += [Path(os.path.realpath(w)) for w in words if os.path.isabs(w) and os.path.isfile(w)]
    return _unique(out)


MAX_PATH_LINKS = 500  # links followed per PATH folder: ~/.local/bin holds tens, not thousands


def behind_path(folder: Path) -> list[Path]:
    """What the tools in ``folder`` (a real path on the agent's ``PATH``, in a part of the
    filesystem the stage makes private) need beyond it, real paths:

    - a folder named ``shims`` (pyenv, rbenv, nodenv, asdf): its parent, the manager's root.
      Each shim execs the manager by absolute path (``~/.pyenv/libexec/pyenv``), which runs an
      interpreter from the root's ``versions/``; without it every shim ends with "No such
      file or directory" (exit 127);
    - each link in ``folder`` that points out of it: the installation of its target
      (``installation_of``): pipx's and poetry's ``~/.local/bin/X`` link into a virtualenv
      under ``~/.local/share``; pyenv's ``bin/pyenv`` into ``libexec/``.
    """
    out: list[Path] = []
    if folder.name == "shims" and folder.parent != Path("/"):
        out.append(folder.parent)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_PATH_LINKS]
    except OSError:
        return out
    for e in entries:
        if e.is_symlink():
            target = Path(os.path.realpath(e.path))
            if target.parent != folder:
                out += installation_of(e.path) or []
                out.append(target)
    return _unique(out)


def _home_of(p: Path) -> list[Path]:
    # the unresolved path first: a venv's bin/python is a link to the base interpreter, and
    # it is the venv (pyvenv.cfg one level above bin/) that holds the packages; the base
    # interpreter's own prefix (pyvenv.cfg's ``home``) holds the standard library and may
    # live under the private HOME (pyenv: ~/.pyenv/versions/X)
    for cand in (p, Path(os.path.realpath(p))):
        for up in cand.parents:
            if up.name == "node_modules":
                return [Path(os.path.realpath(up))]
        if (cand.parent.parent / "pyvenv.cfg").is_file():
            venv = Path(os.path.realpath(cand.parent.parent))
            # and where its python really is: a venv made from another venv's python
            # (a link to a link) ends at an interpreter neither pyvenv.cfg names
            return _unique([venv, *_base_prefix(venv / "pyvenv.cfg"),
                            *_prefix(Path(os.path.realpath(cand)))])
    return _prefix(Path(os.path.realpath(p)))


def _prefix(real: Path) -> list[Path]:
    """The installation prefix of an executable: the folder above its ``bin/`` (an
    interpreter's ``lib/`` lives beside it), else its own folder; never ``/``."""
    folder = real.parent
    if folder.name == "bin" and folder.parent != Path("/"):
        folder = folder.parent
    return [folder] if folder != Path("/") else []


def _base_prefix(cfg: Path) -> list[Path]:
    """The prefix of the interpreter a virtualenv was made from (``home = <its bin>``)."""
    try:
        lines = cfg.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and os.path.isabs(value.strip()):
            return _prefix(Path(os.path.realpath(value.strip())) / "python")
    return []


def _interpreter(p: Path) -> list[Path]:
    """The absolute interpreter of ``p``'s ``#!`` line ([] when none or ``/usr/bin/env``)."""
    try:
        with open(p, "rb") as f:
            head = f.read(SHEBANG_BYTES)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    first = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not first or not os.path.isabs(first[0]) or os.path.basename(first[0]) == "env":
        return []
    return [Path(first[0])]


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))
