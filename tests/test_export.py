"""Repo.export (worktrees.export) on every Python the project supports: PEP 706's extraction
filters arrived in 3.11.4, and Debian 12's python3 is 3.11.2, where `andon plan`, `andon
grill` and the mutation gate's copy of the base crashed with "extractall() got an unexpected
keyword argument 'filter'". Each test runs with the filter and, as on such a Python, without it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import andon
from andon import worktrees
from andon.git.repo import Repo

from helpers import git, needs_python

# The filtered path run in a fresh process of another interpreter of the machine, when the
# suite's own has no filters (scripts/test makes its venv from Debian's python3.11, 3.11.2):
# andon's source with only the standard library, as a user's 3.11.4 or later would run it.
ELSEWHERE = """
import io, json, sys, tarfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from andon import worktrees
from andon.git.repo import Repo
job = json.loads(sys.argv[2])
assert hasattr(tarfile, "data_filter"), sys.version
try:
    if job["op"] == "export":
        got = Repo(Path(job["root"])).export(job["rev"], Path(job["dest"]),
                                              keep=lambda p: p not in job["skip"])
    else:
        with tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read())) as tar:
            got = worktrees._extract(tar, Path(job["dest"]), tar.getmembers())
    print(json.dumps({"ok": got}))
except tarfile.TarError as exc:
    print(json.dumps({"tar_error": str(exc)}))
"""


@dataclass
class Exporter:
    """``export`` and ``extract`` (worktrees.export, worktrees._extract) as a Python with
    (``filter``) or without (``no-filter``) extraction filters runs them: in this process,
    or in ``python`` when this one lacks the filters that one has."""

    python: str | None = None

    def export(self, repo: Repo, dest: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
        if self.python is None:
            return repo.export("HEAD", dest, keep=lambda path: path not in skip)
        return self._elsewhere({"op": "export", "root": str(repo.root), "rev": "HEAD",
                                "dest": str(dest), "skip": list(skip)})

    def extract(self, archive: bytes, dest: Path) -> None:
        if self.python is None:
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                worktrees._extract(tar, dest, tar.getmembers())
            return
        self._elsewhere({"op": "extract", "dest": str(dest)}, archive)

    def _elsewhere(self, job: dict, stdin: bytes = b""):
        src = Path(andon.__file__).resolve().parent.parent
        out = subprocess.run([self.python, "-I", "-c", ELSEWHERE, str(src), json.dumps(job)],
                             input=stdin, capture_output=True, check=False)
        assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
        answer = json.loads(out.stdout)
        if "tar_error" in answer:
            raise tarfile.TarError(answer["tar_error"])
        return answer["ok"]


@pytest.fixture(params=["filter", "no-filter"])
def python(request, monkeypatch) -> Exporter:
    """``no-filter``: this Python as one before 3.11.4: no ``tarfile.data_filter``, and an
    ``extractall`` without the ``filter`` keyword (a call passing it fails as it does there).
    ``filter``: this Python if it has the filters, else another of the machine's that does."""
    if request.param == "no-filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
        extractall = tarfile.TarFile.extractall

        def without_filter(self, path=".", members=None, *, numeric_owner=False):
            return extractall(self, path, members, numeric_owner=numeric_owner)
        monkeypatch.setattr(tarfile.TarFile, "extractall", without_filter)
        return Exporter()
    if hasattr(tarfile, "data_filter"):
        return Exporter()
    return Exporter(needs_python("import tarfile; tarfile.data_filter",
                                 "PEP 706's extraction filters (3.11.4 or later)"))


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

    got = python.export(repo, dest, skip=("skip.txt",))

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
        python.export(repo, tmp_path / "out")

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

    with pytest.raises(tarfile.TarError):
        python.extract(data.getvalue(), dest)

    assert sorted(p.name for p in tmp_path.rglob("*")) == ["deep", "out"]
