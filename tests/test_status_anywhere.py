"""`andon status` and `andon show` from any machine with the store URL (issue 12): from a
folder that is not a clone (no andon.toml, no git), ``--store URL`` or
``$ANDON_STORE_URL`` print the board and the evidence; evidence files that are not on this
machine are named as such; an unreachable store is a clear error (exit 2, no traceback).
On both backends: a real run into a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pgcluster import PASSWORD
from test_workers import honest, mod_packet

from helpers import GIT_ENV, make_project, runner_for


def andon_here(cwd: Path, *args: str, url_env: str | None = None
               ) -> subprocess.CompletedProcess:
    """The CLI in a real process whose working folder is ``cwd`` (no ``-C``)."""
    env = {**os.environ, **GIT_ENV, "COLUMNS": "200"}
    env.pop("ANDON_STORE_URL", None)
    if url_env:
        env["ANDON_STORE_URL"] = url_env
    return subprocess.run([sys.executable, "-m", "andon", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def _url(store_target, tmp_path: Path) -> str:
    if store_target.backend == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return store_target.target


def test_status_and_show_from_outside_any_clone(tmp_path: Path, store_target, monkeypatch):
    url = _url(store_target, tmp_path)
    root = make_project(tmp_path / "p", {"P1-m": mod_packet("P1")})
    monkeypatch.setenv("ANDON_STORE_URL", url)
    report = runner_for(root, honest).run()
    assert report.merged == ["P1"], report.message
    monkeypatch.delenv("ANDON_STORE_URL")
    elsewhere = tmp_path / "elsewhere"  # not a git repository, no andon.toml
    elsewhere.mkdir()

    for r in (andon_here(elsewhere, "status", "--store", url),
              andon_here(elsewhere, "status", url_env=url)):
        assert r.returncode == 0, r.stderr
        assert "P1" in r.stdout and "done" in r.stdout, r.stdout
        assert "no clone here" in r.stdout
    j = andon_here(elsewhere, "status", "--json", "--store", url)
    assert j.returncode == 0, j.stderr
    rows = json.loads(j.stdout)["packets"]
    assert [(x["id"], x["state"]) for x in rows] == [("P1", "done")]

    shown = andon_here(elsewhere, "show", "P1", "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert "merged as" in shown.stdout and "not reachable" not in shown.stdout, shown.stdout
    # another machine's view: the evidence folder is not here
    (root / ".andon" / "evidence").rename(tmp_path / "moved")
    away = andon_here(elsewhere, "show", "P1", url_env=url)
    assert away.returncode == 0, away.stderr
    assert "(not reachable from here)" in away.stdout
    assert "evidence path(s) above are not reachable from here" in away.stdout
    d = json.loads(andon_here(elsewhere, "show", "P1", "--json", "--store", url).stdout)
    assert d["unreachable"] and all(str(root) in x for x in d["unreachable"])
    missing = andon_here(elsewhere, "show", "P9", "--store", url)
    assert missing.returncode == 2 and "no packet 'P9'" in missing.stderr


def test_an_unreachable_store_is_a_clear_error(tmp_path: Path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://andon:{PASSWORD}@127.0.0.1:{port}/andon"
    for args in (("status", "--store", url), ("show", "P1", "--store", url)):
        r = andon_here(tmp_path, *args)
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert "cannot open the PostgreSQL store" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and PASSWORD not in r.stderr, r.stderr
    bad = andon_here(tmp_path, "status", "--store", "mysql://x")
    assert bad.returncode == 2 and "expected postgresql://" in bad.stderr, bad.stderr
