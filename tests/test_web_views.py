"""andon serve's later views (issue 13): the worker column and the pool's progress on the
board, the sandbox level and the context view per stage, the hash-chain status of the events
(cached by the newest event id), the side-by-side diff, and stored experiments next to the
`--runs` tables. A real git repository, a real SQLite store written with the store's own
methods, a real uvicorn server spoken to over HTTP; no browser."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from urllib.parse import urlparse

import pytest
from test_web_pages import RAW_MARKERS, SCRIPT, get

from andon.context import load
from andon.context.analyse import analyse
from andon.context.html import page as context_page
from andon.context.stage import line, summarise
from andon.experiments.compare import compare
from andon.experiments.html import render_html
from andon.experiments.stored import run_table
from andon.packet import load_packets
from andon.store import Store, chain
from andon.usage import Usage
from andon.web import guard
from andon.web.app import Settings
from andon.web.server import start

from helpers import git, make_project, mul_packet

TRANSCRIPT = Path(__file__).parent / "fixtures" / "transcripts" / "claude-code" / "5c0375b4.jsonl"
SANDBOX_NOTE = "sandbox fs+net: bubblewrap, uid 65534, no capabilities, loopback only"


def _populate(root: Path) -> None:
    """P1 done by worker w2 (stage with a claude-code transcript, sandbox fs+net), P2
    running on w1 in a pool of 2 started and not stopped, P3 ready; a stored experiment
    with a hostile condition name."""
    plant = git(root, "rev-parse", "HEAD").strip()
    (root / "src" / "calc" / "ops.py").write_text(
        (root / "src" / "calc" / "ops.py").read_text() + f"\n# {SCRIPT}\nZ = 1\n")
    git(root, "commit", "-qam", "agent change")
    cand = git(root, "rev-parse", "HEAD").strip()
    store = Store(root / ".andon" / "andon.db")
    for p in load_packets(root / "packets", root):
        store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                            p.model_dump(mode="json", by_alias=True))
    store.event("pool-started", data={"workers": 2})
    evidence = root / ".andon" / "evidence" / "P1" / "1"
    evidence.mkdir(parents=True)
    transcript = evidence / "implement.transcript.jsonl"
    shutil.copy(TRANSCRIPT, transcript)
    plain = evidence / "review.transcript.log"
    plain.write_text(f"not a transcript format {SCRIPT}\n")
    u = Usage(notes=["ended at a limit: memory", SANDBOX_NOTE, "cost unknown: no price"])
    for pid, worker in (("P1", "w2"), ("P2", "w1")):
        a = store.new_attempt(pid, "scripted", 1)
        store.transition(pid, "running", "claimed", a["id"], {"worker": worker, "n": 1})
        if pid == "P1":
            store.update_attempt(a["id"], plant_sha=plant, candidate_sha=cand)
            store.add_stage_run(a["id"], "implement", "scripted", 0, False, 0.5,
                                str(transcript), "claim", u, "2026-01-01T00:00:00")
            store.add_stage_run(a["id"], "review", "scripted", 0, False, 0.5, str(plain),
                                "claim", Usage(notes=["sandbox none: the agent runs as "
                                                      "andon's user"]),
                                "2026-01-01T00:00:01")
            store.add_stage_run(a["id"], "fix", "scripted", 0, False, 0.5, str(plain),
                                "claim", None, "2026-01-01T00:00:02")
            for to in ("gating", "merging", "done"):
                store.transition(pid, to, to, a["id"])
    store.upsert_experiment("exp1", "exp1.toml", {"name": "exp1"})
    for t in range(6):
        for cond, ok in (("a", t % 2 == 0), (f"b{SCRIPT}", True)):
            store.add_experiment_run("exp1", f"t{t}", cond, 1,
                                     "resolved" if ok else "unresolved",
                                     {"usage": {"cost_usd": 0.1}}, "2026-01-01T00:00:00")
    store.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("webviews") / "proj",
                        {"P1": mul_packet("P1"), "P2": mul_packet("P2"),
                         "P3": mul_packet("P3")})
    _populate(root)
    return root


@pytest.fixture(scope="module")
def server(project):
    running = start(Settings(project))
    yield running
    running.stop()


def _url(server, path: str = "/") -> str:
    return f"{server.login.rstrip('/')}{path}"


def _href(server, path: str) -> str:
    """A link as the pages write it: under the token's root, without the host."""
    return 'href="' + urlparse(server.login).path.rstrip("/") + path + '"'


def _cell(body: str, row: str, cls: str) -> str:
    """The text of the ``<td class=cls>`` in ``<tr id=row>``."""
    tr = body[body.index(f'id="{row}"'):]
    tr = tr[:tr.index("</tr>")]
    start = tr.index(f'class="{cls}"')
    return tr[tr.index(">", start) + 1:tr.index("</td>", start)]


def test_board_names_each_packets_worker_and_the_pools_progress(server):
    body = get(_url(server, "/"))[2]
    assert _cell(body, "row-P2", "worker") == "w1"   # working now
    assert _cell(body, "row-P1", "worker") == "w2"   # worked it (the newest claim)
    assert _cell(body, "row-P3", "worker") == ""     # never claimed
    assert 'id="pool"' in body and "w1: P2 running" in body and "w2 idle" in body
    assert '<progress id="run-progress" value="1" max="3">' in body
    rows = get(_url(server, "/board/rows"))[2]
    assert 'class="worker">w1<' in rows  # the live fragment carries it too


