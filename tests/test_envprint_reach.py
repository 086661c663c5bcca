"""contain/envprint.py and envlayout.py reach everything the tests' interpreter reads at
start-up, and contain/bytecode.py judges no dormant or mislabelled cache harmless: the holes a
fourth adversary pass found, each a way to change what a fresh ``python -I`` process runs
while the watch reported nothing.

Each test first shows that the cheat really changes what such a process runs, then that the
watch names the path. Nothing is written outside ``tmp_path``: interpreters are a throwaway
base (helpers.private_base) or a venv made from one.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import py_compile
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from andon.contain import envprint
from andon.contain.envprint import Layout

from helpers import (
    NoPrivateBase,
    fake_layout,
    forged_cache,
    interpreter_facts,
    link_stdlib,
    needs_python,
)
from helpers import private_base as _private_base

TAG = sys.implementation.cache_tag
VER = f"{sys.version_info[0]}.{sys.version_info[1]}"


def private_base(tmp: Path, python: str | None = None) -> tuple[Path, Path]:
    try:
        return _private_base(tmp, python)
    except NoPrivateBase as exc:
        pytest.skip(str(exc))


def venv_over(base_python: Path, tmp: Path) -> tuple[Path, Path]:
    """(python, site-packages) of a venv made with ``base_python``."""
    subprocess.run([str(base_python), "-m", "venv", "--without-pip", str(tmp / "venv")],
                   check=True, capture_output=True)
    return tmp / "venv" / "bin" / "python", next((tmp / "venv" / "lib").glob("py*/site-packages"))


def run(python: Path | str, code: str) -> str:
    """What a fresh isolated process of ``python`` prints (as the harness starts tests: -I)."""
    out = subprocess.run([str(python), "-I", "-B", "-c", code], capture_output=True, text=True)
    return (out.stdout + out.stderr).strip()


def with_somepkg(site: Path) -> None:
    (site / "somepkg").mkdir()
    (site / "somepkg" / "__init__.py").write_text("X = 1\n")


# --- 1. sys.path entries that do not exist when the watch starts -------------------------

def test_a_stdlib_zip_created_on_the_start_up_path_is_a_change(tmp_path):
    """Every CPython start-up path begins with ``<prefix>/lib/pythonXY.zip``, which almost
    never exists. layout() skips every path entry that is not a folder ("zips never change
    in place"), so creating that zip is not seen — and it comes before the standard library
    and site-packages, so it shadows any module (pytest itself included)."""
    python, site = private_base(tmp_path)
    with_somepkg(site)
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "import somepkg; print(somepkg.X)") == "1"
    zpath = python.parent.parent / "lib" / f"python{VER.replace('.', '')}.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("somepkg/__init__.py", "X = 666\n")
    assert run(python, "import somepkg; print(somepkg.X)") == "666"  # the cheat works
    assert str(zpath) in {p for p, _ in watch.changed()}


def private_system_python(tmp: Path) -> Path:
    """The machine's distribution Python (Debian's ``/usr/bin/python3``, statically linked,
    prefix computed from its place) relocated under ``tmp/usr``: its site folders are
    Debian's ``local/lib/python3.X/dist-packages``, ``lib/python3/dist-packages`` … under
    ``tmp``, none of which exists yet."""
    exe = Path("/usr/bin/python3")
    if not exe.exists():
        pytest.skip("no /usr/bin/python3")
    exe = exe.resolve()
    stdlib = Path("/usr/lib") / exe.name
    if not (stdlib / "os.py").exists():
        pytest.skip(f"no {stdlib}")
    usr = tmp / "usr"
    (usr / "bin").mkdir(parents=True)
    shutil.copy2(exe, usr / "bin" / exe.name)
    link_stdlib(stdlib, usr / "lib" / exe.name)
    python = usr / "bin" / exe.name
    if run(python, "import sys; print(sys.prefix)") != str(usr):
        pytest.skip(f"{exe} cannot be relocated")
    return python


def test_a_site_folder_that_does_not_exist_yet_is_a_change(tmp_path):
    """site.getsitepackages() names folders that need not exist — on Debian and Ubuntu
    ``/usr/local/lib/python3.X/dist-packages`` (before any ``sudo pip install``) and
    ``/usr/lib/python3/dist-packages`` (no python3-* package installed), whose parents are on
    no start-up path. layout() keeps only existing site folders, so one created later with a
    ``.pth`` in it is never walked — and every later process's site module runs it."""
    python = private_system_python(tmp_path)
    out = subprocess.run([str(python), "-I", "-c", "import site; print(*site.getsitepackages(),"
                          " sep='\\n')"], capture_output=True, text=True).stdout.split()
    site = next((Path(p) for p in out if not Path(p).exists()
                 and Path(p).parent.name != python.name), None)
    if site is None:
        pytest.skip(f"every site folder of {python} is there or in a watched folder: {out}")
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "print('HOOKED' in dir(__builtins__))") == "False"
    site.mkdir(parents=True)
    (site / "zz.pth").write_text("import builtins; builtins.HOOKED = 666\n")
    assert run(python, "print(HOOKED)") == "666"  # the cheat works
    assert {str(site), str(site / "zz.pth")} & {p for p, _ in watch.changed()}


