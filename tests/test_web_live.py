"""andon serve's end-to-end proofs (issue 13): `andon demo --serve` as a user starts it (a
subprocess, its printed URL, the board over HTTP, Ctrl-C), and the board in a real browser
following a running `andon run --workers 2` without a reload.

The agents of the pool announce themselves on a FIFO and wait on one per packet, so the test
sees both at work before letting them finish: no sleeps."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest
from test_e2e_resume import start_andon, wait_for_line
from test_web_browser import FINAL, browser, pytestmark, shot  # noqa: F401  (a fixture, a skip)
from test_web_pages import get
from test_workers import mod_packet
from test_workers_kill import HONEST  # writes its packet's module

from andon.store import Store
from andon.web.app import Settings
from andon.web.server import start

from helpers import GIT_ENV, _add_lines, config_toml, make_project

By = pytest.importorskip("selenium.webdriver.common.by").By
WebDriverWait = pytest.importorskip("selenium.webdriver.support.ui").WebDriverWait
Stale = pytest.importorskip("selenium.common.exceptions").StaleElementReferenceException


@pytest.mark.e2e
def test_andon_demo_serve_serves_the_whole_demo_until_ctrl_c(tmp_path):
    root = tmp_path / "ledger"
    proc = subprocess.Popen(
        [sys.executable, "-m", "andon", "demo", "--serve", "--port", "0", "--dir", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        env={**os.environ, **GIT_ENV, "COLUMNS": "200"}, start_new_session=True)
    said: list[str] = []
    try:
        login = None
        for line in proc.stdout:  # the demo's report, then the server's URL
            said.append(line)
            found = re.match(r"open (http://127\.0\.0\.1:\d+/t/[\w-]+/)$", line.strip())
            if found:
                login = found.group(1)
                break
        assert login, "no URL printed:\n" + "".join(said[-60:])
        status, _, body = get(login)
        assert status == 200
        for pid, want in FINAL.items():  # B06 waits for a person in the page
            row = body[body.index(f'id="row-{pid}"'):]
            row = row[:row.index("</tr>")]
            assert f'class="state s-{want}"' in row, (pid, row)
        assert get(login + "packets/B06")[2].count('id="approve"') == 1
        assert get(login.split("/t/")[0] + "/")[0] == 403  # nothing without the token
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        proc.stdout.close()


def _row_text(driver, pid: str) -> str:
    rows = driver.find_elements(By.ID, f"row-{pid}")
    try:
        return rows[0].text if rows else ""
    except Stale:  # swapped by the page's poll between find and read: look again
        return ""


@pytest.mark.e2e
def test_the_board_follows_andon_run_workers_2_without_a_reload(tmp_path, browser):  # noqa: F811
    # the agents speak through FIFOs outside their worktrees: bound writable by name
    sync = tmp_path / "sync"
    sync.mkdir()
    config = _add_lines(config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                                    worktree_root=tmp_path / "worktrees"),
                        "agent", f'sandbox_paths = ["rw:{sync}"]\n')
    root = make_project(tmp_path / "repo", {p: mod_packet(p) for p in ("P1", "P2")},
                        config=config)
    Store(root / ".andon" / "andon.db").close()  # the server opens an existing store
    spoke = sync / "spoke.fifo"
    os.mkfifo(spoke)
    for pid in ("P1", "P2"):
        os.mkfifo(sync / f"hold-{pid}.fifo")
    agent = (f"{HONEST}; echo \"$ANDON_PACKET_ID\" > '{spoke}'; "
             f"read x < '{sync}'/hold-\"$ANDON_PACKET_ID\".fifo")
    running = start(Settings(root))
    log = tmp_path / "run.log"
    proc = None
    try:
        browser.get(running.login)
        browser.execute_script("window.__same_page = 1")
        proc = start_andon(root, log, "--workers", "2", "--agent", "command",
                           "--command", agent)
        said = set(wait_for_line(spoke, proc, log).split())
        while len(said) < 2:
            said |= set(wait_for_line(spoke, proc, log).split())
        # both agents are at work: the open page shows each packet running on its worker
        WebDriverWait(browser, 60).until(
            lambda d: all("running" in _row_text(d, p) for p in ("P1", "P2")))
        # the rows are replaced by every poll: read them again when one went stale
        settled = WebDriverWait(browser, 60, ignored_exceptions=(
            Stale,))
        pool = settled.until(lambda d: d.find_element(By.ID, "pool").text)
        assert re.search(r"w\d: P1 running", pool) and re.search(r"w\d: P2 running", pool)
        workers = settled.until(lambda d: {
            p: d.find_element(By.CSS_SELECTOR, f"#row-{p} td.worker").text
            for p in ("P1", "P2")})
        assert sorted(workers.values()) == ["w1", "w2"], workers
        shot(browser, "board-workers-running.png")
        for pid in ("P1", "P2"):
            with open(sync / f"hold-{pid}.fifo", "w") as hold:
                hold.write("go\n")
        assert proc.wait(timeout=300) == 0, log.read_text()
        # the page's poll may swap any element between find and read: every read retries
        settled.until(lambda d: "2 of 2 packets done" in d.find_element(By.ID, "progress").text)
        settled.until(lambda d: all("done" in _row_text(d, p) for p in ("P1", "P2")))
        # who worked each packet stays on the board once the pool has stopped
        assert settled.until(lambda d: {
            p: d.find_element(By.CSS_SELECTOR, f"#row-{p} td.worker").text
            for p in ("P1", "P2")}) == workers
        # the pool's panel goes with its leases, which end after the packets' last state: the
        # poll that showed them done may have come before (CI: the panel still there)
        assert settled.until(lambda d: d.find_elements(By.ID, "pool") == [])
        assert browser.execute_script("return window.__same_page") == 1  # never reloaded
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        running.stop()
