"""contain/envprint.py: the fingerprint of the tests' interpreter environment sees a `.pth`,
a `sitecustomize.py`, an edited installed module and a new user site, ignores byte-code
caches, follows HOME, asks another interpreter where it looks, and says how to restore."""

from __future__ import annotations

import dis
import importlib.util
import marshal
import os
import py_compile
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from andon.contain import envprint
from andon.contain.envprint import Layout
from andon.contain.interpreter import python_of

from helpers import fake_layout, forged_cache, nest_deep


def fake(tmp_path: Path) -> Layout:
    return fake_layout(tmp_path)


def test_an_added_pth_is_an_addition_with_an_rm_to_restore(tmp_path):
    where = fake(tmp_path)
    before = envprint.fingerprint(where)
    pth = Path(where.site[0]) / "zz_hook.pth"
    pth.write_text("import sys\n")
    changed = envprint.changes(before, envprint.fingerprint(where))
    assert changed == [(str(pth), "added")]
    text, cmds = envprint.describe(changed, where, "while the implement agent ran")
    assert cmds == [f"rm {pth}"]
    assert str(pth) in text and "if you did not make this change, an agent did" in text.lower()


def test_a_pth_rewritten_with_same_size_and_mtime_is_still_seen(tmp_path):
    where = fake(tmp_path)
    pth = Path(where.site[0]) / "paths.pth"
    pth.write_text("/some/where\n")
    st = pth.stat()
    before = envprint.fingerprint(where)
    with open(pth, "r+") as f:  # in place: the inode stays
        f.write("import os\n ")
    os.utime(pth, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert pth.stat().st_size == st.st_size
    assert envprint.changes(before, envprint.fingerprint(where)) == [(str(pth), "modified")]


def test_an_edited_installed_module_is_restored_by_reinstalling_its_distribution(tmp_path):
    where = fake(tmp_path)
    before = envprint.fingerprint(where)
    mod = Path(where.site[0]) / "somepkg" / "__init__.py"
    with open(mod, "a") as f:
        f.write("X = 2\n")
    changed = envprint.changes(before, envprint.fingerprint(where))
    assert changed == [(str(mod), "modified")]
    _, cmds = envprint.describe(changed, where, "during the suite gate's test runs")
    assert cmds == [f"{where.interpreter} -m pip install --force-reinstall --no-deps somepkg==1.2"]


def test_sitecustomize_in_a_top_level_path_folder_is_seen_but_deeper_files_are_not(tmp_path):
    where = fake(tmp_path)
    before = envprint.fingerprint(where)
    (Path(where.top[0]) / "sitecustomize.py").write_text("import sys\n")
    (Path(where.top[0]) / "json" / "extra.py").write_text("")  # below the top level
    changed = envprint.changes(before, envprint.fingerprint(where))
    assert changed == [(str(Path(where.top[0]) / "sitecustomize.py"), "added")]


def test_creating_the_user_site_counts_and_a_new_folder_is_removed_whole(tmp_path):
    where = fake(tmp_path)
    before = envprint.fingerprint(where)
    assert before[where.user_site] == "absent"
    user = Path(where.user_site)
    user.mkdir(parents=True)
    (user / "evil.pth").write_text("import evil\n")
    changed = envprint.changes(before, envprint.fingerprint(where))
    assert changed == [(str(user), "added"), (str(user / "evil.pth"), "added")]
    assert envprint.restore_commands(changed, where) == [f"rm -r {user}"]


def with_this_python(where: Layout) -> Layout:
    """``where`` judged by this interpreter: the byte-code probe runs in it."""
    return Layout(sys.executable, where.prefix, where.site, where.user_site, where.top)


def test_honest_byte_code_caches_are_not_a_change(tmp_path):
    """Compiling modules (as a person's or an agent's own python run does), deleting caches,
    another interpreter's cache, a .pyc beside its source: none is a change. (A new cache
    with no source beside it is: test_adversary_four.py, dormant caches.)"""
    where = with_this_python(fake(tmp_path))
    src = Path(where.site[0]) / "somepkg" / "__init__.py"
    old = Path(where.site[0]) / "somepkg" / "__pycache__" / "old.cpython-311.pyc"
    old.parent.mkdir()
    old.write_bytes(b"\0" * 16)
    watch = envprint.Watch(where)
    py_compile.compile(str(src), doraise=True)
    py_compile.compile(str(src), doraise=True, optimize=2,
                       cfile=importlib.util.cache_from_source(str(src), optimization=2))
    old.unlink()
    (old.parent / "__init__.cpython-27.pyc").write_bytes(b"anything")
    (Path(where.site[0]) / "somepkg" / "__init__.pyc").write_bytes(b"the source wins")
    (old.parent / "__init__.cpython-311.pyc.140213").write_bytes(b"half")  # mid-write
    assert watch.changed() == []


def test_a_cache_that_is_not_its_sources_code_is_a_change(tmp_path):
    """Python loads a cache whose header matches its source instead of the source, even
    under -B: the code under test writing one (or rewriting an honest one in place), or a
    sourceless .pyc that imports as a module, is a change like an edited module."""
    where = with_this_python(fake(tmp_path))
    src = Path(where.site[0]) / "somepkg" / "__init__.py"
    py_compile.compile(str(src), doraise=True)
    watch = envprint.Watch(where)
    cache = forged_cache(src, "X = 666\n")  # rewritten in place: same path
    loose = Path(where.site[0]) / "loose.pyc"
    loose.write_bytes(cache.read_bytes())
    garbage = Path(where.site[0]) / "somepkg" / "__pycache__" / "__init__.cpython-311.opt-1.pyc"
    garbage.write_bytes(b"\0" * 16)
    assert watch.changed() == sorted([(str(cache), "modified"), (str(loose), "added"),
                                      (str(garbage), "added")])
    out = subprocess.run([sys.executable, "-I", "-B", "-c",
                          f"import sys; sys.path.insert(0, {where.site[0]!r}); "
                          "import somepkg; print(somepkg.X)"], capture_output=True, text=True)
    assert out.stdout.strip() == "666"  # what the check is for: the source says X = 1


def test_a_cache_the_probe_cannot_judge_is_a_change(tmp_path):
    """An interpreter that cannot run the probe judges nothing harmless."""
    where = fake(tmp_path)  # its interpreter does not exist
    watch = envprint.Watch(where)
    src = Path(where.site[0]) / "somepkg" / "__init__.py"
    py_compile.compile(str(src), doraise=True)
    assert watch.changed() == [(importlib.util.cache_from_source(str(src)), "added")]


def test_a_removed_file_nobody_owns_gets_no_command(tmp_path):
    where = fake(tmp_path)
    (Path(where.site[0]) / "loose.py").write_text("")
    before = envprint.fingerprint(where)
    (Path(where.site[0]) / "loose.py").unlink()
    changed = envprint.changes(before, envprint.fingerprint(where))
    assert changed == [(str(Path(where.site[0]) / "loose.py"), "deleted")]
    assert envprint.restore_commands(changed, where) == []


def test_andons_own_interpreter_user_site_follows_home_now(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONUSERBASE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    where = envprint.layout(None, ())
    assert where.user_site and Path(where.user_site).is_relative_to(tmp_path / "h")
    assert where.interpreter == sys.executable and where.prefix == sys.prefix
    assert set(where.site) >= {p for p in site.getsitepackages() if os.path.isdir(p)}
    monkeypatch.setenv("PYTHONUSERBASE", str(tmp_path / "base"))
    assert Path(envprint.layout(None, ()).user_site).is_relative_to(tmp_path / "base")


def test_the_start_up_path_is_read_not_andons_own(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))  # andon's process only: not a test run's
    where = envprint.layout(None, ())
    assert str(tmp_path) not in where.top
    assert os.path.dirname(os.__file__) in where.top  # the standard library folder


def test_paths_under_the_checkout_are_left_to_the_gates():
    import andon
    src = Path(andon.__file__).resolve().parents[1]  # an editable install puts it on the path
    if str(src) not in envprint.layout(None, ()).sources:
        pytest.skip("andon is not installed editable here")
    where = envprint.layout(None, (src.parent,))
    assert str(src) not in where.sources and str(src) not in where.top


def test_another_interpreter_is_asked_where_it_looks(tmp_path, monkeypatch):
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if sys.prefix == sys.base_prefix or not base.exists():
        pytest.skip("needs andon in a venv over a base interpreter")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    where = envprint.layout(str(base), ())
    assert where.prefix == sys.base_prefix and where.interpreter == str(base)
    assert not any(Path(s).is_relative_to(sys.prefix) for s in where.site)
    assert where.user_site and Path(where.user_site).is_relative_to(tmp_path / "h")


def test_a_bad_interpreter_is_a_config_error(tmp_path):
    from andon.errors import ConfigError
    bad = tmp_path / "python-broken"
    bad.write_text("#!/bin/sh\necho nonsense\n")
    bad.chmod(0o755)
    with pytest.raises(ConfigError, match="python-broken"):
        envprint.layout(str(bad), ())


def test_the_interpreter_of_a_console_script_is_read_from_its_shebang(tmp_path):
    script = tmp_path / "pytest"
    script.write_text(f"#!{sys.executable}\nprint()\n")
    assert python_of([str(script), "-q"]) == sys.executable
    assert python_of([sys.executable, "-m", "pytest"]) == sys.executable
    assert python_of(["/bin/true"]) is None
    assert python_of([]) is None
    env_script = tmp_path / "pytest-env"
    env_script.write_text("#!/usr/bin/env python3\nprint()\n")
    assert python_of([str(env_script)]) == shutil.which("python3")


def test_an_honest_pip_install_into_a_separate_venv_changes_nothing(tmp_path):
    where = envprint.layout(None, ())
    watch = envprint.Watch(where)
    other = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    site = next((other / "lib").glob("python*/site-packages"))
    (site / "extra.pth").write_text("/x\n")  # what a pip install there would leave
    # only what this test wrote is asked about: andon's own venv is shared with tests running
    # at the same time (pytest-xdist), whose honest byte code or installs are not this test's
    assert not [p for p, _ in watch.changed() if Path(p).is_relative_to(tmp_path)]


def test_a_folder_nested_deeper_than_the_recursion_limit_is_an_addition_not_a_crash(tmp_path,
                                                                                     deep_ok):
    """The code under test can nest folders in site-packages deeper than Python's recursion
    limit: the fingerprint still walks them and the change names the new top folder, with the
    command that removes it whole (it used to raise RecursionError, stopping the line as a
    harness error)."""
    where = fake(tmp_path)
    before = envprint.fingerprint(where)
    top = Path(where.site[0]) / "deep"
    nest_deep(top, 1500)  # a path of about 3,000 characters: inside PATH_MAX
    leaf = Path(top, *["d"] * 1500, "evil.py")
    leaf.write_text("import os\n")
    changed = envprint.changes(before, envprint.fingerprint(where))
    assert (str(top), "added") in changed and (str(leaf), "added") in changed
    _, cmds = envprint.describe(changed, where, "during the suite gate's test runs")
    assert cmds == [f"rm -r {top}"]


def _specialized(site: Path) -> Path:
    """``mul``'s ``*`` turned into an adding specialized instruction, one byte in an honest
    cache: code objects still compare equal (``==`` maps it back), Python runs it as is."""
    src = site / "somepkg" / "__init__.py"
    src.write_text("def mul(a, b):\n    return a * b\n")
    cache = Path(py_compile.compile(str(src), doraise=True))
    body = (src.parent / "__init__.py").read_text()
    inner = next(c for c in compile(body, str(src), "exec").co_consts if hasattr(c, "co_code"))
    at = cache.read_bytes().index(inner.co_code)
    op = inner.co_code.index(bytes([dis.opmap["BINARY_OP"]]))
    data = bytearray(cache.read_bytes())
    data[at + op] = dis._all_opmap["BINARY_OP_ADD_INT"]
    cache.write_bytes(bytes(data))
    return cache


def _same_size_mtime_back(site: Path) -> Path:
    src = site / "somepkg" / "__init__.py"
    cache = Path(importlib.util.cache_from_source(str(src)))
    st = cache.stat()
    forged = forged_cache(src, "X = 2\n")  # "X = 1" and "X = 2": the same size
    assert forged.stat().st_size == st.st_size
    os.utime(forged, ns=(st.st_atime_ns, st.st_mtime_ns))
    return forged


def _linked_cache_folder(site: Path) -> Path:
    folder = site / "somepkg" / "__pycache__"
    shutil.rmtree(folder)
    elsewhere = site.parent / "elsewhere"
    elsewhere.mkdir()
    folder.symlink_to(elsewhere)
    forged_cache(site / "somepkg" / "__init__.py", "X = 666\n")
    return folder


def _pytest_rewrite_cache(site: Path) -> Path:
    tag = sys.implementation.cache_tag
    cache = site / "somepkg" / "__pycache__" / f"__init__.{tag}-pytest-9.2.0.pyc"
    cache.write_bytes(b"forged assertion-rewrite cache")
    return cache


def _dotted_module(site: Path) -> Path:
    src = site / "somepkg" / "plugin.v2.py"
    src.write_text("X = 1\n")
    return forged_cache(src, "X = 666\n")


def _tagless(site: Path) -> Path:
    cache = site / "somepkg" / "__pycache__" / "helper.pyc"  # import __pycache__.helper
    cache.write_bytes(b"anything")
    return cache


def _source_in_cache_folder(site: Path) -> Path:
    evil = site / "somepkg" / "__pycache__" / "evil.py"
    evil.write_text("import os\n")
    return evil


def _sourceless_module_deleted(site: Path) -> Path:
    loose = site / "loose.pyc"
    loose.unlink()
    return loose


def _system_site_packages(site: Path) -> Path:
    cfg = site.parent.parent / "pyvenv.cfg"
    cfg.write_text("home = /usr/bin\ninclude-system-site-packages = true\n")
    return cfg


def _write_code(src: Path, code) -> Path:
    """The cache Python loads for ``src`` (header from the source) holding ``code``."""
    cache = forged_cache(src, "")
    cache.write_bytes(cache.read_bytes()[:16] + marshal.dumps(code))
    return cache


def _inner(code, name: str):
    return next(c for c in code.co_consts if hasattr(c, "co_code") and c.co_name == name)


def _stack_size(site: Path) -> Path:
    """``f``'s stack size 0: equal code objects, and the call to g overwrites f's stack."""
    src = site / "somepkg" / "__init__.py"
    src.write_text("def g():\n    return 0\n\n\ndef f(a):\n    return [a, g()]\n")
    top = compile(src.read_text(), str(src), "exec", dont_inherit=True)
    f = _inner(top, "f")
    consts = tuple(f.replace(co_stacksize=0) if c is f else c for c in top.co_consts)
    return _write_code(src, top.replace(co_consts=consts))


def _qualname(site: Path) -> Path:
    src = site / "somepkg" / "__init__.py"
    src.write_text("def load(x):\n    return x\n")
    top = compile(src.read_text(), str(src), "exec", dont_inherit=True)
    f = _inner(top, "load")
    consts = tuple(f.replace(co_qualname="os.system") if c is f else c for c in top.co_consts)
    return _write_code(src, top.replace(co_consts=consts))


def _set_order(site: Path) -> Path:
    """A constant frozenset's elements in another order: equal as sets, iterated otherwise.
    marshal sorts what it writes, so the bytes are edited."""
    src = site / "somepkg" / "__init__.py"
    src.write_text("ORDER = [x for x in {1, 9, 17}]\n")
    cache = Path(py_compile.compile(str(src), doraise=True))
    data = cache.read_bytes()
    one, nine, seventeen = (marshal.dumps(n) for n in (1, 9, 17))
    at = data.index(one + nine + seventeen)
    data = data[:at] + seventeen + nine + one + data[at + 3 * len(one):]
    cache.write_bytes(data)
    return cache


def _unlistable_cache_folder(site: Path) -> Path:
    """A folder the walk cannot list (mode 0o300) hides a forged cache Python opens by path.
    Root lists it anyway; the marker follows what the walk's user can do."""
    folder = site / "somepkg" / "__pycache__"
    forged_cache(site / "somepkg" / "__init__.py", "X = 666\n")
    folder.chmod(0o300)
    return folder


@pytest.mark.parametrize("forge", [
    _specialized, _same_size_mtime_back, _linked_cache_folder, _pytest_rewrite_cache,
    _dotted_module, _tagless, _source_in_cache_folder, _sourceless_module_deleted,
    _system_site_packages, _stack_size, _qualname, _set_order, _unlistable_cache_folder],
    ids=lambda f: f.__name__.strip("_"))
def test_every_way_past_the_byte_code_check_is_a_change(tmp_path, forge, monkeypatch):
    """Ways an adversary pass found to change what Python runs that the check first took for
    honest caching (or never saw): each must be a change naming the path."""
    where = with_this_python(fake(tmp_path))
    site = Path(where.site[0])
    src = site / "somepkg" / "__init__.py"
    py_compile.compile(str(src), doraise=True)
    (site / "loose.pyc").write_bytes(Path(importlib.util.cache_from_source(str(src))).read_bytes())
    (site.parent.parent / "pyvenv.cfg").write_text("home = /usr/bin\n")
    where = Layout(where.interpreter, str(site.parent.parent), where.site, where.user_site,
                   where.top)
    watch = envprint.Watch(where)
    path = forge(site)
    if forge is _unlistable_cache_folder and os.access(path, os.R_OK):
        # root lists every folder: what access() says for any other user of mode 0o300
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: (
            not mode & os.R_OK and real(p, mode)) if os.fspath(p) == str(path) else real(p, mode))
    try:
        assert str(path) in {p for p, _ in watch.changed()}, watch.changed()
    finally:
        path.chmod(0o755) if forge is _unlistable_cache_folder else None