# --- 2. the interpreter's own folder ---------------------------------------------------

def _pth_file(python: Path, evil: Path, site: Path) -> Path:
    """``<executable>._pth`` (read on Linux too since 3.11; -I cannot turn it off) replaces
    sys.path: a folder of the agent's first."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    pth = python.parent / (python.name + "._pth")
    pth.write_text(f"{evil}\n{stdlib}\n{stdlib}/lib-dynload\n{site}\nimport site\n")
    return pth


def _base_pth_file(python: Path, evil: Path, site: Path) -> Path:
    """The same ``._pth`` beside the *base* executable the venv's ``bin/python`` links to:
    read for every venv made from that base."""
    real = python.resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    pth = real.parent / (real.name + "._pth")
    pth.write_text(f"{evil}\n{stdlib}\n{stdlib}/lib-dynload\n{site}\nimport site\n")
    return pth


def _wrapper(python: Path, evil: Path, site: Path) -> Path:
    """``bin/python`` (a symlink) replaced by a script running the real one with an extra
    option: here ``-X pycache_prefix``, a cache folder nobody watches, -I kept."""
    real = python.parent / ".python-real"
    python.rename(real)
    python.write_text(f'#!/bin/sh\nexec "{real}" -X pycache_prefix={evil}/pyc "$@"\n')
    python.chmod(0o755)
    src = site / "somepkg" / "__init__.py"
    st = src.stat()
    cache = Path(f"{evil}/pyc{src.parent}/__init__.{TAG}.pyc")  # where -X pycache_prefix looks
    cache.parent.mkdir(parents=True)
    cache.write_bytes(importlib.util.MAGIC_NUMBER + bytes(4)
                      + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                      + st.st_size.to_bytes(4, "little")
                      + marshal.dumps(compile("X = 666\n", str(src), "exec")))
    return python


def _bin_pyvenv_cfg(python: Path, evil: Path, site: Path) -> Path:
    """site.py reads ``bin/pyvenv.cfg`` before ``<prefix>/pyvenv.cfg`` (the watched one):
    include-system-site-packages = true through a file nobody watches. The base's
    site-packages (here holding a pre-existing .pth) joins the path."""
    cfg = python.parent / "pyvenv.cfg"
    cfg.write_text((python.parent.parent / "pyvenv.cfg").read_text().replace(
        "include-system-site-packages = false", "include-system-site-packages = true"))
    return cfg


@pytest.mark.parametrize("forge", [_pth_file, _base_pth_file, _wrapper, _bin_pyvenv_cfg],
                         ids=lambda f: f.__name__.strip("_"))
def test_the_interpreters_own_folder_is_watched(tmp_path, forge):
    """The interpreter the harness starts (``venv/bin/python``) and what CPython reads beside
    it are not fingerprinted: only ``<prefix>/pyvenv.cfg`` is. Each variant makes
    ``import somepkg`` give 666 for a venv whose site-packages says ``X = 1``."""
    base, base_site = private_base(tmp_path)
    # the base's own site-packages: not on the venv's path, not watched (already there)
    (base_site / "zz_base.pth").write_text(
        "import sys, types; m = sys.modules['somepkg'] = types.ModuleType('somepkg'); m.X = 666\n")
    python, site = venv_over(base, tmp_path)
    with_somepkg(site)
    evil = tmp_path / "evil"
    (evil / "somepkg").mkdir(parents=True)
    (evil / "somepkg" / "__init__.py").write_text("X = 666\n")
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert watch.changed() == []
    assert run(python, "import somepkg; print(somepkg.X)") == "1"
    path = forge(python, evil, site)
    assert run(python, "import somepkg; print(somepkg.X)") == "666"  # the cheat works
    assert str(path) in {p for p, _ in watch.changed()}, watch.changed()


# --- 3. what a folder that is watched points to -----------------------------------------

def test_a_symlink_in_site_packages_is_watched_through_to_its_target(tmp_path):
    """An installed file that is a symbolic link (uv's ``--link-mode symlink`` into its
    cache, Nix profiles, a package linked in by hand) is fingerprinted by lstat only: the
    target, outside every watched folder, can be rewritten unseen."""
    python, site = private_base(tmp_path)
    store = tmp_path / "cache" / "somepkg"
    store.mkdir(parents=True)
    (store / "__init__.py").write_text("X = 1\n")
    (site / "somepkg").mkdir()
    (site / "somepkg" / "__init__.py").symlink_to(store / "__init__.py")
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "import somepkg; print(somepkg.X)") == "1"
    (store / "__init__.py").write_text("X = 666\n")
    assert run(python, "import somepkg; print(somepkg.X)") == "666"  # the cheat works
    assert str(site / "somepkg" / "__init__.py") in {p for p, _ in watch.changed()}


def editable_finder(site: Path, src: Path) -> None:
    """A setuptools-style editable install of package ``dep`` from ``src``: a finder module
    mapping it there, put on ``sys.meta_path`` by a ``.pth`` in ``site``."""
    (site / "__editable___dep_1_0_finder.py").write_text(
        "import importlib.util, sys\n"
        f"MAPPING = {{'dep': {str(src)!r}}}\n"
        "class _Finder:\n"
        "    @classmethod\n"
        "    def find_spec(cls, name, path=None, target=None):\n"
        "        if name in MAPPING:\n"
        "            return importlib.util.spec_from_file_location(\n"
        "                name, MAPPING[name] + '/__init__.py',\n"
        "                submodule_search_locations=[MAPPING[name]])\n"
        "def install():\n"
        "    sys.meta_path.append(_Finder)\n")
    (site / "__editable__.dep-1.0.pth").write_text(
        "import __editable___dep_1_0_finder; __editable___dep_1_0_finder.install()\n")


def test_an_editable_finders_source_folder_is_watched(tmp_path):
    """setuptools' editable installs (``__editable___<dist>_finder.py``, put on
    ``sys.meta_path`` by a ``.pth``) map a package to a folder that is not on sys.path:
    layout() never sees it, not even at its top level."""
    python, site = private_base(tmp_path)
    src = tmp_path / "elsewhere" / "dep"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("X = 1\n")
    editable_finder(site, src)
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "import dep; print(dep.X)") == "1"
    (src / "__init__.py").write_text("X = 666\n")
    assert run(python, "import dep; print(dep.X)") == "666"  # the cheat works
    assert str(src / "__init__.py") in {p for p, _ in watch.changed()}


def test_a_subpackage_of_an_editable_finders_source_folder_is_watched(tmp_path):
    """The folder an editable finder maps to is the package itself: its subpackages are
    imported from there too, so it is walked to the bottom, not at its top level only."""
    python, site = private_base(tmp_path)
    src = tmp_path / "elsewhere" / "dep"
    (src / "sub").mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "sub" / "__init__.py").write_text("")
    (src / "sub" / "val.py").write_text("X = 1\n")
    editable_finder(site, src)
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "from dep.sub import val; print(val.X)") == "1"
    (src / "sub" / "val.py").write_text("X = 666\n")
    assert run(python, "from dep.sub import val; print(val.X)") == "666"  # the cheat works
    assert str(src / "sub" / "val.py") in {p for p, _ in watch.changed()}


def test_a_subpackage_of_a_source_folder_a_pth_puts_on_the_path_is_watched(tmp_path):
    """An editable install by path (``pip install -e`` with hatchling, flit, PDM, or
    ``setup.py develop``: a ``.pth`` naming a sibling checkout's ``src``): the tests import
    every package below it. Its folders are walked to the bottom; the hidden ones, which no
    import can name (``.git``, ``.venv``), and the user's checkout below it are left out."""
    python, site = private_base(tmp_path)
    src = tmp_path / "sibling" / "src"
    (src / "dep" / "sub").mkdir(parents=True)
    (src / "dep" / "__init__.py").write_text("")
    (src / "dep" / "sub" / "__init__.py").write_text("")
    (src / "dep" / "sub" / "val.py").write_text("X = 1\n")
    for skipped in (".git/objects", ".venv/lib"):
        (src / skipped).mkdir(parents=True)
        (src / skipped / "f").write_text("1\n")
    (site / "_dep.pth").write_text(str(src) + "\n")
    checkout = src / "work" / "app"  # the user's checkout below it: the gates' business
    checkout.mkdir(parents=True)
    (checkout / "app.py").write_text("X = 1\n")
    where = envprint.layout(str(python), (checkout,))
    watch = envprint.Watch(where)
    assert run(python, "from dep.sub import val; print(val.X)") == "1"
    (src / "dep" / "sub" / "val.py").write_text("X = 666\n")
    for skipped in (".git/objects", ".venv/lib"):
        (src / skipped / "f").write_text("2\n")
    (checkout / "app.py").write_text("X = 2\n")
    assert run(python, "from dep.sub import val; print(val.X)") == "666"  # the cheat works
    assert {p for p, _ in watch.changed()} == {str(src / "dep" / "sub" / "val.py")}
    stdlib = os.path.dirname(run(python, "import os; print(os.__file__)"))
    assert stdlib in where.top  # the standard library stays top level only


def test_nothing_written_into_a_source_folder_hides_a_folder_of_it_from_the_walk(tmp_path):
    """What leaves a folder of a source folder out of the walk is its name (hidden) or where
    it is (the checkout), never what it holds: a ``pyvenv.cfg`` dropped beside forged
    caches in a ``__pycache__`` (a review helper's cheat, when a folder holding one was taken
    for a venv and skipped) is itself an addition, and so is each cache."""
    python, site = private_base(tmp_path)
    src = tmp_path / "sibling" / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "mod.py").write_text("X = 1\n")
    (src / "pkg" / "__init__.py").write_text("X = 1\n")
    (site / "_sib.pth").write_text(f"{src}\n")
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "import mod, pkg; print(mod.X, pkg.X)") == "1 1"
    forged = [forged_cache(src / "mod.py", "X = 666\n"),
              forged_cache(src / "pkg" / "__init__.py", "X = 666\n")]
    for cache in forged:
        (cache.parent / "pyvenv.cfg").write_text("")
    assert run(python, "import mod, pkg; print(mod.X, pkg.X)") == "666 666"  # the cheat works
    changed = {p for p, _ in watch.changed()}
    assert {str(c) for c in forged} | {str(c.parent / "pyvenv.cfg") for c in forged} <= changed


