"""Repo.export (worktrees.export) on every Python the project supports: PEP 706's extraction
filters arrived in 3.11.4, and Debian 12's python3 is 3.11.2, where `andon plan`, `andon
grill` and the mutation gate's copy of the base crashed with "extractall() got an unexpected
keyword argument 'filter'". Each test runs with the filter and, as on such a Python, without it.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from andon import worktrees
from andon.workspace import Repo

from helpers import git


@pytest.fixture(params=["filter", "no-filter"])
def python(request, monkeypatch):
    """``no-filter``: this Python as one before 3.11.4: no ``tarfile.data_filter``, and an
    ``extractall`` without the ``filter`` keyword (a call passing it fails as it does there)."""
    if request.param == "no-filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
        extractall = tarfile.TarFile.extractall

        def without_filter(self, path=".", members=None, *, numeric_owner=False):
            return extractall(self, path, members, numeric_owner=numeric_owner)
        monkeypatch.setattr(tarfile.TarFile, "extractall", without_filter)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no extraction filters")
    return request.param


def repository(tmp_path: Path, files: dict[str, str | None], links: dict[str, str]) -> Repo:
    """A repository whose one commit holds ``files`` (None: an executable script) and the
    symbolic links ``links`` (name: target)."""
    work = tmp_path / "repo"
    work.mkdir()
    git(work, "init", "-q")
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text is not None else "#!/bin/sh\n")
        if text is None:
            path.chmod(0o755)
    for name, target in links.items():
        os.symlink(target, work / name)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")
    return Repo(work)


def test_files_scripts_and_links_inside_are_exported_the_same_on_every_python(tmp_path, python):
    repo = repository(tmp_path, {"pkg/mod.py": "x = 1\n", "run.sh": None, "skip.txt": "no\n"},
                      {"pkg/alias.py": "mod.py", "here": "pkg"})
    dest = tmp_path / "out"

    got = repo.export("HEAD", dest, keep=lambda path: path != "skip.txt")

    assert (dest / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert os.access(dest / "run.sh", os.X_OK)
    assert os.readlink(dest / "pkg" / "alias.py") == "mod.py"
    assert os.readlink(dest / "here") == "pkg"
    assert not (dest / "skip.txt").exists() and not (dest / ".git").exists()
    assert set(got) == {"pkg/mod.py", "pkg/alias.py", "run.sh", "here"}


@pytest.mark.parametrize("target", ["../../outside", "/etc/passwd", "../pkg/../../x"])
def test_a_link_leading_out_of_the_export_is_refused_on_every_python(tmp_path, python, target):
    repo = repository(tmp_path, {"pkg/mod.py": "x = 1\n"}, {"pkg/escape": target})

    with pytest.raises(tarfile.TarError):
        repo.export("HEAD", tmp_path / "out")

    assert not (tmp_path / "out" / "pkg" / "escape").is_symlink()


@pytest.mark.parametrize("name, kind", [("../evil.py", tarfile.REGTYPE),
                                        ("pkg/../../evil.py", tarfile.REGTYPE),
                                        ("pkg/pipe", tarfile.FIFOTYPE)])
def test_an_archive_git_would_never_write_is_refused_on_every_python(tmp_path, python, name,
                                                                     kind):
    """What no git tree can hold (a path out of the destination, a FIFO), written by hand:
    the export reads an archive, and the archive's checks must not rest on git's."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        member = tarfile.TarInfo(name)
        member.type, member.size = kind, 0
        tar.addfile(member, io.BytesIO(b""))
    dest = tmp_path / "deep" / "out"
    dest.mkdir(parents=True)
    data.seek(0)

    with tarfile.open(fileobj=data) as tar, pytest.raises(tarfile.TarError):
        worktrees._extract(tar, dest, tar.getmembers())

    assert sorted(p.name for p in tmp_path.rglob("*")) == ["deep", "out"]
