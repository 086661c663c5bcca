"""The suite's own check (tests/conftest.py): after each test, every store below its
``tmp_path`` must pass ``andon verify``. Here: the hook finds a store however deep, skips
``.git`` and venvs, passes an intact chain and names the first broken link of a tampered one;
a test that tampers on purpose opts out with ``@pytest.mark.store_tampered``."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import stores_below, verify_store

from andon.store import Store


def _store(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    s = Store(path)
    s.event("note", None, None, {"n": 1})
    s.event("note", None, None, {"n": 2})
    s.close()
    return path


def _edit(db):
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER IF EXISTS events_append_only_u")
    con.execute("UPDATE events SET data = '{\"n\": 9}' WHERE id = (SELECT MIN(id) FROM events)")
    con.commit()
    con.close()


def test_the_hook_finds_stores_below_tmp_path_but_not_in_git_or_venvs(tmp_path):
    deep = _store(tmp_path / "a" / "b" / "repo" / ".andon" / "andon.db")
    _store(tmp_path / "repo" / ".git" / "x" / ".andon" / "andon.db")
    _store(tmp_path / ".venv" / "lib" / ".andon" / "andon.db")
    assert stores_below(tmp_path) == [deep]


def test_an_intact_store_passes_and_an_edited_one_names_the_event(tmp_path):
    db = _store(tmp_path / "repo" / ".andon" / "andon.db")
    assert verify_store(db) == []
    _edit(db)
    problems = verify_store(db)
    assert problems and "was edited" in problems[0]
    db.unlink()   # else the hook itself fails this test (as it did while this was written)


@pytest.mark.store_tampered
def test_a_test_that_tampers_on_purpose_opts_out(tmp_path):
    db = _store(tmp_path / "repo" / ".andon" / "andon.db")
    _edit(db)   # left broken: without the marker the hook would fail this test
    assert verify_store(db)


def test_a_store_overwritten_with_other_bytes_is_a_problem_not_a_crash(tmp_path):
    db = tmp_path / "repo" / ".andon" / "andon.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"forged")
    assert verify_store(db)[0].startswith("the store cannot be read")
    db.unlink()