def test_a_remembered_answer_is_asked_again_after_a_forged_start_up_cache(tmp_path):
    """envprint.watch reuses where the interpreter looks only while a walk equals the one
    taken right after asking, byte-code caches included: a ``.pth`` imports a module whose
    forged cache puts another folder on the start-up path, and the digest the results cache
    uses (caches left out) would not have moved (a review helper's reproduction)."""
    python, site = private_base(tmp_path)
    (site / "_hook.py").write_text("")
    (site / "hook.pth").write_text("import _hook\n")
    first = envprint.watch(str(python), ())
    evil = tmp_path / "evil"
    evil.mkdir()
    forged_cache(site / "_hook.py", f"import sys; sys.path.append({str(evil)!r})\n")
    assert str(evil) in run(python, "import sys; print(sys.path)")  # the cheat works
    again = envprint.watch(str(python), ())
    assert again.digest == first.digest  # the results cache's digest did not move
    assert str(evil) in again.where.sources


def test_a_standard_library_landmark_made_beside_the_base_interpreter_is_a_change(tmp_path):
    """A start-up looks for its prefix from the executable's folder (a venv's ``home``)
    upward, taking the first folder with ``lib/pythonX.Y/os.py``: made in the base's
    ``bin`` (user-writable under pyenv, uv, conda), a standard library there replaces the
    real one for every test process (a review helper's reproduction). Each landmark on that
    way is watched, absent until made."""
    python, _site = private_base(tmp_path)
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True, capture_output=True)
    vpy = tmp_path / "venv" / "bin" / "python"
    watch = envprint.Watch(envprint.layout(str(vpy), ()))
    real = Path(run(vpy, "import os; print(os.__file__)")).parent
    fake = python.parent / "lib" / real.name
    fake.mkdir(parents=True)
    for e in real.iterdir():  # the real standard library, linked, with json replaced
        if e.name != "json":
            (fake / e.name).symlink_to(e.resolve())
    (fake / "json").mkdir()
    (fake / "json" / "__init__.py").write_text("X = 666\n")
    assert run(vpy, "import json; print(json.X)") == "666"  # the cheat works
    assert str(fake / "os.py") in {p for p, _ in watch.changed()}


