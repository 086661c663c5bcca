"""The store: migrations, transitions checked by the lifecycle, append-only events — on
both backends (``store_target``: SQLite, then a real PostgreSQL database)."""

import pytest

from andon import lifecycle
from andon.errors import IllegalTransition, StoreError
from andon.store import MIGRATIONS

from helpers import baseline_ids


def test_new_store_is_migrated_and_reopens(store_target):
    """Schema applied once and recorded; opening again changes nothing."""
    s = store_target.open()
    s.close()
    s = store_target.open()
    rows = s.db.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, len(MIGRATIONS) + 1))
    if store_target.backend == "sqlite":
        assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_store_from_a_newer_andon_is_refused(store_target):
    s = store_target.open()
    s.db.execute("INSERT INTO schema_migrations VALUES (99, 'x')")
    s.close()
    with pytest.raises(StoreError, match="newer"):
        store_target.open()


def test_transition_logs_event_and_illegal_one_raises_without_change(store_target):
    s = store_target.open()
    s.upsert_packet("P1", "x", "p.md", "sha1", {})
    s.transition("P1", "running", "claimed")
    with pytest.raises(IllegalTransition, match="running -> done"):
        s.transition("P1", "done", "bogus")
    assert s.packet("P1")["state"] == "running"
    kinds = [(e["kind"], e["from_state"], e["to_state"]) for e in s.events("P1")]
    assert kinds == [("registered", None, "ready"), ("claimed", "ready", "running")]


def test_events_are_append_only(store_target):
    s = store_target.open()
    s.event("x")
    with pytest.raises(store_target.errors, match="append-only"):
        s.db.execute("UPDATE events SET kind = 'y'")
    with pytest.raises(store_target.errors, match="append-only"):
        s.db.execute("DELETE FROM events")
    assert [e["kind"] for e in s.events()] == ["x"]


def test_failed_transaction_leaves_no_trace(store_target):
    """A transition and its event commit together or not at all."""
    s = store_target.open()
    s.upsert_packet("P1", "x", "p.md", "sha1", {})
    with pytest.raises(RuntimeError), s.tx():
        s.transition("P1", "running", "claimed")
        raise RuntimeError("crash")
    assert s.packet("P1")["state"] == "ready"
    assert [e["kind"] for e in s.events("P1")] == ["registered"]


def test_edited_packet_is_recorded_as_event(store_target):
    s = store_target.open()
    assert s.upsert_packet("P1", "x", "p.md", "sha1", {})
    assert not s.upsert_packet("P1", "x", "p.md", "sha1", {})
    assert s.upsert_packet("P1", "x", "p.md", "sha2", {"goal": "new"})
    assert [e["kind"] for e in s.events("P1")] == ["registered", "edited"]
    assert s.packet("P1")["definition"] == {"goal": "new"}


def test_every_lifecycle_edge_from_design():
    """The diagram's edges are allowed; a few it does not draw are not."""
    for a, b in [("ready", "running"), ("running", "gating"), ("gating", "merging"),
                 ("gating", "reviewing"), ("reviewing", "merging"), ("merging", "done"),
                 ("gating", "needs_work"), ("needs_work", "running"), ("needs_work", "blocked"),
                 ("blocked", "ready"), ("gating", "awaiting_human"),
                 ("awaiting_human", "merging"), ("awaiting_human", "needs_work"),
                 ("ready", "stale"), ("running", "ready")]:
        lifecycle.check(a, b)
    for a, b in [("ready", "done"), ("done", "ready"), ("blocked", "running"),
                 ("stale", "running"), ("awaiting_human", "done")]:
        with pytest.raises(IllegalTransition):
            lifecycle.check(a, b)
    with pytest.raises(IllegalTransition, match="unknown state"):
        lifecycle.check("nope", "ready")


