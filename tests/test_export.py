"""Repo.export (worktrees.export) on every Python the project supports: PEP 706's extraction
filters arrived in 3.11.4, and Debian 12's python3 is 3.11.2, where `andon plan`, `andon
grill` and the mutation gate's copy of the base crashed with "extractall() got an unexpected
keyword argument 'filter'". Each test runs with the filter and, as on such a Python, without it.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from andon.workspace import Repo


@pytest.fixture(params=["filter", "no-filter"])
def python(request, monkeypatch):
    """``no-filter``: this Python as one before 3.11.4 (no ``tarfile.data_filter``)."""
    if request.param == "no-filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no extraction filters")
    return request.param


def repository(tmp_path: Path, files: dict[str, str | None], links: dict[str, str]) -> Repo:
    """A repository whose one commit holds ``files`` (None: an executable script) and the
    symbolic links ``links`` (name: target)."""
    work = tmp_path / "repo"
    work.mkdir()
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@example.com", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text is not None else "#!/bin/sh\n")
        if text is None:
            path.chmod(0o755)
    for name, target in links.items():
        os.symlink(target, work / name)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
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