# --- 4. byte code the probe judges harmless ---------------------------------------------

def fake(tmp_path: Path) -> Layout:
    return fake_layout(tmp_path, sys.executable)  # judged by this interpreter


def test_a_dormant_cache_that_loads_for_any_source_is_a_change(tmp_path):
    """A ``__pycache__`` cache with no source beside it is judged harmless ("only ever
    loaded for its source"), and the probe never reads the header. With the
    *unchecked-hash* flag Python loads it for whatever source appears later, without
    comparing anything. So the agent plants the payload outside the worktree, judged
    harmless at every compare; the code under test needs only to create an empty
    ``helper.py`` beside it for the length of a test run and remove it again (nothing left
    for the compare after the gate) — the payload never appears in the diff."""
    where = fake(tmp_path)
    site = Path(where.site[0])
    watch = envprint.Watch(where)
    cache = site / "__pycache__" / f"helper.{TAG}.pyc"
    cache.parent.mkdir()
    cache.write_bytes(importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little") + bytes(8)
                      + marshal.dumps(compile("X = 666\n", "helper.py", "exec")))
    found_while_planted = {p for p, _ in watch.changed()}
    (site / "helper.py").write_text("X = 1\n")  # the trigger, any content
    try:
        out = run(sys.executable, f"import sys; sys.path.insert(0, {str(site)!r}); "
                                  "import helper; print(helper.X)")
    finally:
        (site / "helper.py").unlink()
    assert out == "666"  # the cheat works: the source says X = 1
    assert str(cache) in found_while_planted


