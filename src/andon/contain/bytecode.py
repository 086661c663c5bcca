"""Which new or rewritten byte-code caches in the tests' interpreter environment are harmless.

Python loads ``__pycache__/<module>.<tag>.pyc`` instead of compiling the source whenever the
cache's header matches the source file (its mtime and size, or its hash) — ``-B`` and
``PYTHONDONTWRITEBYTECODE`` stop writing caches, not reading them. So the code under test
can write a cache whose code is not its source's (``X = 666`` for a module that says
``X = 1``, or a forged ``_pytest`` module) and every later test process in that environment
runs it, while the source files stay byte for byte the same. The environment fingerprint
(contain/envprint.py) watches the caches too; this module tells the honest ones apart, so
that a person or an agent compiling modules is not a finding.

A cache is harmless when it is the faithful compilation of its source (its unmarshalled code
object equals ``compile(source)`` at the optimization level its name says: code objects
compare their instructions, constants, names, line table; not their file name) or when this
interpreter never loads it: a ``__pycache__`` file of another interpreter's tag, or with no
source beside its folder; a ``.pyc`` beside its source (the source wins). Anything else —
a sourceless ``.pyc`` outside ``__pycache__``, a cache that does not unmarshal, one whose
code differs — is a change.

The judging runs in the tests' own interpreter (the magic number and the cache tag are per
version), in a subprocess: ``marshal`` is not safe against crafted data, so a crash there
costs a probe, never andon. A probe that fails or times out judges nothing harmless.
"""

from __future__ import annotations

import json
import os
import subprocess

# Run by the tests' interpreter (Python >= 3.8, stdlib only) with ``-I -S`` (no .pth of the
# environment it judges runs); reads a JSON list
# of paths on stdin, prints a JSON list of booleans (harmless?) in the same order.
_PROBE = r"""
import importlib.util, json, marshal, os, sys
def harmless(p):
    folder, name = os.path.split(p)
    if os.path.basename(folder) != "__pycache__":
        return os.path.isfile(p[:-1])
    parts = name.split(".")
    if len(parts) < 3 or parts[1] != sys.implementation.cache_tag:
        return True
    try:
        src = importlib.util.source_from_cache(p)
    except ValueError:
        return True
    if not os.path.isfile(src):
        return True
    level = int(name.split(".opt-")[1].split(".")[0]) if ".opt-" in name else 0
    with open(p, "rb") as f:
        data = f.read()
    with open(src, "rb") as f:
        source = f.read()
    if data[:4] != importlib.util.MAGIC_NUMBER:
        return False
    return marshal.loads(data[16:]) == compile(source, src, "exec", dont_inherit=True,
                                                optimize=level)
out = []
for p in json.loads(sys.stdin.read()):
    try:
        out.append(bool(harmless(p)))
    except Exception:
        out.append(False)
print(json.dumps(out))
"""

TIMEOUT_S = 60.0


def is_cache(path: str) -> bool:
    """A byte-code cache file or folder: ``*.pyc``, a ``__pycache__`` folder, or anything in
    one (such as the temporary file Python writes a cache to before renaming it)."""
    folder, name = os.path.split(path)
    return (name.endswith(".pyc") or name == "__pycache__"
            or os.path.basename(folder) == "__pycache__")


def needs_judging(path: str) -> bool:
    """A cache entry that can change what a module runs: a ``.pyc`` file, wherever it is.
    Anything else in a ``__pycache__`` folder is never loaded (nor is the folder itself)."""
    return path.endswith(".pyc")


def harmless(paths: list[str], interpreter: str) -> set[str]:
    """Those of ``paths`` (absolute ``.pyc`` paths) that ``interpreter`` would never load or
    that hold exactly their source's code (see the module doc). Raises nothing: a probe that
    cannot run, crashes or answers in another shape makes the answer empty."""
    if not paths:
        return set()
    try:
        proc = subprocess.run([interpreter, "-I", "-S", "-c", _PROBE], capture_output=True,
                              input=json.dumps(paths).encode(), timeout=TIMEOUT_S,
                              env={"PATH": os.environ.get("PATH", "")})
        answers = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return set()
    if proc.returncode != 0 or not isinstance(answers, list) or len(answers) != len(paths):
        return set()
    return {p for p, ok in zip(paths, answers, strict=True) if ok is True}
