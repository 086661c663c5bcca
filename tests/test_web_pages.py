"""andon serve without a browser: the token, CSRF and Host checks, escaping of hostile
content in every page, read-only store access, no file served by a path from the request,
and the actions going through the CLI's code (andon.decisions). A real git repository and a
real SQLite store written with the store's own methods; a real uvicorn server on 127.0.0.1
spoken to over HTTP."""

from __future__ import annotations

import csv
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from andon.experiments.compare import compare
from andon.experiments.html import render_html
from andon.experiments.runs import read_csv
from andon.packet import load_packets
from andon.store import Store
from andon.web import diffview, guard
from andon.web.app import Settings
from andon.web.server import start
from andon.web.views import open_read_only

from helpers import git, make_project, mul_packet

# What a red-team agent writes everywhere it can: each would run script if not escaped.
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=2">'
JS_LINK = "javascript:window.__pwned=3"
BREAKOUT = '"><b id="pwn">owned</b>'
# ... and what reorders or hides text when shown ("Trojan Source": a bidi override, a
# zero-width space) or acts on a terminal the page is copied into
TROJAN = "\u202e\u200b\x1b[2J\x9b"
HOSTILE = f"{SCRIPT} {IMG} {BREAKOUT} {JS_LINK} {TROJAN}"
HOSTILE_FILE = "src/calc/<img src=x onerror=alert(1)>.py"
RAW_MARKERS = ("<script>window", "<img src=x", '<b id="pwn"', 'href="javascript:',
               "\u202e", "\u200b", "\x1b", "\x9b")


def _blocked_and_hostile(root: Path) -> None:
    """P1 blocked after two hostile attempts, P2 awaiting a person: every free-text field
    an agent can reach holds HOSTILE, and the candidate commit adds HOSTILE_FILE."""
    plant = git(root, "rev-parse", "HEAD").strip()
    (root / HOSTILE_FILE).write_text(f"# {SCRIPT}\nX = '{IMG}'  # {TROJAN}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"agent: {HOSTILE}")
    cand = git(root, "rev-parse", "HEAD").strip()
    store = Store(root / ".andon" / "andon.db")
    for p in load_packets(root / "packets", root):
        store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                            p.model_dump(mode="json", by_alias=True))
    evidence = root / ".andon" / "evidence" / "P1" / "1"
    evidence.mkdir(parents=True)
    log = evidence / "suite.log"
    log.write_text(f"FAILED tests/test_x.py::test_{SCRIPT}\n")
    transcript = evidence / "implement.transcript.log"
    transcript.write_text(f"agent says {HOSTILE}\n")
    for pid, end in (("P1", "blocked"), ("P2", "awaiting_human")):
        a = store.new_attempt(pid, f"scripted {SCRIPT}", 1)
        store.transition(pid, "running", "claimed", a["id"])
        store.update_attempt(a["id"], plant_sha=plant, candidate_sha=cand,
                             branch=f"andon/{pid}/1{IMG}", reason=f"reason {HOSTILE}",
                             failure_layer="code", evidence_dir=str(evidence))
        store.add_stage_run(a["id"], "implement", "scripted", 0, False, 0.5, str(transcript),
                            f"claim {HOSTILE}", None, "2026-01-01T00:00:00")
        store.add_gate_result(a["id"], "suite", "fail", "code", f"summary {HOSTILE}", {
            "findings": [
                {"kind": "failed", "message": f"msg {HOSTILE}", "path": None,
                 "test_id": f"tests/test_x.py::test_{SCRIPT}", "line": None},
                {"kind": "pattern", "message": "here", "path": HOSTILE_FILE, "test_id": None,
                 "line": 1},
                {"kind": "pattern", "message": "link", "path": JS_LINK, "test_id": None,
                 "line": 2}],
            "runs": [{"name": f"suite{SCRIPT}", "exit_status": 1, "duration_s": 1.0,
                      "log_path": str(log), "argv": ["pytest", IMG]},
                     {"name": "outside", "exit_status": 1, "duration_s": 1.0,
                      "log_path": "/etc/passwd", "output_tail": f"tail {SCRIPT}"}]},
            "2026-01-01T00:00:01", 1.0)
        store.add_review(a["id"], "review", 1, HOSTILE, [], {
            "verdicts": [{"invariant": "I1", "verdict": "violated",
                          "evidence": f"{HOSTILE_FILE}:1", "reason": f"why {HOSTILE}"}],
            "findings": [{"severity": "major", "location": JS_LINK, "message": HOSTILE}],
            "decision": "revise"}, "revise", "revise", "implement", [f"down {HOSTILE}"])
        store.transition(pid, "gating", "gating", a["id"], {"note": HOSTILE})
        store.transition(pid, end, end, a["id"], {"why": HOSTILE})
    store.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("web") / "proj",
                        {"P1": mul_packet("P1"), "P2": mul_packet("P2", gate="human")})
    _blocked_and_hostile(root)
    runs = root.parent / "runs.csv"
    with open(runs, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["task", "condition", "resolved"])
        for t in range(6):
            w.writerow([f"t{t}", "a", int(t % 2 == 0)])
            w.writerow([f"t{t}", f"b{SCRIPT}", 1])
    return root