def test_a_nested_function_with_another_file_name_is_a_change(tmp_path):
    """``co_filename`` is the one field left out ("it names the source, it does not run").
    On import, importlib's ``_fix_co_filename`` rewrites it only in code objects whose file
    name equals the top level's, so a nested function that names another file keeps it, and
    everything that reads source through it reads that file instead: ``inspect.getsource``
    (libraries that compile a function's source again, doctest line lookup), tracebacks,
    ``warnings``' registry, logging's caller lookup, coverage's attribution."""
    where = fake(tmp_path)
    src = Path(where.site[0]) / "somepkg" / "__init__.py"
    src.write_text("def f():\n    return 1\n")
    py_compile.compile(str(src), doraise=True)
    watch = envprint.Watch(where)
    decoy = tmp_path / "decoy.py"  # anywhere: the agent's
    decoy.write_text("def f():\n    return 666\n")
    top = compile(src.read_bytes(), str(src), "exec", dont_inherit=True)
    f = next(c for c in top.co_consts if hasattr(c, "co_code"))
    code = top.replace(co_consts=tuple(f.replace(co_filename=str(decoy)) if c is f else c
                                       for c in top.co_consts))
    cache = Path(importlib.util.cache_from_source(str(src)))
    cache.write_bytes(cache.read_bytes()[:16] + marshal.dumps(code))
    probe = (f"import sys, inspect; sys.path.insert(0, {where.site[0]!r}); import somepkg; "
             "ns = {}; exec(inspect.getsource(somepkg.f), ns); print(ns['f']())")
    assert run(sys.executable, probe) == "666"  # the cheat works: the source says 1
    assert str(cache) in {p for p, _ in watch.changed()}


