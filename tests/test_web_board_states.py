"""The dashboard's board marks what `andon status` marks, for the same store and packets
folder: a packet whose file was removed is `removed` (its history stays, nobody is asked to
act on it), a packet file no run has reached yet is `ready` and "not run yet"; and the live
fragment notices a change to the packets folder even when the store did not move. A real
git repository, a real `andon run` (subprocess) writing a real SQLite store, a real uvicorn
server spoken to over HTTP."""

from __future__ import annotations

import json
import re

from test_web_pages import get

from andon.web.app import Settings
from andon.web.server import start

from helpers import andon, git, make_project, mul_packet


def _web_rows(body: str) -> dict[str, tuple[str, str]]:
    """``{id: (state shown, reason shown)}`` of the board's rows."""
    rows = {}
    for pid, tr in re.findall(r'<tr id="row-([^"]+)"[^>]*>(.*?)</tr>', body, re.S):
        state = re.search(r'<span class="state s-[^"]*">([^<]*)</span>', tr)
        reason = re.search(r'<td class="reason">(.*?)</td>', tr, re.S)
        assert state and reason, tr
        rows[pid] = (state.group(1), re.sub(r"<[^>]+>", "", reason.group(1)).strip())
    return rows


def _status_states(root) -> dict[str, str]:
    """``{id: the state the terminal board shows}``, from `andon status --json`."""
    data = json.loads(andon(root, "status", "--json").stdout)
    return {p["id"]: "removed" if p["removed"] else p["state"] for p in data["packets"]}


def test_the_dashboard_marks_removed_and_never_run_packets_as_the_board_does(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1),
                                            "P2": mul_packet("P2")})
    # P1 is blocked and halts the line: P2 is registered but never started
    assert andon(root, "run", "--agent", "command", "--command", "true").returncode == 1
    git(root, "rm", "-rq", "packets/P1")
    p3 = root / "packets" / "P3"
    p3.mkdir()
    (p3 / "packet.md").write_text(mul_packet("P3")[0])  # written after the run: not in the store
    git(root, "add", "-A")
    git(root, "commit", "-qm", "drop P1, add P3")
    expected = _status_states(root)
    assert expected == {"P1": "removed", "P2": "ready", "P3": "ready"}, expected

    running = start(Settings(root))
    try:
        url = running.login.rstrip("/")
        status, _, body = get(url + "/")
        assert status == 200, body[:500]
        rows = _web_rows(body)
        assert {pid: s for pid, (s, _) in rows.items()} == expected
        assert rows["P1"][1].startswith("packet file removed"), rows
        assert rows["P3"][1] == "not run yet", rows
        assert 'class="person"' not in body  # a removed blocked packet halts nothing

        # the packets folder changes, the store does not: the live fragment sees it
        status, headers, body = get(url + "/board/rows")
        mark = headers["etag"]
        assert get(url + "/board/rows", {"If-None-Match": mark})[0] == 304
        git(root, "rm", "-rq", "packets/P2")
        git(root, "commit", "-qm", "drop P2")
        status, headers, body = get(url + "/board/rows", {"If-None-Match": mark})
        assert status == 200 and headers["etag"] != mark
        rows = _web_rows(body)
        assert {pid: s for pid, (s, _) in rows.items()} == _status_states(root)
        assert rows["P2"][0] == "removed"
    finally:
        running.stop()
