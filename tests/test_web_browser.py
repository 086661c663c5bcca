"""andon serve in a real browser: headless Debian chromium driven by Selenium through
Debian's chromedriver, against a server on a store the demo produced (its scripted agents,
B07's replaced by a red-team agent that writes script, HTML and javascript: links into its
output and a file name, and still makes B07's mistake twice; B06 left awaiting a person).

The demo runs once per session (shared by xdist workers through a lock); a test that acts
works on its own copy.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from andon import decisions
from andon.agents import ScriptedAgent
from andon.config import load_config
from andon.demo import EXPECTED, build_project
from andon.demo.agents import BEHAVIOURS, evaluating_reviewer, same_mistake
from andon.git.repo import Repo
from andon.runner import Runner
from andon.state import open_store
from andon.store import Store
from andon.web.app import Settings
from andon.web.server import start

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
# CI installs both (scripts/test): there a missing browser fails the tests, never skips them
pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and DRIVER.exists()) and os.environ.get("CI") != "true",
    reason="Debian's chromium and chromium-driver are needed (scripts/test installs them)")
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SCRIPT = "<script>window.__pwned=1</script>"
HOSTILE = (f'{SCRIPT} <img src=x onerror="window.__pwned=2"> '
           '<a href="javascript:window.__pwned=3">click</a> "><b id="pwn">owned</b>')
HOSTILE_NAME = "src/ledger/<img src=x onerror=window.__pwned=4>.py"
FINAL = {**{pid: want for pid, (want, _) in EXPECTED.items()}, "B06": "awaiting_human"}
SCREENS = os.environ.get("ANDON_WEB_SCREENS")  # a folder: save screenshots there


def red_team(ctx) -> str:
    """B07's mistake, plus hostile text in a new file's name and content and in its claim."""
    same_mistake(ctx)
    target = ctx.worktree / HOSTILE_NAME
    target.write_text(f"# {HOSTILE}\n")
    return f"All done! {HOSTILE}"


def _run_demo(root: Path) -> None:
    build_project(root)
    agents = {pid: ScriptedAgent(fn) for pid, fn in BEHAVIOURS.items()}
    agents["B07"] = ScriptedAgent(red_team)
    reviewer = ScriptedAgent(evaluating_reviewer)
    repo = Repo(root)
    runner = Runner(repo, load_config(root), open_store(repo),
                    lambda p, stage: reviewer if stage.startswith("review") else agents[p.id])
    runner.run()
    runner.store.close()


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory) -> Path:
    """The demo's repository and store, made once for every worker of this session
    (``ANDON_WEB_DEMO``: a folder where an earlier session left one, to rerun quickly)."""
    if os.environ.get("ANDON_WEB_DEMO"):
        return Path(os.environ["ANDON_WEB_DEMO"]) / "ledger"
    # under xdist each worker's basetemp is inside the session's folder: share that one
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "web-demo" / "ledger"
    with open(shared / "web-demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "web-demo.done").exists():
            shutil.rmtree(root.parent, ignore_errors=True)
            _run_demo(root)
            (shared / "web-demo.done").write_text("")
    return root


@pytest.fixture
def own_copy(demo_root, tmp_path) -> Path:
    """A copy of the demo (repository and store) this test may change."""
    copy = tmp_path / "ledger"
    shutil.copytree(demo_root, copy, symlinks=True)
    return copy


@pytest.fixture(scope="module")
def shared_server(demo_root):
    running = start(Settings(demo_root))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    opts = Options()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def requested_urls(driver) -> list[str]:
    import json
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def shot(driver, name: str) -> None:
    """With ANDON_WEB_SCREENS set: the whole page (up to 8,000 px tall) as a PNG there."""
    if SCREENS:
        Path(SCREENS).mkdir(parents=True, exist_ok=True)
        tall = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1400, min(int(tall) + 40, 8000))
        driver.save_screenshot(str(Path(SCREENS) / name))
        driver.set_window_size(1400, 1000)


def test_the_board_lists_the_demo_with_final_states_and_the_block_reason(shared_server,
                                                                          browser):
    browser.get(shared_server.login)
    shot(browser, "board.png")
    for pid, want in FINAL.items():
        row = browser.find_element(By.ID, f"row-{pid}")
        assert want in row.text, (pid, row.text)
    rows = browser.find_elements(By.CSS_SELECTOR, "table.board tbody tr")
    # where a person is needed comes first
    assert [r.get_attribute("id") for r in rows[:2]] == ["row-B07", "row-B06"]
    assert "same failure as attempt 1" in browser.find_element(By.ID, "row-B07").text


def test_the_red_team_output_is_text_and_nothing_runs(shared_server, browser):
    browser.get(shared_server.login + "packets/B07")
    shot(browser, "packet-B07.png")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert SCRIPT in body  # shown, as text
    assert "window.__pwned=4" in body  # the file name, in the diff
    assert browser.execute_script("return window.__pwned") is None
    assert browser.find_elements(By.ID, "pwn") == []
    assert not [a for a in browser.find_elements(By.TAG_NAME, "a")
                if (a.get_attribute("href") or "").startswith("javascript:")]
    # the side-by-side diff too: hidden until toggled, then the hostile file's text as text
    split = browser.find_elements(By.CSS_SELECTOR, "table.diff.split")
    unified = browser.find_elements(By.CSS_SELECTOR, "table.diff.unified")
    assert split and unified and not split[0].is_displayed() and unified[0].is_displayed()
    browser.find_element(By.CSS_SELECTOR, "[data-toggle=diff]").click()
    assert split[0].is_displayed() and not unified[0].is_displayed()
    shown = " ".join(t.text for t in split)
    assert SCRIPT in shown and "window.__pwned=4" in shown
    shot(browser, "packet-B07-split.png")
    assert browser.execute_script("return window.__pwned") is None
    browser.find_element(By.CSS_SELECTOR, "[data-toggle=diff]").click()
    assert unified[0].is_displayed() and not split[0].is_displayed()
    # the transcript page too
    browser.get(shared_server.login + "packets/B07/attempts/1/stages/0/transcript")
    assert SCRIPT in browser.find_element(By.TAG_NAME, "body").text
    assert browser.execute_script("return window.__pwned") is None


def test_the_pages_ask_no_other_host(shared_server, browser):
    requested_urls(browser)  # drop what earlier tests requested
    for path in ("", "packets/B07", "events", "experiments", "packets/B05"):
        browser.get(shared_server.login + path)
    urls = requested_urls(browser)
    assert urls, "the performance log recorded no request"
    assert all(u.startswith(shared_server.url + "/") for u in urls), urls
    shot(browser, "packet-B05.png")


def test_approving_b06_in_the_page_merges_it(own_copy, browser):
    running = start(Settings(own_copy))
    try:
        browser.get(running.login + "packets/B06")
        shot(browser, "packet-B06-awaiting.png")
        browser.find_element(By.ID, "approve").click()
        WebDriverWait(browser, 120).until(lambda d: d.find_elements(By.ID, "notice"))
        assert "done" in browser.find_element(By.TAG_NAME, "h1").text
    finally:
        running.stop()
    store = Store(own_copy / ".andon" / "andon.db")
    assert store.packet("B06")["state"] == "done"
    merge = store.attempts("B06")[-1]["merge_sha"]
    approved = [e for e in store.events("B06") if e["kind"] == "approved"]
    assert approved and "andon serve" in approved[-1]["data"]["by"]
    store.close()
    branch = load_config(own_copy).andon.integration_branch
    on_branch = subprocess.run(["git", "merge-base", "--is-ancestor", merge, branch],
                               cwd=own_copy, check=False)
    assert on_branch.returncode == 0


def test_an_action_without_the_token_is_refused(own_copy, browser):
    running = start(Settings(own_copy))
    try:
        browser.get(running.login + "packets/B06")
        # the same form, posted to the same path without the token
        browser.execute_script(
            "const f = document.querySelector('form[action$=\"/approve\"]');"
            "f.action = f.action.replace(/\\/t\\/[^/]+/, '');")
        browser.find_element(By.ID, "approve").click()
        WebDriverWait(browser, 30).until(lambda d: "refused" in d.page_source
                                         or "Not Found" in d.page_source)
    finally:
        running.stop()
    store = Store(own_copy / ".andon" / "andon.db")
    assert store.packet("B06")["state"] == "awaiting_human"
    store.close()


def test_the_board_updates_without_a_reload(own_copy, browser):
    running = start(Settings(own_copy))
    try:
        browser.get(running.login)
        browser.execute_script("window.__same_page = 1")
        decisions.reject(Repo(own_copy), load_config(own_copy), "B06", "a test", "not yet")
        # the live update replaces the row: one found just before it is stale, so look again
        WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: "needs_work" in d.find_element(By.ID, "row-B06").text)
        assert browser.execute_script("return window.__same_page") == 1
    finally:
        running.stop()