# --- 5. documented, shown for its reach -------------------------------------------------

def test_the_cache_of_a_watched_top_level_module_is_watched(tmp_path):
    """Documented ("the standard library's subfolders (and their caches) are not walked"),
    but note what it means: the top level of the standard library (``typing.py``,
    ``inspect.py``, ``dataclasses.py`` ...) and of every editable install is watched, and the
    cache Python loads *instead of* each of those files is not — so watching the top level
    protects none of its non-frozen modules."""
    where = fake(tmp_path)
    top = Path(where.top[0])
    (top / "topmod.py").write_text("X = 1\n")
    py_compile.compile(str(top / "topmod.py"), doraise=True)
    watch = envprint.Watch(where)
    cache = forged_cache(top / "topmod.py", "X = 666\n")
    assert run(sys.executable, f"import sys; sys.path.insert(0, {str(top)!r}); "
                               "import topmod; print(topmod.X)") == "666"
    assert str(cache) in {p for p, _ in watch.changed()}


# --- 6. what the same pass found besides holes ------------------------------------------

def test_a_fifo_in_site_packages_is_a_change_not_a_hang(tmp_path):
    """A FIFO named like a file read by content (``x.pth``) blocked the fingerprint for
    ever; only regular files are read, and the FIFO is an addition."""
    where = fake(tmp_path)
    watch = envprint.Watch(where)
    fifo = Path(where.site[0]) / "x.pth"
    os.mkfifo(fifo)
    assert watch.changed() == [(str(fifo), "added")]


def test_an_honest_cache_with_a_nan_constant_is_not_a_change(tmp_path):
    """Code objects compare NaN constants as different (== on floats), so the honest cache
    of a module folding ``1e999 - 1e999`` was a finding."""
    where = fake(tmp_path)
    src = Path(where.site[0]) / "somepkg" / "__init__.py"
    src.write_text("NAN = 1e999 - 1e999\nPAIR = (NAN, -0.0)\n")
    watch = envprint.Watch(where)
    py_compile.compile(str(src), doraise=True)
    assert watch.changed() == []


HOOK = "import sys, types; m = sys.modules['somepkg'] = types.ModuleType('somepkg'); m.X = 666\n"


def make_venv(base_python: Path, where: Path) -> tuple[Path, Path]:
    """(python, site-packages) of a venv made with ``base_python`` at ``where``."""
    subprocess.run([str(base_python), "-m", "venv", "--without-pip", str(where)],
                   check=True, capture_output=True)
    return where / "bin" / "python", next((where / "lib").glob("py*/site-packages"))


# --- 7. a fifth pass: the checkout's venv, encodings, libpython; a crash; false positives

# holes -------------------------------------------------------------------------------

def test_a_venv_inside_the_checkout_is_watched(tmp_path):
    """The runner passes the user's checkout as ``exclude`` ("the gates' business"), and
    layout() drops every site folder under it. ``<checkout>/.venv`` (``uv venv``,
    ``python -m venv .venv``; andon's own checkout is laid out so) then has its whole
    site-packages unwatched: the code under test drops a .pth there."""
    base, _ = private_base(tmp_path)
    checkout = tmp_path / "repo"
    checkout.mkdir()
    python, site = make_venv(base, checkout / ".venv")
    with_somepkg(site)
    watch = envprint.Watch(envprint.layout(str(python), (checkout, tmp_path / "worktrees")))
    assert run(python, "import somepkg; print(somepkg.X)") == "1"
    (site / "zz.pth").write_text(HOOK)
    assert run(python, "import somepkg; print(somepkg.X)") == "666"  # the cheat works
    assert str(site / "zz.pth") in {p for p, _ in watch.changed()}