def test_packet_page_shows_each_stages_sandbox_level(server):
    body = get(_url(server, "/packets/P1"))[2]
    levels = [part.split("<", 1)[0] for part in body.split('class="sandbox">')[1:]]
    # the first note that names a level, wherever the limit note put it; a stage whose
    # usage was never recorded says so instead of guessing
    assert levels == ["fs+net", "none", "not recorded"]


def test_packet_page_shows_the_context_summary_and_links_its_page(server, project):
    body = get(_url(server, "/packets/P1"))[2]
    expected = line(summarise(project / ".andon/evidence/P1/1/implement.transcript.jsonl",
                              write_page=False))
    assert expected.split(";")[0] in body and "claude-code" in body
    assert _href(server, "/packets/P1/attempts/1/stages/0/context") in body
    # a transcript in no known format: the reason, and no link to a page
    assert "/stages/1/context" not in body and "not read:" in body


def test_context_page_is_andon_contexts_page_sandboxed(server, project):
    status, headers, body = get(_url(server, "/packets/P1/attempts/1/stages/0/context"))
    assert status == 200
    conv = load(project / ".andon/evidence/P1/1/implement.transcript.jsonl")
    assert body == context_page(analyse(conv, near=False), conv)
    csp = headers["content-security-policy"]
    assert csp.startswith("sandbox allow-scripts;") and "connect-src 'none'" in csp
    assert "allow-same-origin" not in csp
    # no page for a stage without a readable transcript, for one that is not there, and none
    # by any path in the request
    for bad in ("/packets/P1/attempts/1/stages/1/context", "/packets/P1/attempts/1/stages/9/"
                "context", "/packets/P1/attempts/1/stages/-1/context",
                "/packets/NOPE/attempts/1/stages/0/context"):
        assert get(_url(server, bad))[0] == 404, bad
    # the page was computed, not written beside the transcript (the server only reads)
    assert not (project / ".andon/evidence/P1/1/implement.transcript.jsonl.context.html"
                ).exists()


def test_diff_is_shown_unified_and_side_by_side(server):
    body = get(_url(server, "/packets/P1"))[2]
    assert 'class="diff code unified"' in body and 'class="diff code split"' in body
    assert 'data-toggle="diff"' in body  # the script switches between them; both render
    split = body[body.index('class="diff code split"'):]
    split = split[:split.index("</table>")]
    assert "&lt;script&gt;" in split
    for marker in RAW_MARKERS:
        assert marker not in body


def test_events_page_shows_the_chain_intact_with_its_head(server, project):
    body = get(_url(server, "/events"))[2]
    s = Store(project / ".andon" / "andon.db")
    head = chain.verify(s.chain_rows(), check_files=False).head
    s.close()
    assert 'id="chain"' in body and "intact" in body and head in body


def test_events_chain_verdict_is_cached_by_the_newest_event(project, monkeypatch):
    running = start(Settings(project))
    try:
        calls = []
        real = chain.verify

        def counting(*a, **k):
            calls.append(1)
            return real(*a, **k)
        monkeypatch.setattr(chain, "verify", counting)
        for _ in range(3):
            assert get(f"{running.login.rstrip('/')}/events")[0] == 200
        assert len(calls) == 1
        s = Store(project / ".andon" / "andon.db")
        s.event("note", "P3", data={"x": 1})
        s.close()
        assert get(f"{running.login.rstrip('/')}/events")[0] == 200
        assert len(calls) == 2
    finally:
        running.stop()


@pytest.mark.store_tampered  # it edits an event to see the page say so
def test_events_page_names_the_first_broken_link(tmp_path, project):
    copy = tmp_path / "proj"
    shutil.copytree(project, copy, symlinks=True)
    db = sqlite3.connect(copy / ".andon" / "andon.db")
    db.execute("DROP TRIGGER events_append_only_u")  # what someone behind andon's back does
    victim = db.execute("SELECT id FROM events WHERE kind = 'claimed' ORDER BY id").fetchone()[0]
    db.execute("UPDATE events SET data = '{\"worker\": \"w9\"}' WHERE id = ?", (victim,))
    db.commit()
    db.close()
    running = start(Settings(copy))
    try:
        body = get(f"{running.login.rstrip('/')}/events")[2]
    finally:
        running.stop()
    assert "NOT intact" in body and f"event {victim} (claimed) was edited" in body


def test_experiments_list_reads_the_store_and_reports_with_compare_html(server, project):
    body = get(_url(server, "/experiments"))[2]
    assert "exp1" in body and "12 runs" in body
    assert _href(server, "/experiments/stored/exp1") in body
    page = get(_url(server, "/experiments/stored/exp1?baseline=a"))[2]
    assert '<iframe' in page and "/experiments/stored/exp1/report?baseline=a" in page
    for marker in RAW_MARKERS:
        assert marker not in page
    status, headers, report = get(_url(server, "/experiments/stored/exp1/report?baseline=a"))
    s = Store(project / ".andon" / "andon.db")
    expected = render_html(compare(run_table(s, "exp1"), "a", None))
    s.close()
    assert status == 200 and report == expected
    assert headers["content-security-policy"] == guard.REPORT_CSP
    assert get(_url(server, "/experiments/stored/nope"))[0] == 404
    assert get(_url(server, "/experiments/stored/nope/report?baseline=a"))[0] == 404


def test_the_board_page_carries_the_mark_its_first_poll_sends(server):
    body = get(_url(server, "/"))[2]
    mark = body.split('data-mark="', 1)[1].split('"', 1)[0].replace("&#34;", '"')
    status, headers, _ = get(_url(server, "/board/rows"), {"If-None-Match": mark})
    assert status == 304 and {k.lower(): v for k, v in headers.items()}["etag"] == mark
