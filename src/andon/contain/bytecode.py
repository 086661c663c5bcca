"""Which new or rewritten byte-code caches in the tests' interpreter environment are harmless.

Python loads ``__pycache__/<module>.<tag>.pyc`` instead of compiling the source whenever the
cache's header matches the source file (its mtime and size, or its hash) — ``-B`` and
``PYTHONDONTWRITEBYTECODE`` stop writing caches, not reading them. So the code under test
can write a cache whose code is not its source's (``X = 666`` for a module that says
``X = 1``, or a forged ``_pytest`` module) and every later test process in that environment
runs it, while the source files stay byte for byte the same. The environment fingerprint
(contain/envprint.py) watches the caches too; this module tells the honest ones apart, so
that a person or an agent compiling modules is not a finding.

A cache is harmless when it is the faithful compilation of its source — its unmarshalled
code object and ``compile(source)`` at the optimization level its name says agree in every
field the interpreter's code objects expose, in it and in every code object nested in it (not
a chosen list, and not ``==``, which maps a specialized instruction back to its generic form,
skips the inline caches, the stack size, the qualified name and the local names, and finds
two NaN constants different), each constant by type and, for tuples and frozensets, in
iteration order (a frozenset holding strings or bytes as a set: their hashes are salted per
process, so no two processes iterate it alike), and every nested code object naming the top
level's file — or when this
interpreter never loads it: a ``__pycache__`` file of another interpreter's tag, a ``.pyc``
beside its source (the source wins). Anything else is a change: a cache that is a symbolic
link, one in ``__pycache__`` with no tag at all (importable as ``__pycache__.<name>``) or
with no source beside its folder (dormant: loaded for whatever source appears later, and an
unchecked-hash header compares nothing), a cache of another loader for this interpreter
(pytest's assertion-rewrite caches, ``<tag>-pytest-<version>``, which andon cannot
reproduce; harness runs never write them), one that does not unmarshal or whose code
differs, a sourceless ``.pyc`` outside ``__pycache__``.

The judging runs in the tests' own interpreter (the magic number and the cache tag are per
version), in a subprocess: ``marshal`` is not safe against crafted data, so a crash there
costs a probe, never andon. A probe that fails or times out judges nothing harmless. The
probe reads no byte-code cache (an empty ``-X pycache_prefix``) and imports only built-in
and frozen modules where it can, so the caches it judges cannot make it lie.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

# Run by the tests' interpreter (Python >= 3.8, stdlib only) with ``-I -S`` (no .pth of the
# environment it judges runs); reads a JSON list
# of paths on stdin, prints a JSON list of booleans (harmless?) in the same order.
_PROBE = r"""
import marshal, os, sys
from _frozen_importlib_external import MAGIC_NUMBER
TAG = sys.implementation.cache_tag

# Every field this interpreter's code objects expose (co_* and _co_*, not the methods
# co_lines/co_positions, which read co_linetable) is compared, so a field a later version
# adds is compared too. Not ==: it maps specialized instructions back to their generic form,
# skips the stack size, the qualified name and the local names, and calls two equal NaN
# constants different. The file name is compared in nested code objects only: importlib
# rewrites the top level's (compileall -d, a moved environment) and only those of nested
# ones that name the same file, so a nested one naming another file keeps it, and
# inspect.getsource, tracebacks and doctest read that file instead.
def fields(code):
    return [n for n in dir(code) if n.startswith(("co_", "_co_")) and n != "co_filename"
            and not callable(getattr(code, n))]