@pytest.fixture(scope="module")
def server(project):
    running = start(Settings(project, experiments=[project.parent / "runs.csv"]))
    yield running
    running.stop()


def _url(server, path: str = "/") -> str:
    return f"{server.login.rstrip('/')}{path}"


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def post(url: str, fields: dict[str, str], headers: dict[str, str] | None = None
         ) -> tuple[int, dict, str]:
    data = "&".join(f"{k}={urllib.request.quote(v)}" for k, v in fields.items()).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def state(project: Path, pid: str) -> str:
    s = Store(project / ".andon" / "andon.db")
    try:
        return s.packet(pid)["state"]
    finally:
        s.close()


PAGES = ["/", "/board/rows", "/packets/P1", "/packets/P2", "/events", "/events?kind=blocked",
         "/packets/P1/attempts/1/gates/0/runs/0/log", "/packets/P1/attempts/1/gates/0/runs/1/log",
         "/packets/P1/attempts/1/stages/0/transcript", "/experiments", "/experiments/0",
         "/experiments/0?baseline=a"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_escapes_what_agents_wrote(server, path):
    status, headers, body = get(_url(server, path))
    assert status == 200, body[:500]
    for marker in RAW_MARKERS:
        assert marker not in body, f"{path}: {marker!r} reached the page unescaped"
    assert headers["content-security-policy"] == guard.CSP
    assert "script-src 'self'" in guard.CSP and "unsafe-inline" not in guard.CSP


def test_hostile_text_is_shown_as_text(server):
    body = get(_url(server, "/packets/P1"))[2]
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body
    assert "&lt;b id=&#34;pwn&#34;&gt;" in body or "&lt;b id=&quot;pwn&quot;&gt;" in body
    # the hostile file's path:line finding links to its line in the diff, by a hashed anchor
    assert f'href="#{diffview.anchor(1, HOSTILE_FILE, 1)}"' in body
    assert f'id="{diffview.anchor(1, HOSTILE_FILE, 1)}"' in body
    assert "\\u202e\\u200b\\x1b[2J\\x9b" in body  # shown as escapes, in the diff too
    assert body.count("\\u202e") >= 2
    # a "path" that is a javascript: URL is text, never a link target
    assert "javascript:window.__pwned=3" in body and 'href="javascript' not in body


def test_blocked_and_awaiting_come_first_with_their_reason(server):
    body = get(_url(server, "/"))[2]
    assert body.index('id="row-P1"') < body.index('id="row-P2"')
    assert "reason &lt;script&gt;" in body


def test_a_log_outside_the_state_folder_is_never_read(server):
    body = get(_url(server, "/packets/P1/attempts/1/gates/0/runs/1/log"))[2]
    assert "root:" not in body  # /etc/passwd
    assert "tail &lt;script&gt;" in body and "the log file is gone" in body


def test_the_comparison_is_andon_compare_html_in_a_sandbox(server, project):
    status, headers, body = get(_url(server, "/experiments/0/report?baseline=a"))
    assert status == 200
    assert body == render_html(compare(read_csv(project.parent / "runs.csv"), "a", None))
    assert "sandbox" in headers["content-security-policy"]
    assert "script-src" not in headers["content-security-policy"]


@pytest.mark.parametrize("path", ["/", "/packets/P1", "/events", "/board/rows"])
def test_no_token_no_page(server, path):
    base = server.url
    assert get(base + path)[0] == 403
    assert get(f"{base}/t/{'x' * 43}{path}")[0] == 403
    assert get(f"{base}/t/{server.login.split('/t/')[1][:-2]}{path}")[0] == 403  # a prefix


def test_another_host_name_is_refused(server):
    # a DNS-rebinding page reaches 127.0.0.1 under its own name
    assert get(_url(server, "/"), {"Host": "evil.example:80"})[0] == 421


@pytest.mark.parametrize("path", ["/static/../.andon/andon.db", "/static/%2e%2e%2fandon.db",
                                  "/static/andon.py", "/static/app.py", "/static/x%00.js"])
def test_no_file_by_a_path_from_the_request(server, path):
    status, _, body = get(server.url + path)
    assert status in (403, 404), (path, status)
    assert "SQLite" not in body and "import" not in body


def test_an_action_without_the_token_or_csrf_is_refused_and_changes_nothing(server, project):
    csrf = guard.csrf_value(server.login.split("/t/")[1].rstrip("/"))
    # no token in the path
    assert post(f"{server.url}/packets/P1/unblock", {"csrf": csrf})[0] in (403, 404)
    assert post(f"{server.url}/t/{'y' * 43}/packets/P1/unblock", {"csrf": csrf})[0] == 403
    # the token but no CSRF value, or a wrong one
    assert post(_url(server, "/packets/P1/unblock"), {})[0] == 403
    assert post(_url(server, "/packets/P1/unblock"), {"csrf": "0" * 64})[0] == 403
    # the token and CSRF, from a page of another origin
    assert post(_url(server, "/packets/P1/unblock"), {"csrf": csrf},
                {"Origin": "http://evil.example"})[0] == 403
    assert state(project, "P1") == "blocked"


def test_an_action_the_lifecycle_refuses_says_why(server, project):
    csrf = guard.csrf_value(server.login.split("/t/")[1].rstrip("/"))
    status, _, body = post(_url(server, "/packets/P1/approve"), {"csrf": csrf})
    assert status == 409 and "not awaiting" in body
    status, _, body = post(_url(server, "/packets/P2/reject"), {"csrf": csrf, "why": "  "})
    assert status == 409 and "needs a reason" in body
    status, _, body = post(_url(server, "/packets/P2/explode"), {"csrf": csrf})
    assert status == 409 and "unknown action" in body
    assert state(project, "P1") == "blocked" and state(project, "P2") == "awaiting_human"


def test_unblock_and_reject_through_the_page_use_the_cli_transitions(tmp_path):
    root = make_project(tmp_path / "proj",
                        {"P1": mul_packet("P1"), "P2": mul_packet("P2", gate="human")})
    _blocked_and_hostile(root)
    running = start(Settings(root))
    try:
        csrf = guard.csrf_value(running.login.split("/t/")[1].rstrip("/"))
        url = running.login.rstrip("/")
        status, headers, _ = post(f"{url}/packets/P1/unblock", {"csrf": csrf},
                                  {"Origin": running.url})
        assert status == 303 and headers["location"].endswith("/packets/P1?done=unblock")
        status, _, _ = post(f"{url}/packets/P2/reject", {"csrf": csrf, "why": "too clever"})
        assert status == 303
    finally:
        running.stop()
    s = Store(root / ".andon" / "andon.db")
    assert s.packet("P1")["state"] == "ready" and s.packet("P2")["state"] == "needs_work"
    kinds = [e["kind"] for e in s.events()]
    assert "unblocked" in kinds and "rejected" in kinds
    assert any(e["kind"] == "rejected" and "too clever" in str(e["data"]) for e in s.events())


def test_pages_read_the_store_read_only(project):
    store = open_read_only(project / ".andon" / "andon.db")
    try:
        with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|query_only"):
            store.event("forged", "P1")
    finally:
        store.close()


def test_diff_lines_are_escaped_and_numbered():
    diff = ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n"
            " keep = 1\n-old = '<b>'\n+new = '<script>alert(1)</script>'\n")
    (f,) = diffview.parse(diff, 3)
    add = next(ln for ln in f.lines if ln.kind == "add")
    assert add.new == 2 and add.anchor == diffview.anchor(3, "x.py", 2)
    assert "<script>" not in add.html and "&lt;script&gt;" in add.html
    assert diffview.path_line("src/a.py:12") == ("src/a.py", 12)
    assert diffview.path_line("javascript:alert(1)") is None