def test_the_encodings_package_every_process_imports_is_watched(tmp_path):
    """``encodings`` is not frozen in 3.11: every process — ``-I -S`` too, the byte-code
    probe included — imports ``encodings/__init__.py``, ``aliases.py`` and ``utf_8.py``
    from source (or their caches, or an extension module of the same name, which wins)
    before any test or .pth. It is a standard-library subfolder: not walked."""
    python, _ = private_base(tmp_path)
    stdlib = Path(run(python, "import os; print(os.path.dirname(os.__file__))"))
    enc = stdlib / "encodings"
    real = enc.resolve()
    enc.unlink()  # private_base links it to the machine's; a real stdlib holds the folder
    shutil.copytree(real, enc, ignore=shutil.ignore_patterns("__pycache__"))
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "import somepkg; print(somepkg.X)").endswith("No module named 'somepkg'")
    with (enc / "__init__.py").open("a") as f:
        f.write("\n" + HOOK)
    assert run(python, "import somepkg; print(somepkg.X)") == "666"  # the cheat works
    assert str(enc / "__init__.py") in {p for p, _ in watch.changed()}


SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
/* the executable's one import from libpython: prepend a line to every -c program */
int Py_BytesMain(int argc, char **argv) {
    void *real = dlopen(REAL, RTLD_NOW | RTLD_GLOBAL);
    int (*main_)(int, char **) = (int (*)(int, char **))dlsym(real, "Py_BytesMain");
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-c") == 0) {
            char *code = malloc(strlen(HOOK) + strlen(argv[i + 1]) + 1);
            strcpy(code, HOOK);
            strcat(code, argv[i + 1]);
            argv[i + 1] = code;
            break;
        }
    return main_(argc, argv);
}
"""


# a build whose executable loads libpython through a RUNPATH naming its LIBDIR (pyenv's; not
# Debian's /usr/bin/python3.11, a static executable, which the suite's venv is made from)
SHARED_BUILD = """
import os, sys, sysconfig
libdir = sysconfig.get_config_var("LIBDIR") or ""
data = open(os.path.realpath(sys._base_executable), "rb").read()
assert sysconfig.get_config_var("Py_ENABLE_SHARED") and len(libdir) >= 14
assert data.count(libdir.encode() + b"\\0") == 1
"""


def test_the_shared_libpython_the_executable_loads_is_watched(tmp_path):
    """A shared build's ``bin/python3.11`` is a stub: everything is in
    ``<prefix>/lib/libpython3.11.so.1.0``, found through the executable's RUNPATH
    (``$ORIGIN/../lib`` in python-build-standalone / uv's managed Pythons; pyenv's absolute
    ``<prefix>/lib``). That folder is on no path and not watched (only a
    ``libpython3.11.so._pth`` in it is). A library put there in its place runs before
    Python does. Here the copy's RUNPATH is made ``$ORIGIN/../lib`` (same length or shorter,
    patched in place) so the throwaway base loads the library from its own ``lib``."""
    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    shared = needs_python(SHARED_BUILD, "a shared libpython loaded through a RUNPATH (pyenv's)")
    python, _ = private_base(tmp_path, shared)
    facts = interpreter_facts(shared)
    libdir, soname = facts["libdir"], facts["soname"]
    data = python.read_bytes()
    old, new = libdir.encode() + b"\0", b"$ORIGIN/../lib\0"
    assert data.count(old) == 1 and len(new) <= len(old)  # SHARED_BUILD checked both
    python.write_bytes(data.replace(old, new.ljust(len(old), b"\0")))
    lib = python.parent.parent / "lib" / soname  # private_base: a link to the real one
    assert lib.is_symlink() and run(python, "print(1)") == "1"
    watch = envprint.Watch(envprint.layout(str(python), ()))
    assert run(python, "import somepkg; print(somepkg.X)").endswith("No module named 'somepkg'")
    src = tmp_path / "shim.c"
    src.write_text(SHIM)
    built = tmp_path / "shim.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(built), str(src), "-ldl",
                    f'-DREAL="{Path(libdir) / soname}"',
                    "-DHOOK=" + '"' + HOOK.replace("'", "\\'").replace("\n", "\\n") + '"'],
                   check=True, capture_output=True)
    lib.unlink()
    shutil.move(built, lib)
    assert run(python, "import somepkg; print(somepkg.X)") == "666"  # the cheat works
    assert str(lib) in {p for p, _ in watch.changed()}


# --- denial of service -------------------------------------------------------------------

def test_a_huge_sparse_pth_is_a_change_not_a_crash(tmp_path):
    """``.pth``, ``*customize.py``, ``pyvenv.cfg`` are read whole into memory to hash them:
    a sparse ``x.pth`` of 64 GiB (one ``truncate``, no disk used) makes the fingerprint
    raise MemoryError (or, without an address-space limit and with overcommit, fill the
    machine's memory) — an andon crash at every compare and at every later run's start,
    not a finding. Run under a 2 GiB address-space limit in a subprocess."""
    where = fake_layout(tmp_path, sys.executable)
    big = Path(where.site[0]) / "x.pth"
    script = textwrap.dedent(f"""
        import os, resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from andon.contain import envprint
        from andon.contain.envprint import Layout
        watch = envprint.Watch(Layout(*{tuple(where.__dict__.values())!r}))
        with open({str(big)!r}, "wb") as f:
            f.truncate(64 << 30)
        print(watch.changed())
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert str(big) in out.stdout


# --- false positives ---------------------------------------------------------------------

def test_an_honest_cache_with_a_string_set_constant_is_not_a_change(tmp_path):
    """``x in {"a", "b", ...}`` compiles to a frozenset constant. String hashes are salted
    per process, so the frozenset the writer marshalled (its iteration order) and the one
    the probe compiles, rebuilt in another salt, iterate in different orders whenever
    entries collide; the probe compares frozensets in iteration order, so an honest cache
    is judged forged about half the time. ``_pytest/python.py``, ``_pytest/config``, pip,
    ``typing.py``, ``subprocess.py``, ``pathlib.py`` ... hold such sets: an agent's first
    ``pytest`` in a venv installed without byte code (uv's default) is rejected."""
    where = fake_layout(tmp_path, sys.executable)
    src = Path(where.site[0]) / "somepkg" / "names.py"
    names = ", ".join(repr(f"name{i}") for i in range(64))
    src.write_text(f"def known(x):\n    return x in {{{names}}}\n")
    watch = envprint.Watch(where)
    for seed in range(8):  # eight honest writers, each compiling the source as import does
        subprocess.run([sys.executable, "-c", "import py_compile; "
                        f"py_compile.compile({str(src)!r}, doraise=True)"],
                       check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)})
        assert watch.changed() == [], f"writer seed {seed}"


