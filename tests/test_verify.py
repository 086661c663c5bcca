"""The record cannot be quietly rewritten (issue 11): the events form a hash chain, evidence
files are named by content hash, and `andon verify` finds an edited, deleted or inserted
event and a changed or missing evidence file; `andon run` refuses a store whose newest
events do not chain."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from andon.errors import StoreError
from andon.store import Store, chain

from helpers import andon, honest_mul, make_project, mul_packet, runner_for


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Path:
    """A project whose packet P1 an honest agent got merged: a real store with transitions,
    gate results and stage runs (read only: tests that tamper work on a copy)."""
    root = make_project(tmp_path_factory.mktemp("verify") / "repo", {"P1": mul_packet("P1")})
    report = runner_for(root, honest_mul).run()
    assert report.exit_status == 0, report.message
    return root


def _copy(ran: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(ran, dest, symlinks=True)
    return dest


def _tamper(db: Path, sql: str, args: tuple = ()) -> None:
    """What an agent running as the user can do to the file: drop the append-only triggers,
    then write."""
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER IF EXISTS events_append_only_u")
    con.execute("DROP TRIGGER IF EXISTS events_append_only_d")
    con.execute(sql, args)
    con.commit()
    con.close()


def _verdict(root: Path, expect: str | None = None) -> chain.Verdict:
    store = Store(root / ".andon" / "andon.db")
    try:
        return chain.verify(store.chain_rows(), expect=expect, check_files=False)
    finally:
        store.close()


def test_a_run_leaves_an_intact_chain_and_verify_prints_its_head(ran):
    r = andon(ran, "verify", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    v = json.loads(r.stdout)
    assert v["ok"] and v["chained"] > 5 and v["evidence_files"] > 0 and v["unchained"] == 0
    r = andon(ran, "verify", "--expect", v["head"])
    assert r.returncode == 0 and f"head {v['head']}" in r.stdout and "intact" in r.stdout


@pytest.mark.parametrize("what,sql", [
    ("edited", "UPDATE events SET data = '{\"by\": \"someone else\"}' WHERE id = "
               "(SELECT id FROM events WHERE kind = 'claimed' LIMIT 1)"),
    ("deleted", "DELETE FROM events WHERE id = (SELECT id FROM events ORDER BY id LIMIT 1 "
                "OFFSET 3)"),
    ("inserted", "INSERT INTO events (ts, packet_id, kind, data) VALUES "
                 "('2026-01-01T00:00:00.000+00:00', 'P1', 'approved', '{}')"),
    ("inserted with a hash", "INSERT INTO events (ts, packet_id, kind, data, prev_hash, hash) "
                             "SELECT ts, packet_id, 'approved', data, hash, hash FROM events "
                             "WHERE id = 2"),
])
@pytest.mark.store_tampered
def test_an_event_changed_behind_andons_back_is_found(ran, tmp_path, what, sql):
    root = _copy(ran, tmp_path)
    head = _verdict(root).head
    _tamper(root / ".andon" / "andon.db", sql)
    v = _verdict(root)
    assert not v.ok and v.problems, what
    r = andon(root, "verify", "--no-files")
    assert r.returncode == 1 and "broken:" in r.stdout and "NOT intact" in r.stdout
    if what == "deleted":
        assert "link" in v.problems[0]
    if what == "edited":
        assert "edited" in v.problems[0]
    assert head is not None


@pytest.mark.store_tampered
def test_a_chain_rewritten_whole_loses_the_head_printed_before(ran, tmp_path):
    """Someone who edits an event and recomputes every hash after it leaves a self-consistent
    chain: only a head kept from before tells."""
    root = _copy(ran, tmp_path)
    db = root / ".andon" / "andon.db"
    old_head = _verdict(root).head
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    con.execute("DROP TRIGGER events_append_only_u")
    rows = [dict(r) for r in con.execute("SELECT * FROM events ORDER BY id")]
    prev = None
    for i, row in enumerate(rows):
        if i == 2:
            row["data"] = json.dumps({"forged": True})
        row["prev_hash"], row["hash"] = prev, chain.event_hash(prev, row)
        con.execute("UPDATE events SET data = ?, prev_hash = ?, hash = ? WHERE id = ?",
                    (row["data"], row["prev_hash"], row["hash"], row["id"]))
        prev = row["hash"]
    con.commit()
    con.close()
    assert _verdict(root).ok                              # consistent on its own ...
    assert not _verdict(root, expect=old_head).ok         # ... but the old head is gone
    r = andon(root, "verify", "--no-files", "--expect", old_head)
    assert r.returncode == 1 and "not in the chain" in r.stdout


@pytest.mark.store_tampered
def test_run_refuses_a_store_whose_newest_events_do_not_chain(ran, tmp_path):
    root = _copy(ran, tmp_path)
    _tamper(root / ".andon" / "andon.db",
            "UPDATE events SET kind = 'approved' WHERE id = (SELECT MAX(id) FROM events)")
    with pytest.raises(StoreError, match=r"changed outside andon.*andon verify"):
        runner_for(root, honest_mul).run()


def test_a_changed_or_missing_evidence_file_is_found(tmp_path):
    store = Store(tmp_path / "andon.db")
    log, xml = tmp_path / "suite.log", tmp_path / "suite.xml"
    log.write_text("1 passed\n")
    xml.write_text("<testsuites/>\n")
    store.add_gate_result(None, "suite", "pass", None, "ok",
                          {"runs": [{"log_path": str(log), "junit_path": str(xml)}]}, "t", 1.0)
    v = chain.verify(store.chain_rows())
    assert v.ok and v.files == 2
    log.write_text("0 passed, 1 failed\n")
    xml.unlink()
    problems = chain.verify(store.chain_rows()).problems
    assert any("suite.log" in p and "changed" in p for p in problems)
    assert any("suite.xml" in p and "missing" in p for p in problems)


def test_events_from_before_the_upgrade_are_counted_not_blamed(tmp_path):
    """A store written before the chain existed: its old events have no hash; the chain
    starts at the first event written after the upgrade."""
    store = Store(tmp_path / "andon.db")
    store.event("old-1")
    store.event("old-2")
    store.close()
    _tamper(tmp_path / "andon.db", "UPDATE events SET prev_hash = NULL, hash = NULL")
    store = Store(tmp_path / "andon.db")
    store.event("new")
    v = chain.verify(store.chain_rows())
    assert v.ok and (v.unchained, v.chained) == (2, 1)


def test_verify_without_a_store_says_so(tmp_path):
    root = make_project(tmp_path / "repo")
    r = andon(root, "verify")
    assert r.returncode == 2 and "no store yet" in r.stderr