def test_andon_serve_prints_a_url_that_opens_the_board(project):
    proc = subprocess.Popen([sys.executable, "-m", "andon", "-C", str(project), "serve",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        url = lines[1].split("open ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:") and "/t/" in url
        status, _, body = get(url)
        assert status == 200 and 'id="row-P1"' in body
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_andon_serve_without_a_store_or_the_extra_says_so(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import andon.web
    from andon.cli import main
    root = make_project(tmp_path / "bare")
    result = CliRunner().invoke(main, ["-C", str(root), "serve", "--port", "0"])
    assert result.exit_code == 2 and "no store" in result.output
    monkeypatch.setattr(andon.web, "missing", lambda: ["pygments"])
    result = CliRunner().invoke(main, ["-C", str(root), "serve"])
    assert result.exit_code == 2
    assert "pip install 'andon[web]'" in result.output and "pygments" in result.output


def test_the_board_poll_says_nothing_new_until_the_store_changes(tmp_path):
    root = make_project(tmp_path / "proj", {"P1": mul_packet("P1"),
                                            "P2": mul_packet("P2", gate="human")})
    _blocked_and_hostile(root)
    running = start(Settings(root))
    try:
        url = running.login.rstrip("/") + "/board/rows"
        status, headers, body = get(url)
        assert status == 200 and 'id="row-P1"' in body
        mark = headers["etag"]
        assert get(url, {"If-None-Match": mark})[0] == 304
        store = Store(root / ".andon" / "andon.db")
        store.transition("P1", "ready", "unblocked")
        store.close()
        status, headers, body = get(url, {"If-None-Match": mark})
        assert status == 200 and headers["etag"] != mark
    finally:
        running.stop()


def test_diff_file_names_git_quotes_are_read_back(tmp_path):
    root = make_project(tmp_path / "q")
    name = 'src/calc/a"b é <i>.py'
    (root / name).write_text("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "quoted")
    diff = git(root, "diff", "HEAD~1", "HEAD")
    assert '"b/' in diff  # git quoted it
    (f,) = diffview.parse(diff, 1)
    assert f.path == name
    assert next(ln for ln in f.lines if ln.kind == "add").anchor == diffview.anchor(1, name, 1)