def same(a, b, top):
    if fields(a) != fields(b) or (a is not top and a.co_filename != top.co_filename):
        return False
    for f in fields(a):
        x, y = getattr(a, f), getattr(b, f)
        if f == "co_consts":
            if len(x) != len(y) or not all(same_const(i, j, top) for i, j in zip(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True

def same_const(x, y, top):
    # by type and, for tuples and frozensets, in the order the code iterates them
    if type(x) is not type(y):
        return False
    if hasattr(x, "co_code"):
        return same(x, y, top)
    if isinstance(x, frozenset) and any(salted(i) for i in x):
        # str and bytes hash with a per-process salt: such a set iterates in another order
        # in every process, the writer's and the probe's too, so no code can rely on it
        return sorted(map(canon, x)) == sorted(map(canon, y))
    if isinstance(x, (tuple, frozenset)):
        x, y = list(x), list(y)
        return len(x) == len(y) and all(same_const(i, j, top) for i, j in zip(x, y))
    return repr(x) == repr(y) if isinstance(x, (float, complex)) else x == y

def salted(x):
    return isinstance(x, (str, bytes)) or (
        isinstance(x, (tuple, frozenset)) and any(salted(i) for i in x))

def canon(x):
    # a sortable picture of a constant that keeps its type and ignores set order
    if isinstance(x, tuple):
        return ("tuple", tuple(canon(i) for i in x))
    if isinstance(x, frozenset):
        return ("frozenset", tuple(sorted(canon(i) for i in x)))
    return (type(x).__name__, repr(x))

def harmless(p):
    folder, name = os.path.split(p)
    if os.path.islink(p):
        return False
    if os.path.basename(folder) != "__pycache__":
        return os.path.isfile(p[:-1])  # beside its source, which wins
    i = name.rfind("." + TAG) if TAG else -1
    if i <= 0:  # no tag: importable as __pycache__.<name>; another tag: never loaded
        return name.count(".") > 1
    stem, rest = name[:i], name[i + 1 + len(TAG):]
    src = os.path.join(os.path.dirname(folder), stem + ".py")
    if not os.path.isfile(src):
        # dormant: loaded for any source that appears later (an unchecked-hash header
        # compares nothing), which the code under test can write and remove in one run
        return False
    if rest == ".pyc":
        level = 0
    elif rest.startswith(".opt-") and rest[5:-4].isdigit() and rest.endswith(".pyc"):
        level = int(rest[5:-4])
    else:  # another loader's cache for this interpreter (pytest's assertion rewriting)
        return False
    with open(p, "rb") as f:
        data = f.read()
    with open(src, "rb") as f:
        source = f.read()
    if data[:4] != MAGIC_NUMBER:
        return False
    code = marshal.loads(data[16:])
    return hasattr(code, "co_code") and same(
        code, compile(source, src, "exec", dont_inherit=True, optimize=level), code)

# NUL-separated paths in, one 1 (harmless) or 0 per path out: no json, which this
# interpreter would import from a folder of its own standard library
out = []
for p in sys.stdin.buffer.read().split(b"\0"):
    try:
        out.append("1" if harmless(os.fsdecode(p)) else "0")
    except Exception:
        out.append("0")
print("".join(out))
"""

TIMEOUT_S = 60.0


# what importlib writes a cache to before renaming it into place: "<cache>.<id>"
_TEMPORARY = re.compile(r".+\.pyc\.[0-9]+")


def honest_or_judged(path: str, how: str, marker: object) -> str:
    """What :class:`~andon.contain.envprint.Watch` does with one difference: ``"keep"`` it
    (a change), ``"drop"`` it (byte-code caching, no change of behaviour) or ``"judge"`` it
    (a new or rewritten ``.pyc``: :func:`harmless` decides). ``marker`` is the entry's
    fingerprint marker now (None when deleted).

    Dropped: a ``__pycache__`` folder made or deleted (a real folder, not a link), a cache
    deleted from one (Python compiles the source again), importlib's temporary file in one.
    Anything else new in a ``__pycache__`` folder, a ``.pyc`` outside one deleted (it may be
    a module with no source), and every change that is not byte code are kept."""
    folder, name = os.path.split(path)
    in_cache = os.path.basename(folder) == "__pycache__"
    if name == "__pycache__":
        return "drop" if marker in ("dir", None) else "keep"
    if in_cache and how == "deleted" and name.endswith(".pyc"):
        return "drop"
    if in_cache and _TEMPORARY.fullmatch(name):
        return "drop"
    if name.endswith(".pyc") and how != "deleted":
        return "judge"
    return "keep"


def harmless(paths: list[str], interpreter: str) -> set[str]:
    """Those of ``paths`` (absolute ``.pyc`` paths) that ``interpreter`` would never load or
    that hold exactly their source's code (see the module doc). Raises nothing: a probe that
    cannot run, crashes or answers in another shape makes the answer empty."""
    if not paths:
        return set()
    try:
        # no byte-code cache read (an empty pycache prefix) or written: the probe's own
        # imports are compiled from their sources, so a forged cache cannot make it lie
        with tempfile.TemporaryDirectory() as empty:
            proc = subprocess.run(
                [interpreter, "-I", "-S", "-B", "-X", f"pycache_prefix={empty}", "-c", _PROBE],
                capture_output=True, input=b"\0".join(os.fsencode(p) for p in paths),
                timeout=TIMEOUT_S, env={"PATH": os.environ.get("PATH", "")})
        answers = proc.stdout.decode("ascii").strip()
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return set()
    if proc.returncode != 0 or len(answers) != len(paths) or set(answers) - {"0", "1"}:
        return set()
    return {p for p, ok in zip(paths, answers, strict=True) if ok == "1"}