def test_every_record_reads_back_the_same(store_target):
    """Attempts, gate results, reviews, the results cache and baselines round-trip with their
    types (floats keep their precision, JSON comes back decoded, a cached result is
    replaced, not duplicated)."""
    s = store_target.open()
    s.upsert_packet("P1", "x", "p.md", "sha1", {"requires": []})
    a = s.new_attempt("P1", "command", 0)
    b = s.new_attempt("P1", "command", 0)
    assert (a["n"], b["n"], a["state"]) == (1, 2, "running") and b["id"] != a["id"]
    s.update_attempt(a["id"], state="failed", counted=0, reason="r", failure_layer="suite")
    assert [(x["n"], x["state"], x["counted"]) for x in s.attempts("P1")] == \
        [(1, "failed", 0), (2, "running", 1)]
    s.add_gate_result(a["id"], "suite", "failed", "suite", "2 failed",
                      {"findings": [{"test": "t::x"}]}, "2026-01-01T00:00:00", 1.234567891)
    [g] = s.gate_results(a["id"])
    assert g["evidence"] == {"findings": [{"test": "t::x"}]} and g["duration_s"] == 1.234567891
    s.add_review(a["id"], "review", 1, "{raw}", ["bad"], {"d": 1}, "revise", "revise",
                 "implement", ["why"])
    [r] = s.reviews(a["id"])
    assert (r["valid"], r["errors"], r["document"], r["downgraded_because"]) == \
        (0, ["bad"], {"d": 1}, ["why"])
    s.set_cached("k", "red", {"v": 1}, {"e": 1})
    s.set_cached("k", "red", {"v": 2}, {"e": 2})
    assert (s.cached("k")["data"], s.cached("k")["evidence"]) == ({"v": 2}, {"e": 2})
    assert s.cached("nope") is None
    s.set_baseline("b", {"t::a", "t::b"}, {})
    assert baseline_ids(s, "b") == {"t::a", "t::b"} and baseline_ids(s, "k") is None
    # a run's own keys go at its end, by their prefix, and nothing else does ("_" and "%"
    # are no wildcards here)
    for k in ("preflight-run:ab12:1", "preflight-run:ab12:2", "preflight-run:ab13:1",
              "preflight-run:a_12:1"):
        s.set_baseline(k, {"t::a"}, {})
    s.drop_cached("preflight-run:ab12:")
    assert baseline_ids(s, "preflight-run:ab12:1") is None
    assert baseline_ids(s, "preflight-run:ab12:2") is None
    assert baseline_ids(s, "preflight-run:ab13:1") == {"t::a"}
    assert baseline_ids(s, "b") == {"t::a", "t::b"}
    s.drop_cached("preflight-run:a%")
    assert baseline_ids(s, "preflight-run:a_12:1") == {"t::a"}
    # only those made before a time, when one is given (ISO 8601 UTC, as the store writes)
    s.drop_cached("preflight-run:", before="2000-01-01T00:00:00.000+00:00")
    assert baseline_ids(s, "preflight-run:a_12:1") == {"t::a"}
    s.drop_cached("preflight-run:", before="2999-01-01T00:00:00.000+00:00")
    assert baseline_ids(s, "preflight-run:a_12:1") is None
    assert baseline_ids(s, "b") == {"t::a", "t::b"}
    s.event("note", "P1", a["id"], {"x": [1, 2]})
    assert s.events("P1", "note")[0]["data"] == {"x": [1, 2]}
    assert [p["id"] for p in s.packets()] == ["P1"]


def test_experiment_rows_read_back_the_same_on_both_backends(store_target):
    """An experiment and its runs (issue 17): the spec and a run's data come back decoded, a
    run's id is returned (PostgreSQL has no lastrowid: RETURNING id), a retried error run is
    kept but superseded."""
    s = store_target.open()
    s.upsert_experiment("e1", "exp.toml", {"repeats": 2})
    s.upsert_experiment("e1", "exp.toml", {"repeats": 3})        # updated, not duplicated
    assert [(e["name"], e["spec"]) for e in s.experiments()] == [("e1", {"repeats": 3})]
    first = s.add_experiment_run("e1", "P1", "A", 0, "error", {"cost_usd": 0.25}, "t0")
    second = s.add_experiment_run("e1", "P1", "A", 0, "resolved", {"cost_usd": 1.5}, "t1",
                                  supersedes=first)
    assert second != first and isinstance(second, int)
    runs = s.experiment_runs("e1")
    assert [(r["id"], r["outcome"], r["data"]) for r in runs] == \
        [(second, "resolved", {"cost_usd": 1.5})]
    assert len(s.experiment_runs("e1", superseded=True)) == 2


def test_events_chain_on_both_backends(store_target):
    """Every event links to the one before it by hash, whichever backend wrote it
    (PostgreSQL writers take an advisory lock in turn)."""
    s = store_target.open()
    s.upsert_packet("P1", "x", "p.md", "sha1", {"requires": []})
    s.transition("P1", "running", "claimed")
    s.event("note", "P1", data={"text": "ünïcode"})
    from andon.store import chain
    rows = s.chain_rows()
    v = chain.verify(rows)
    assert v.ok and v.chained == len(rows) >= 2 and v.head == rows[-1]["hash"]
    assert s.chain_rows(1) == rows[-1:]