def test_an_honest_cache_inside_a_linked_package_folder_is_not_a_change(tmp_path):
    """A package folder in site-packages that is a link (``flit install --symlink``, a
    package linked in by hand, a Nix/Guix profile) is marked with its target's stat — the
    folder's mtime and ctime, which the module doc says are not watched because "they
    change with every honest cache written". Python making ``__pycache__`` in it (any
    honest import without -B) changes the link's marker: a finding."""
    where = fake_layout(tmp_path, sys.executable)
    store = tmp_path / "store" / "linkedpkg"
    store.mkdir(parents=True)
    (store / "__init__.py").write_text("X = 1\n")
    (Path(where.site[0]) / "linkedpkg").symlink_to(store)
    watch = envprint.Watch(where)
    subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, "
                    f"{where.site[0]!r}); import linkedpkg"], check=True)  # caches written
    assert (store / "__pycache__").is_dir()
    assert watch.changed() == []


def test_a_tool_installed_beside_the_base_interpreter_is_not_a_change(tmp_path):
    """The folder of every executable on the way to the venv's python is watched whole.
    For the base's ``bin`` (pyenv's ``versions/3.11.7/bin``, Homebrew's ``/opt/homebrew/bin``,
    Debian's ``/usr/bin``, a pyenv ``shims`` folder when ``[test] command`` names one) that
    is every tool a person or an agent installs there (``pip install black`` into the base,
    ``brew``/``apt-get install``, ``pyenv rehash``), none of which a venv process reads —
    only the named executables, ``<exe>._pth``, ``pyvenv.cfg`` and ``pybuilddir.txt`` are."""
    base, _ = private_base(tmp_path)
    python, _ = make_venv(base, tmp_path / "venv")
    watch = envprint.Watch(envprint.layout(str(python), ()))
    before = run(python, "import sys; print(sys.path)")
    tool = base.parent / "black"  # what `base -m pip install black` writes there
    tool.write_text(f"#!{base}\nimport sys\nsys.exit(0)\n")
    tool.chmod(0o755)
    assert run(python, "import sys; print(sys.path)") == before
    assert watch.changed() == []