def test_the_digest_names_every_file_but_byte_code_caches(tmp_path):
    """The results cache's keys name the environment by this digest: a module added or
    rewritten changes it; a byte-code cache written (any Python run that imports an
    uncompiled module writes one) does not, or the cache would never hit."""
    site = tmp_path / "site-packages"
    (site / "lib" / "__pycache__").mkdir(parents=True)
    (site / "lib" / "__init__.py").write_text("")
    where = envprint.Layout(interpreter="python", prefix=str(tmp_path), site=(str(site),),
                            user_site=None, top=())
    first = envprint.digest(envprint.fingerprint(where))
    assert envprint.digest(envprint.fingerprint(where)) == first
    (site / "lib" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"x")
    (site / "__pycache__").mkdir()
    assert envprint.digest(envprint.fingerprint(where)) == first
    (site / "lib" / "__init__.py").write_text("VALUE = 2\n")
    second = envprint.digest(envprint.fingerprint(where))
    assert second != first
    (site / "extra.pth").write_text("/somewhere\n")
    assert envprint.digest(envprint.fingerprint(where)) != second


def _venv(tmp_path: Path) -> tuple[str, Path]:
    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python"), next((venv / "lib").glob("python3*/site-packages"))


def test_a_watch_asks_the_interpreter_again_only_when_what_its_answer_rests_on_changed(
        tmp_path, monkeypatch):
    """Where an interpreter looks (envlayout's probe, a subprocess) depends only on files the
    fingerprint of that answer covers (the .pth files, the venv's settings, the executables,
    the start-up libraries) and on HOME / PATH / PYTHONUSERBASE. A later watch in the same
    process walks the answer it has and asks again only when that walk differs from the
    one taken right after asking: then a .pth that adds a folder is followed at once."""
    python, site = _venv(tmp_path)
    asked: list[str] = []
    real = envprint.layout
    monkeypatch.setattr(envprint, "layout", lambda *a, **k: asked.append(a[0]) or real(*a, **k))
    first = envprint.watch(python, ())
    again = envprint.watch(python, ())
    assert asked == [python] and again.where == first.where and again.digest == first.digest
    monkeypatch.setenv("HOME", str(tmp_path / "other-home"))  # another user site
    envprint.watch(python, ())
    assert asked == [python, python]
    monkeypatch.undo()
    monkeypatch.setattr(envprint, "layout", lambda *a, **k: asked.append(a[0]) or real(*a, **k))
    src = tmp_path / "sibling" / "src"
    (src / "dep").mkdir(parents=True)
    (src / "dep" / "__init__.py").write_text("X = 1\n")
    (site / "_dep.pth").write_text(f"{src}\n")
    moved = envprint.watch(python, ())
    assert asked == [python, python, python]
    assert str(src) in moved.where.sources
    (src / "dep" / "__init__.py").write_text("X = 2\n")
    assert str(src / "dep" / "__init__.py") in {p for p, _ in moved.changed()}


def test_what_the_loader_reads_before_any_python_is_watched_by_content(tmp_path):
    """Every process of the tests' interpreter maps its shared libraries as
    ``/etc/ld.so.preload`` and ``/etc/ld.so.cache`` say (root's files; a test cannot
    rewrite them): both are named, by content, so creating the first or rewriting the
    second between two walks is a change."""
    python, _ = _venv(tmp_path)
    where = envprint.layout(python, ())
    assert {"/etc/ld.so.preload", "/etc/ld.so.cache"} <= set(where.files)
    fp = envprint.fingerprint(where)
    cache = fp["/etc/ld.so.cache"]
    assert fp["/etc/ld.so.preload"] == "absent" or str(fp["/etc/ld.so.preload"]).startswith(
        "sha256:")
    assert not Path("/etc/ld.so.cache").exists() or str(cache).startswith("sha256:")
