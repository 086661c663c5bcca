"""The watch on planted and hidden files during a run (andon.contain.watch): every way of
changing a file and putting it back is seen; reading it, and writing other files beside it, is
not. Real files, real inotify; the writers are separate processes, as the code under test is.
(The whole attempt: tests/redteam/scenarios_scope.py ``tests-init-rewrites-and-restores-named``.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from andon.contain import watch as watch_mod
from andon.contain.watch import Watch

PLANTED = "tests/test_mul_p1.py"
TEXT = "def test_mul():\n    assert 3 * 4 == 12\n"


@pytest.fixture
def root(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / PLANTED).write_text(TEXT)
    (tmp_path / "tests" / "test_ops.py").write_text("def test_add():\n    pass\n")
    return tmp_path


def _child(root, code: str) -> None:
    """Run ``code`` in another Python process in ``root`` (the code under test's place)."""
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)


HONEST = {
    "read": f"open({PLANTED!r}).read()",
    "other files beside it": "import pathlib; p = pathlib.Path('tests/out.txt'); "
                             "p.write_text('x'); p.unlink(); "
                             "pathlib.Path('tests/test_ops.py').write_text('')",
    "a cache folder": "import os; os.makedirs('tests/__pycache__'); "
                      "open('tests/__pycache__/x.pyc', 'wb').write(b'0')",
    "files at the root": "open('output.log', 'w').write('run')",
}

CHEATS = {
    "rewritten and put back": f"import pathlib; p = pathlib.Path({PLANTED!r}); s = "
                              "p.read_text(); p.write_text(s.replace('assert', 'pass  #')); "
                              "p.write_text(s)",
    "replaced by a rename": f"import os; open('tests/x', 'w').write('pass'); "
                            f"os.rename({PLANTED!r}, 'tests/keep'); "
                            f"os.rename('tests/x', {PLANTED!r})",
    "through a shared mapping": f"import mmap; f = open({PLANTED!r}, 'r+b'); "
                                "m = mmap.mmap(f.fileno(), 0); m[0:3] = b'###'; "
                                "m[0:3] = b'def'; m.close()",
    "through a hard link": f"import os; os.link({PLANTED!r}, 'tests/alias'); "
                           "p = open('tests/alias', 'r+'); s = p.read(); p.seek(0); "
                           "p.write(s); p.close(); os.unlink('tests/alias')",
    "its folder moved and rebuilt": "import os, shutil; os.rename('tests', 'tests.orig'); "
                                    "shutil.copytree('tests.orig', 'tests')",
    "opened for writing only": f"open({PLANTED!r}, 'a').close()",
}


@pytest.mark.parametrize("how", sorted(HONEST))
def test_reading_it_or_writing_beside_it_is_no_sign(root, how):
    with Watch(root, [PLANTED]) as w:
        _child(root, HONEST[how])
        assert w.changes() == []
    assert w.problem is None


@pytest.mark.parametrize("how", sorted(CHEATS))
def test_a_planted_file_changed_and_put_back_is_seen(root, how):
    with Watch(root, [PLANTED, "tests/test_mul_hidden.py"]) as w:
        _child(root, CHEATS[how])
        why = w.changes()
    assert why, how
    assert all("was written or replaced during the run" in line for line in why), why
    named = PLANTED if how != "its folder moved and rebuilt" else "tests"
    assert any(line.startswith(f"{named} ") for line in why), why


def test_the_bytes_after_the_cheat_are_the_bytes_before(root):
    """What the before/after comparison alone cannot see: the same bytes at the end."""
    with Watch(root, [PLANTED]) as w:
        _child(root, CHEATS["rewritten and put back"])
        assert (root / PLANTED).read_text() == TEXT
        assert w.changes() == [f"{PLANTED} was written or replaced during the run "
                               "(opened for writing, written)"]


def test_no_files_opens_no_watch(root):
    w = Watch(root, [])
    assert w.changes() == [] and w.problem is None


def test_without_inotify_it_says_why_and_finds_nothing(root, monkeypatch):
    monkeypatch.setattr(watch_mod, "INotify", None)
    w = Watch(root, [PLANTED])
    _child(root, CHEATS["rewritten and put back"])
    assert w.changes() == []
    assert w.problem == "inotify is not available on this system"
