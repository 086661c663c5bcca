"""The command line, always through the real CLI in a subprocess (`python -m andon -C root`).

Covers help texts, `init`, every `andon check` error kind (with file:line, and the store left
alone), the board and evidence views after a real run, how `show` names a tampered planted
file or a forbidden path, config and repository errors, and the demo.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from andon.config import DEFAULT_TOML

from helpers import (
    FAST,
    GIT_ENV,
    MUL_CODE,
    andon,
    assert_tamper_outcome,
    config_toml,
    git,
    make_project,
    mul_packet,
    packet_md,
    skip_without_fs,
    with_sandbox,
)

HONEST = "printf '" + MUL_CODE.replace("\n", "\\n") + "' >> src/calc/ops.py"


def store_files(root: Path) -> dict[str, bytes]:
    """Every file under .andon/ with its bytes ({} when there is no store folder)."""
    d = root / ".andon"
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def store_dump(root: Path) -> list[str]:
    """The store's contents as SQL, to compare logically (WAL files may come and go)."""
    db = sqlite3.connect(root / ".andon" / "andon.db")
    try:
        return list(db.iterdump())
    finally:
        db.close()


def store_counts(root: Path) -> tuple[int, int, int]:
    """(packets, attempts, events) in the store."""
    db = sqlite3.connect(root / ".andon" / "andon.db")
    try:
        return tuple(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("packets", "attempts", "events"))
    finally:
        db.close()


# -- help --------------------------------------------------------------------------------

HELP = {
    (): ["work packets", "worktree", "init", "check", "run", "status", "show", "unblock",
         "demo"],
    ("init",): ["andon.toml", "packets/"],
    ("check",): ["Validate every packet", "file:line"],
    ("run",): ["Drain the packet queue", "--agent", "--command", "--only"],
    ("status",): ["board", "--json"],
    ("show",): ["evidence", "--json"],
    ("unblock",): ["blocked packet"],
    ("demo",): ["example project", "scripted agents"],
}


@pytest.mark.parametrize("command", list(HELP), ids=lambda c: " ".join(c) or "andon")
def test_help_exits_0_and_says_what_the_command_does(tmp_path, command):
    """`andon [COMMAND] --help` exits 0 and describes the command (no repository needed)."""
    r = andon(tmp_path, *command, "--help")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for word in HELP[command]:
        assert word in text, (word, r.stdout)


# -- init --------------------------------------------------------------------------------

def test_init_in_a_fresh_repository(tmp_path):
    """`andon init` in a just-`git init`ed repository writes andon.toml and packets/ (with its
    conftest.py), keeps .andon/ out of git (so `git status` shows only those two files); a
    second `init` exits 2 and leaves the file alone; `--force` rewrites it."""
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")

    r = andon(root, "init")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "andon.toml").read_text() == DEFAULT_TOML
    assert (root / "packets").is_dir()
    assert "/.andon/" in (root / ".git" / "info" / "exclude").read_text().splitlines()
    assert (root / ".andon").is_dir()
    assert git(root, "status", "--porcelain", "--untracked-files=all") == (
        "?? andon.toml\n?? packets/conftest.py\n")

    (root / "andon.toml").write_text("# mine\n")
    again = andon(root, "init")
    assert again.returncode == 2
    assert "exists" in again.stderr and "--force" in again.stderr
    assert (root / "andon.toml").read_text() == "# mine\n"

    forced = andon(root, "init", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (root / "andon.toml").read_text() == DEFAULT_TOML
    exclude = (root / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.andon/") == 1


# -- check -------------------------------------------------------------------------------

def _md(*lines: str) -> str:
    return "\n".join(lines) + "\n"


GOOD = packet_md("P1")
# name -> (files to write, the file the problem is in, its line (None: a folder), key words)
CHECK_ERRORS = {
    "no front matter": (
        {"packets/P1/packet.md": "# P1\n\nNo front matter here.\n"},
        "packets/P1/packet.md", 1, ["must start with a '+++' line"]),
    "unterminated front matter": (
        {"packets/P1/packet.md": _md("+++", 'id = "P1"', 'slug = "s"', 'goal = "g"',
                                     "", "## Context")},
        "packets/P1/packet.md", 1, ["never closed"]),
    "TOML syntax": (
        {"packets/P1/packet.md": _md("+++", 'id = "P1"', 'slug = "s"', 'goal = "no end',
                                     "+++")},
        "packets/P1/packet.md", 4, ["invalid TOML"]),
    "unknown field": (
        {"packets/P1/packet.md": packet_md("P1", colour="red")},
        "packets/P1/packet.md", 5, ["unknown field 'colour'"]),
    "missing field": (
        {"packets/P1/packet.md": _md("+++", 'id = "P1"', 'slug = "s"', "+++")},
        "packets/P1/packet.md", 1, ["missing required field 'goal'"]),
    "wrong type": (
        {"packets/P1/packet.md": packet_md("P1", max_attempts="3")},
        "packets/P1/packet.md", 5, ["max_attempts", "integer", "'3'"]),
    "duplicate id across files": (
        {"packets/A/packet.md": GOOD, "packets/B/packet.md": GOOD},
        "packets/B/packet.md", 2, ["duplicate packet id 'P1'", "packets/A/packet.md"]),
    "duplicate invariant id": (
        {"packets/P1/packet.md": _md("+++", 'id = "P1"', 'slug = "s"', 'goal = "g"', "",
                                     "[[invariants]]", 'id = "I1"', 'assert = "a"', "",
                                     "[[invariants]]", 'id = "I1"', 'assert = "b"', "+++")},
        "packets/P1/packet.md", 11, ["duplicate invariant id 'I1'"]),
    "unknown requires": (
        {"packets/P1/packet.md": packet_md("P1", requires=["P9"])},
        "packets/P1/packet.md", 5, ["unknown packet id 'P9'"]),
    "self-require": (
        {"packets/P1/packet.md": packet_md("P1", requires=["P1"])},
        "packets/P1/packet.md", 5, ["requires itself"]),
    "cycle": (
        {"packets/P1/packet.md": packet_md("P1", requires=["P2"]),
         "packets/P2/packet.md": packet_md("P2", requires=["P1"])},
        "packets/P1/packet.md", 5, ["cycle", "P1 -> P2 -> P1"]),
    "invalid glob": (
        {"packets/P1/packet.md": packet_md("P1", allowed_paths=["src/[calc"])},
        "packets/P1/packet.md", 5, ["allowed_paths", "unbalanced", "src/[calc"]),
    "path both allowed and forbidden": (
        {"packets/P1/packet.md": packet_md("P1", allowed_paths=["src/calc/[ab].py"],
                                           forbidden_paths=["src/calc/[ab].py"])},
        "packets/P1/packet.md", 5, ["'src/calc/[ab].py' also appears in forbidden_paths"]),
    "empty plant dir": (
        {"packets/P1/packet.md": GOOD},
        "packets/P1/plant", None, ["contains no files"]),
    "missing spec_path file": (
        {"packets/P1/packet.md": packet_md("P1", spec_path="docs/spec.md",
                                           spec_commit="abc1234")},
        "packets/P1/packet.md", 5, ["spec_path", "existing file", "docs/spec.md"]),
    "spec_path without spec_commit": (
        {"packets/P1/packet.md": packet_md("P1", spec_path="docs/spec.md"),
         "docs/spec.md": "# spec\n"},
        "packets/P1/packet.md", 5, ["spec_path is set but spec_commit is not"]),
}


def project_with(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, files=files)
    return root


@pytest.mark.parametrize("kind", list(CHECK_ERRORS))
def test_check_reports_each_error_kind_with_file_and_line(tmp_path, kind):
    """`andon check` exits 2 and prints `file:line: message` for the problem; it creates no
    store. `andon run` refuses the same packets with exit 2 and registers nothing."""
    files, where, line, words = CHECK_ERRORS[kind]
    root = project_with(tmp_path, files)
    if kind == "empty plant dir":
        (root / "packets" / "P1" / "plant").mkdir()

    r = andon(root, "check")
    assert r.returncode == 2, r.stdout + r.stderr
    location = f"{root / where}:{line}: " if line else f"{root / where}: "
    problem = next((ln for ln in r.stdout.splitlines() if ln.startswith(location)), None)
    assert problem is not None, (location, r.stdout)
    for word in words:
        assert word in problem, (word, problem)
    assert not (root / ".andon").exists()

    run = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert run.returncode == 2, run.stdout + run.stderr
    assert location in run.stderr and "nothing ran" in run.stderr
    assert store_counts(root) == (0, 0, 0)
    assert git(root, "for-each-ref", "refs/heads/andon") == ""


def test_check_json_lists_every_problem(tmp_path):
    """`andon check --json` prints parseable JSON with ok=false and each problem's path, line
    and message; exit status 2."""
    root = project_with(tmp_path, {
        "packets/P1/packet.md": packet_md("P1", requires=["P9"]),
        "packets/P2/packet.md": packet_md("P2", max_attempts=0),
    })
    r = andon(root, "check", "--json")
    assert r.returncode == 2
    data = json.loads(r.stdout)
    assert data["ok"] is False
    got = {(p["path"], p["line"]) for p in data["problems"]}
    assert got == {(str(root / "packets" / pid / "packet.md"), 5) for pid in ("P1", "P2")}
    assert any("P9" in p["message"] for p in data["problems"])


BAD_KEY_TOML = config_toml(add={"gates": "red_run = 5"})


def _config_and_packet_problems(tmp_path: Path, config: str) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, config=config, files={
        "packets/P1/packet.md": packet_md("P1", requires=["P9"])})
    return root


def test_check_json_reports_config_and_packet_problems_together(tmp_path):
    """An invalid andon.toml and an invalid packet: `check --json` still prints one JSON
    document on stdout, with the config problem (file, line, message) and the packet
    problem in the same shape, and exits 2."""
    root = _config_and_packet_problems(tmp_path, BAD_KEY_TOML)
    line = BAD_KEY_TOML.splitlines().index("red_run = 5") + 1
    r = andon(root, "check", "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert data["ok"] is False and data["packets"] == ["P1"]
    config, packet = data["problems"]
    assert (config["path"], config["line"]) == (str(root / "andon.toml"), line)
    assert config["message"].startswith("gates.red_run: unknown key"), config
    assert (packet["path"], packet["line"]) == (str(root / "packets/P1/packet.md"), 5)
    assert "unknown packet id 'P9'" in packet["message"]
    assert not (root / ".andon").exists()


def test_check_reports_config_problems_then_still_the_packet_problems(tmp_path):
    """Plain `andon check` with an invalid andon.toml prints its problem as file:line and
    then the packets' problems too (exit 2)."""
    root = _config_and_packet_problems(tmp_path, BAD_KEY_TOML)
    line = BAD_KEY_TOML.splitlines().index("red_run = 5") + 1
    r = andon(root, "check")
    assert r.returncode == 2, r.stdout + r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith(f"{root / 'andon.toml'}:{line}: gates.red_run: unknown key"), out
    assert out[1] == f"{root / 'packets/P1/packet.md'}:5: requires names unknown packet id 'P9'"
    assert out[2] == "2 problem(s) in andon.toml and packets/", out


@pytest.mark.parametrize("config, line, words", [
    ("[andon\n", 1, "invalid TOML"),
    (None, None, "not found; run `andon init` first"),
], ids=["invalid-toml", "missing"])
def test_check_with_an_unreadable_config_checks_the_default_packets_dir(tmp_path, config,
                                                                      line, words):
    """andon.toml unreadable (not TOML) or missing: `check` reports it, says it checked the
    default packets/ folder, and reports the packets' problems from there; `--json` too."""
    root = _config_and_packet_problems(tmp_path, config or DEFAULT_TOML)
    if config is None:
        (root / "andon.toml").unlink()
    r = andon(root, "check")
    assert r.returncode == 2, r.stdout + r.stderr
    where = f"{root / 'andon.toml'}:{line}: " if line else f"{root / 'andon.toml'}: "
    assert r.stdout.splitlines()[0].startswith(where + words), r.stdout
    assert "unknown packet id 'P9'" in r.stdout
    assert "default" in r.stderr and "packets/" in r.stderr, r.stderr
    data = json.loads(andon(root, "check", "--json").stdout)
    assert [(p["path"], p["line"]) for p in data["problems"]] == [
        (str(root / "andon.toml"), line), (str(root / "packets/P1/packet.md"), 5)]


def test_check_json_outside_a_repository_is_still_json(tmp_path):
    """Not in a git work tree: `check --json` prints a JSON document naming the problem."""
    plain = tmp_path / "plain"
    plain.mkdir()
    r = andon(plain, "check", "--json", env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert r.returncode == 2
    data = json.loads(r.stdout)
    assert data["ok"] is False and data["packets"] == []
    [problem] = data["problems"]
    assert problem["line"] is None and "not inside a git work tree" in problem["message"]


def test_check_on_valid_packets_exits_0(tmp_path):
    """Valid packets: `andon check` exits 0 and names them; `--json` says ok."""
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, {"P1": mul_packet("P1"), "P2": mul_packet("P2", requires=["P1"])})
    r = andon(root, "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 packet(s) OK: P1, P2" in r.stdout
    data = json.loads(andon(root, "check", "--json").stdout)
    assert data == {"ok": True, "packets": ["P1", "P2"], "problems": []}


def test_invalid_packet_leaves_an_existing_store_untouched(tmp_path):
    """After a real run, a packet made invalid: `andon check` exits 2 without touching a byte
    of the store, and `andon run` exits 2 without registering, attempting or logging anything."""
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, {"P1": mul_packet("P1")})
    first = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert first.returncode == 0, first.stdout + first.stderr
    (root / "packets" / "P2").mkdir()
    (root / "packets" / "P2" / "packet.md").write_text(packet_md("P2", requires=["P9"]))
    files, dump = store_files(root), store_dump(root)
    assert "andon.db" in files and store_counts(root)[0] == 1

    check = andon(root, "check")
    assert check.returncode == 2 and "unknown packet id 'P9'" in check.stdout
    assert store_files(root) == files

    run = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "unknown packet id 'P9'" in run.stderr
    assert store_dump(root) == dump


def test_check_reports_the_requires_problems_of_broken_packets_in_one_pass(tmp_path):
    """A newcomer's packets: A has a typo'd field and requires an unknown id on a line of its
    own; B and A require each other; C requires the broken A. `andon check` prints all of it
    at once (and nothing about C), exits 2 and creates no store; `andon run` refuses with the
    same problems and runs nothing."""
    root = project_with(tmp_path, {
        "packets/A/packet.md": _md("+++", 'id = "A"', 'slug = "a"', 'goal = "g"',
                                   "max_attemps = 2", "requires = [", '  "B",', '  "Zed",',
                                   "]", "+++"),
        "packets/B/packet.md": packet_md("B", requires=["A"]),
        "packets/C/packet.md": packet_md("C", requires=["A"], tests="none"),
    })
    a, b = root / "packets" / "A" / "packet.md", root / "packets" / "B" / "packet.md"
    expected = [
        f"{a}:5: unknown field 'max_attemps'; did you mean 'max_attempts'?",
        f"{a}:7: requires forms a cycle: A -> B -> A",
        f"{a}:8: requires names unknown packet id 'Zed'",
        f"{b}:5: requires forms a cycle: B -> A -> B",
    ]
    r = andon(root, "check")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.splitlines() == [*expected, "4 problem(s) in packets/"]
    assert not (root / ".andon").exists()

    run = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.splitlines()[:4] == expected
    assert "4 problem(s) in the packets; nothing ran" in run.stderr
    assert store_counts(root) == (0, 0, 0)
    assert git(root, "for-each-ref", "refs/heads/andon") == ""


# -- a real run, then the views ---------------------------------------------------------------

@pytest.fixture(scope="module")
def merged(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A project whose P1 an honest command agent got merged (the views below only read)."""
    root = tmp_path_factory.mktemp("merged") / "repo"
    root.mkdir()
    make_project(root, {"P1": mul_packet("P1")})
    run = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert run.returncode == 0, run.stdout + run.stderr
    return root, run


def test_run_prints_the_board(merged):
    """`andon run` ends by printing the board with the merged packet."""
    _, run = merged
    assert re.search(r"P1\s.*done", run.stdout), run.stdout


def test_status_table_shows_the_packet_done_and_merged(merged):
    """`andon status` prints the board: P1, done, and the merge commit."""
    root, _ = merged
    r = andon(root, "status")
    assert r.returncode == 0, r.stderr
    head = git(root, "rev-parse", "andon/integration").strip()
    row = next(ln for ln in r.stdout.splitlines() if " P1 " in ln)
    assert "done" in row and f"merged {head[:10]}" in row


def test_status_board_counts_skipped_gates_apart_and_explains_unknown_cost(merged):
    """In an 80-column terminal the board fits, counts passed and skipped gates apart (6
    passed, 3 skipped: static, flaky and mutation are off by default), shows an agent that
    reported no usage as `cost ?` with a legend line saying what `?` means, and an instant
    scripted agent's time as `<1 s` rather than `0 s`."""
    root, _ = merged
    r = andon(root, "status", env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines), r.stdout
    row = next(ln for ln in lines if " P1 " in ln)
    assert "6 ✓ 3 –" in row and "9 ✓" not in row, row
    assert "cost ? · <1 s" in row and "$?" not in row and " 0 s" not in row, row
    legend = [ln for ln in lines if ln.startswith("cost ?")]
    assert legend and "reported no usage" in " ".join(" ".join(lines).split()), r.stdout
    # the gates column's marks are read in words under the table (newcomer pass)
    text = " ".join(" ".join(lines).split())
    assert "6 ✓ = six passed · 3 – = three skipped, which checked nothing" in text, r.stdout
    assert "N suites T s = its N runs of the whole suite, T seconds in all" in text, r.stdout


@pytest.mark.parametrize("columns", [50, 60, 71])
def test_a_narrow_terminal_keeps_every_column_of_the_board_readable(merged, columns):
    """Below 72 columns the result column was squeezed to a few letters (at 50 it and
    `tries` vanished): tries, gates and agents now share one cell, every header is whole and
    the result says `merged <sha>` on one line."""
    root, _ = merged
    r = andon(root, "status", env={"COLUMNS": str(columns)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(ln) <= columns for ln in lines), r.stdout
    header = next(ln for ln in lines if "packet" in ln)
    assert header.split("┃")[1:-1] and [c.strip() for c in header.split("┃")[1:-1]] == [
        "packet", "state", "attempts", "result"], header
    head = git(root, "rev-parse", "andon/integration").strip()[:10]
    row = next(ln for ln in lines if " P1 " in ln)
    assert "done" in row, r.stdout
    body = [ln.split("│")[1:-1] for ln in lines if ln.count("│") == 5]
    attempts, result = ([c[i].strip() for c in body] for i in (2, 3))
    assert " ".join(filter(None, result)) == f"merged {head}", r.stdout
    assert attempts[:2] == ["1 try", "6 ✓ 3 –"] and attempts[3] == "cost ? · <1 s", r.stdout
    # not "1 suites"; and a suite under a second is "<1 s", not a "0 s" that reads as nothing
    assert re.fullmatch(r"1 suite (<1|[1-9]\d*) s", attempts[2]), r.stdout


def test_status_board_has_no_legend_when_no_cost_is_unknown(tmp_path):
    """The legend line appears only when a `?` does: no agent has run, no legend."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    r = andon(root, "status", env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert "reported no usage" not in r.stdout and "?" not in r.stdout, r.stdout


def test_show_aligns_the_diff_stat(tmp_path):
    """`andon show`'s diff stat keeps git's alignment: every file line's `|` is in the same
    column, and the summary line is indented like the file lines."""
    # two files of different name lengths, in the worktree (a write the sandbox allows);
    # the forbidden one gets the attempt rejected, so `show` prints the stat of a failure
    root = make_project(tmp_path / "repo", {"P1": mul_packet(
        "P1", max_attempts=1, forbidden_paths=["src/calc/secret.py"])})
    agent = HONEST + "; echo 'KEY = 1' > src/calc/secret.py"
    assert andon(root, "run", "--agent", "command", "--command", agent).returncode == 1
    assert json.loads(andon(root, "status", "--json").stdout)["halted_by"] == "P1"
    lines = andon(root, "show", "P1").stdout.splitlines()
    start = lines.index("  what the agent changed (plant commit → candidate):") + 1
    stat = lines[start:start + 3]
    assert [ln.index("|") for ln in stat[:2]] == [stat[0].index("|")] * 2, stat
    assert stat[0].startswith("    src/calc/ops.py ") and stat[1].startswith(
        "    src/calc/secret.py "), stat
    assert stat[2].startswith("    2 files changed"), stat


@pytest.mark.parametrize("kind", ["missing", "not executable", "folder", "not on PATH",
                                  "relative, nowhere"])
def test_an_agent_command_that_cannot_start_is_refused_before_any_packet_is_claimed(
        tmp_path, kind):
    """A command whose program cannot start would exit 126/127 in every worktree: each packet
    given to it blocked and the line halted on a typo. It is refused up front (exit 2, the
    cause named), and nothing is claimed."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    script = tmp_path / "agent.sh"
    if kind == "not executable":
        script.write_text("#!/bin/sh\ntrue\n")
    elif kind == "folder":
        script.mkdir()
    command = {"not on PATH": "agent-that-is-nowhere.sh --fast",
               "relative, nowhere": "./agent-that-is-nowhere.sh --fast"}.get(
                   kind, f"{script} --fast")
    r = andon(root, "run", "--agent", "command", "--command", command)
    assert r.returncode == 2, r.stdout + r.stderr
    said = {"missing": "does not exist", "not executable": "is not executable",
            "folder": "is a folder", "not on PATH": "no program 'agent-that-is-nowhere.sh' on PATH",
            "relative, nowhere": "./agent-that-is-nowhere.sh does not exist"}
    assert said[kind] in r.stderr, r.stderr
    [p1] = json.loads(andon(root, "status", "--json").stdout)["packets"]
    assert (p1["state"], p1["attempts"]) == ("ready", 0)


@pytest.mark.parametrize("command", ["b() { b | b & }; b; sleep 300", "(setsid sleep 1 &)",
                                     "FOO=1 nowhere-cmd", "$AGENT --fast", "if true; then :; fi",
                                     "{ true; }", "! false", "cd /tmp && true"])
def test_the_start_check_leaves_shell_syntax_to_the_shell(command):
    """Only a plain first word names a program; a function definition, a subshell, an
    assignment, a variable, a keyword or a builtin is the shell's (CI caught `b()` and
    `(setsid` refused as programs not on PATH)."""
    from andon.cli.common import check_command_starts
    check_command_starts(command, "--command")  # no SystemExit


def test_an_agent_command_of_shell_words_is_not_refused(tmp_path):
    """Builtins and shell syntax start no program of that name: `cd ... && { ...; }` runs as
    /bin/sh runs it."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    command = "cd src && FOO=1 true && { " + HONEST.replace("src/calc", "calc") + "; }"
    r = andon(root, "run", "--agent", "command", "--command", command)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_blocked_packet_whose_file_was_removed_is_shown_as_removed(tmp_path):
    """A person who deletes a blocked packet's folder has taken it off the queue: `andon run`
    no longer halts on it, and the board says its file is gone instead of showing it as the
    blocked packet that stops the line (its history stays in the store)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1),
                                            "P2": mul_packet("P2")})
    assert andon(root, "run", "--agent", "command", "--command", "true").returncode == 1
    assert json.loads(andon(root, "status", "--json").stdout)["halted_by"] == "P1"
    git(root, "rm", "-rq", "packets/P1")
    git(root, "commit", "-qm", "drop P1")
    data = json.loads(andon(root, "status", "--json").stdout)
    rows = {p["id"]: p for p in data["packets"]}
    assert rows["P1"]["state"] == "blocked" and rows["P1"]["removed"] is True
    assert rows["P2"]["removed"] is False
    assert data["halted_by"] is None
    board = andon(root, "status", env={"COLUMNS": "80"}).stdout
    [p1] = [ln for ln in board.splitlines() if "P1" in ln]
    assert "removed" in p1 and "same failure" not in p1, board
    # the state column itself says it (the result column is cut at 80 columns)
    assert p1.split("│")[2].strip() == "removed", board


def test_status_says_the_line_is_halted_and_by_which_packet(tmp_path):
    """The board says what `andon run` would stop at, and what to do: `status --json` had
    `halted_by`, the board itself nothing."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1),
                                            "P2": mul_packet("P2")})
    assert "line halted" not in andon(root, "status").stdout
    assert andon(root, "run", "--agent", "command", "--command", "true").returncode == 1
    out = andon(root, "status", env={"COLUMNS": "80"}).stdout
    assert "line halted: P1 is blocked" in out and "andon show P1" in out, out
    assert "andon unblock P1" in out, out


def test_the_board_shows_the_cause_of_a_repeated_failure_first(tmp_path):
    """A packet blocked on the same failure twice: at 80 columns the cell held only "same
    failure as attempt 1 (fingerprint …): no new evidence —" and the cause was cut off."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=3)})
    assert andon(root, "run", "--agent", "command", "--command", "true").returncode == 1
    out = andon(root, "status", env={"COLUMNS": "80"}).stdout
    cell = " ".join(ln.split("│")[-2].strip() for ln in out.splitlines() if ln.count("│") > 6)
    assert cell.startswith("same failure twice: the agent changed nothing"), out
    assert "fingerprint" not in cell, out
    # unblocked, it is ready again: its row says the reason is its last attempt's, not
    # why it waits now (newcomer pass)
    assert andon(root, "unblock", "P1").returncode == 0
    out = andon(root, "status", env={"COLUMNS": "120"}).stdout
    row = " ".join(ln.split("│")[-2].strip() for ln in out.splitlines() if ln.count("│") > 6)
    assert row.startswith("last attempt: same failure twice: the agent changed"), out


def test_the_board_cuts_a_long_name_with_an_ellipsis_and_never_folds_it(tmp_path):
    """A block reason naming a test id wider than the result column: at 80 columns the cell
    folded it into pieces ("tests.test_parenth" / "eses::test_parenth" / ...) that read as
    other names (newcomer pass). A word is now whole, or cut once with "…"."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=2)})
    wrong = "printf '\\n\\ndef mul(a, b):\\n    return a + b\\n' >> src/calc/ops.py"
    assert andon(root, "run", "--agent", "command", "--command", wrong).returncode == 1
    reason = json.loads(andon(root, "status", "--json").stdout)["packets"][0][
        "last_attempt"]["reason"]
    out = andon(root, "status", env={"COLUMNS": "80"}).stdout
    cell = [ln.split("│")[-2].strip() for ln in out.splitlines() if ln.count("│") > 6]
    words = set(reason.replace("same failure as attempt", "same failure twice:").split())
    width = max(len(ln) for ln in cell)
    assert any(len(w) > width for w in words), (reason, out)  # a name wider than the column
    for piece in " ".join(cell).split():
        assert piece in words or (piece.endswith("…") and any(
            w.startswith(piece[:-1]) for w in words)) or piece == "…", (piece, out)


def test_check_with_no_packets_says_there_are_none_yet(tmp_path):
    """It said "0 packet(s) OK: " (newcomer pass)."""
    root = make_project(tmp_path / "repo", {})
    r = andon(root, "check")
    assert r.returncode == 0, r.stderr
    assert "no packets yet" in r.stdout and "OK:" not in r.stdout, r.stdout


def test_run_with_no_packets_says_so_and_runs_no_suite(tmp_path):
    """It ran the preflight suite, and on a project whose suite collects nothing yet exited 3
    "preflight failed" (newcomer pass). Nothing to claim: exit 0, no test run."""
    root = make_project(tmp_path / "repo", {}, files={"tests/test_ops.py": "x = 1\n"})
    r = andon(root, "run", "--agent", "command", "--command", "true")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no packets in packets/: nothing to run" in r.stdout, r.stdout
    assert "preflight" not in r.stdout + r.stderr


def test_status_names_packet_files_it_cannot_read(tmp_path):
    """A packet file with a problem is not on the board; the board says so and points at
    `andon check`, instead of the packet seeming to vanish."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": mul_packet("P2")})
    md = root / "packets" / "P2" / "packet.md"
    md.write_text(md.read_text().replace('goal = "', 'goal = "unterminated', 1)
                  .replace('goal = "unterminated', 'goal = "unterminated\n', 1))
    r = andon(root, "status", env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert "1 problem" in r.stdout + r.stderr and "andon check" in r.stdout + r.stderr, r


def test_a_packet_that_does_not_parse_is_not_called_removed(tmp_path):
    """While a packet file has a problem, which packets are gone cannot be told: none is
    marked removed."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    assert andon(root, "run", "--agent", "command", "--command", "true").returncode == 1
    md = root / "packets" / "P1" / "packet.md"
    md.write_text(md.read_text().replace('id = "P1"', 'id = "P1'))
    [p1] = json.loads(andon(root, "status", "--json").stdout)["packets"]
    assert p1["removed"] is False


def test_status_json_has_state_attempts_and_gates(merged):
    """`andon status --json` parses and has each packet's state, attempts and gate results."""
    root, _ = merged
    r = andon(root, "status", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["integration_branch"] == "andon/integration"
    assert data["halted_by"] is None  # what `andon run` would stop at
    assert data["merged_ahead"]["commits"] == 1  # the merged work waiting on the branch
    [p1] = data["packets"]
    assert (p1["id"], p1["state"], p1["attempts"], p1["interrupted"]) == ("P1", "done", 1, 0)
    assert p1["last_attempt"]["gates"] == {"red": "pass", "scope": "pass", "suite": "pass",
                                           "review": "pass", "patterns": "pass",
                                           "hermetic": "pass", "static": "skipped",
                                           "flaky": "skipped", "mutation": "skipped"}
    assert p1["last_attempt"]["merge_sha"] == git(root, "rev-parse", "andon/integration").strip()


def test_show_names_the_gates_and_the_merge_commit(merged):
    """`andon show P1` names every gate with its result and the full merged sha."""
    root, _ = merged
    r = andon(root, "show", "P1")
    assert r.returncode == 0, r.stderr
    for gate in ("red", "scope", "suite", "hermetic"):
        assert re.search(rf"✓ {gate}: ", r.stdout), (gate, r.stdout)
    head = git(root, "rev-parse", "andon/integration").strip()
    assert f"merged as {head}" in r.stdout
    assert "src/calc/ops.py" in r.stdout  # the diff stat
    # the suite run's "exit 1" under a passing gate says why, and that the count moves
    text = " ".join(r.stdout.split())
    assert re.search(r"run suite: exit 1, .* \(\d canary test\(s\) fail on purpose, a "
                     r"number drawn for each run: docs/gates.md\)", text), r.stdout
    # the term on every run's line is said once, under the first
    assert text.count("(verdict channel: what andon's own plugin saw of each test") == 1, text
    # and the suite gate's "(passed in the plain profile first)" has the profiles' note
    assert "passed in the plain profile first" in text, text
    assert text.count("(the plain profile: a pytest run without") == 1, text


def test_the_profiles_note_goes_under_its_gate_not_under_a_test_id_that_says_profile(merged):
    """The note is for the suite and hermetic gates' own words: a test named
    ``test_edit_profile`` in an earlier gate's summary does not take it (it is said once,
    so it would then be missing where the words are)."""
    from rich.console import Console

    from andon.report.evidence import show_packet
    root, _ = merged
    d = json.loads(andon(root, "show", "P1", "--json").stdout)
    red = next(g for g in d["attempts"][0]["gates"] if g["gate"] == "red")
    red["summary"] = "tests/test_profile.py::test_edit_profile fails on the base"
    out = Console(record=True, width=400)
    show_packet(out, d)
    lines = out.export_text().splitlines()
    (at,) = [i for i, ln in enumerate(lines) if "(the plain profile: a pytest run" in ln]
    assert "suite: " in lines[at - 1] and "in the plain profile first" in lines[at - 1], lines


def test_show_json_has_attempts_with_gates_and_evidence(merged):
    """`andon show P1 --json` parses: the packet, its attempts with gates whose evidence
    names the suite runs and their logs on disk, and the events."""
    root, _ = merged
    r = andon(root, "show", "P1", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["packet"]["state"] == "done"
    [attempt] = data["attempts"]
    gates = {g["gate"]: g for g in attempt["gates"]}
    assert set(gates) == {"red", "scope", "patterns", "suite", "hermetic", "static", "flaky",
                          "mutation", "review"}
    runs = gates["suite"]["evidence"]["runs"]
    assert runs and all(Path(run["log_path"]).is_file() for run in runs)
    # the must-fail canary tests make pytest exit 1: recorded, never used to decide
    assert runs[0]["exit_status"] == 1 and runs[0]["counts"]["passed"] == 4
    assert runs[0]["integrity"]["channel"] == "used" and runs[0]["integrity"]["forged"] == []
    assert [e["kind"] for e in data["events"]][-1] == "merged"


def test_show_unknown_packet_exits_2_listing_known_ids(merged):
    """`andon show NOPE` exits 2 and lists the ids the store knows."""
    root, _ = merged
    r = andon(root, "show", "NOPE")
    assert r.returncode == 2
    assert "'NOPE'" in r.stderr and "known: P1" in r.stderr


# -- show on cheating attempts --------------------------------------------------------------

def test_show_names_the_tampered_planted_file(tmp_path):
    """An agent that implements mul but also guts the planted test (its line 5) is rejected;
    `andon show` names the planted file as tampered, at the first line that differs."""
    root = tmp_path / "repo"
    root.mkdir()
    # the subject is how `show` renders the scope gate's tamper finding, which needs the
    # write to land: at the default the OS refuses it (test_show_names_the_locked_...)
    make_project(root, {"P1": mul_packet("P1", max_attempts=1)},
                 config=with_sandbox(FAST, "none"))
    agent = HONEST + "; sed -i '5s/.*/    pass/' tests/test_mul_p1.py"
    run = andon(root, "run", "--agent", "command", "--command", agent)
    assert run.returncode == 1, run.stdout + run.stderr
    r = andon(root, "show", "P1")
    assert r.returncode == 0
    assert re.search(r"tamper: tests/test_mul_p1\.py:5 — planted file tests/test_mul_p1\.py "
                     r"was changed \(modified\)", r.stdout), r.stdout
    assert git(root, "for-each-ref", "refs/heads/andon/integration", "--format=%(objectname)"
               ).strip() == git(root, "rev-parse", "main").strip()


def test_show_names_the_locked_planted_file_when_the_sandbox_refused_the_cheat(tmp_path):
    """The same cheat under the default sandbox: the OS refuses the write, the planted test
    stays as planted (no tamper finding: nothing changed), `andon show` names the file as
    locked read-only in the implement stage's note, and only the real mul is merged."""
    skip_without_fs("auto")
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1)})
    agent = HONEST + "; sed -i '5s/.*/    pass/' tests/test_mul_p1.py"
    run = andon(root, "run", "--agent", "command", "--command", agent)
    show = json.loads(andon(root, "show", "P1", "--json").stdout)
    assert_tamper_outcome(root, show, "auto")
    assert show["packet"]["state"] == "done", run.stdout + run.stderr
    text = andon(root, "show", "P1").stdout
    assert "read-only (the OS refuses writes): .git, tests/test_mul_p1.py" in text, text
    assert "tamper:" not in text


def test_show_names_the_forbidden_path(tmp_path):
    """An agent that implements mul but also writes a forbidden file is rejected; `andon
    show` names that path as forbidden."""
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, {"P1": mul_packet("P1", max_attempts=1,
                                         forbidden_paths=["src/calc/secret.py"])})
    agent = HONEST + "; echo 'KEY = 1' > src/calc/secret.py"
    run = andon(root, "run", "--agent", "command", "--command", agent)
    assert run.returncode == 1, run.stdout + run.stderr
    r = andon(root, "show", "P1")
    assert r.returncode == 0
    assert re.search(r"forbidden-path: src/calc/secret\.py — .*forbidden", r.stdout), r.stdout


# -- config and repository errors ----------------------------------------------------------

def test_run_without_andon_toml_says_to_run_init(tmp_path):
    """No andon.toml: `andon run` exits 2 telling the user to run `andon init`; no store."""
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, {"P1": mul_packet("P1")})
    (root / "andon.toml").unlink()
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 2
    assert "andon.toml" in r.stderr and "andon init" in r.stderr
    assert not (root / ".andon").exists()


def test_unknown_key_in_andon_toml_is_reported_with_its_line(tmp_path):
    """A misspelt key in andon.toml: exit 2 with `andon.toml:<line>` and the key's name."""
    config = config_toml(add={"gates": "red_run = 5"})
    line = config.splitlines().index("red_run = 5") + 1
    root = tmp_path / "repo"
    root.mkdir()
    make_project(root, {"P1": mul_packet("P1")}, config=config)
    r = andon(root, "run", "--agent", "command", "--command", HONEST)
    assert r.returncode == 2
    assert f"andon.toml:{line}: gates.red_run: unknown key" in r.stderr, r.stderr
    assert not (root / ".andon").exists()


@pytest.mark.parametrize("command", [("run", "--agent", "command", "--command", "true"),
                                     ("status",), ("check",), ("init",)])
def test_not_a_git_repository_exits_2_with_a_clear_message(tmp_path, command):
    """Outside any git work tree every command exits 2 saying so, with the path as given."""
    plain = tmp_path / "plain [dir]"
    plain.mkdir()
    r = andon(plain, *command, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert r.returncode == 2
    assert f"not inside a git work tree: {plain}" in r.stderr, r.stderr
    assert list(plain.iterdir()) == []


# -- demo ----------------------------------------------------------------------------------

def test_demo_runs_every_outcome_as_expected(tmp_path):
    """`andon demo` builds its example project, runs it, and exits 0 with every outcome as
    expected (two honest merges, a tamper, a forbidden path, a halting repeated failure)."""
    r = andon(tmp_path, "demo", "--dir", str(tmp_path / "demo"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "every outcome as expected" in r.stdout
    assert "UNEXPECTED" not in r.stdout
    # what to do next is said, not left to guess (newcomer pass): the scripted agents end
    # with the demo, the halted queue goes on with the reader's own agent
    demo = tmp_path / "demo"
    assert f"-C {demo} unblock B07" in r.stdout and f"-C {demo} run --agent " in r.stdout
    text = " ".join(r.stdout.split())  # the halted packet first: unblocked as it is, it halts
    assert f"sharpen {demo}/packets/B07-parenthesised-negative/packet.md" in text, r.stdout


def test_an_uncommitted_relative_agent_script_is_refused_before_anything_runs(tmp_path):
    """`--command ./my-agent.sh` with the script untracked in the user's checkout: the command
    runs in the attempt's worktree, where the script does not exist. andon says so (with the
    absolute path to use) and exits 2 before any state changes."""
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")})
    (root / "my-agent.sh").write_text("#!/bin/sh\ntrue\n")
    r = subprocess.run([sys.executable, "-m", "andon", "run", "--agent", "command",
                        "--command", "./my-agent.sh"], cwd=root, capture_output=True,
                       text=True, timeout=120, env={**os.environ, **GIT_ENV, "COLUMNS": "200"})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "my-agent.sh is not committed" in r.stderr
    assert str(root / "my-agent.sh") in " ".join(r.stderr.split())
    assert not (root / ".andon").exists()


def test_help_example_command_is_an_absolute_path(tmp_path):
    """The help's example agent command works as written: `run` refuses an uncommitted
    relative script (it runs in the worktree), so the example uses "$PWD/my-agent.sh"."""
    r = andon(tmp_path, "--help")
    assert r.returncode == 0, r.stderr
    assert "--command \"$PWD/my-agent.sh\"" in r.stdout, r.stdout
    assert "./my-agent.sh" not in r.stdout


# -- the test helper's in-process CLI ----------------------------------------------------

@pytest.mark.parametrize("args", [("--help",), ("run", "--help"), ("check",), ("check", "--json"),
                                  ("status",), ("show", "P9")], ids=" ".join)
def test_in_process_cli_prints_what_the_real_process_prints(tmp_path, args):
    """The helper runs read-only commands through click's CliRunner: same exit status, same
    stdout and stderr, byte for byte, as `python -m andon` (here with a problem to report)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"),
                                            "P2": (packet_md("P1", "dup"), {})})
    real = andon(root, *args, real_process=True)
    fast = andon(root, *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (real.returncode, real.stdout,
                                                           real.stderr)
    assert real.stdout or real.stderr


@pytest.mark.parametrize("args", [("status",), ("doctor",), ("show", "P1")])
def test_output_to_a_closed_pipe_exits_141_not_1(merged, args):
    """`andon status | head -1` exited 1, which scripts under `set -o pipefail` read as "line
    halted". A reader that went away is 141 (128 + SIGPIPE), with no traceback. The pipe's
    read end is closed before andon starts, so its first write fails."""
    root, _ = merged
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    try:
        p = subprocess.run([sys.executable, "-m", "andon", *args], cwd=root, stdout=w_fd,
                           stderr=subprocess.PIPE, text=True, timeout=120,
                           env={**os.environ, **GIT_ENV})
    finally:
        os.close(w_fd)
    assert p.returncode == 141, p.stderr
    assert "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("case", ["broken andon.toml", "unknown packet", "no commits"])
def test_json_asked_and_an_error_still_print_one_json_document(tmp_path, case):
    """Under --json an error printed nothing on standard output (exit 2, the message on
    stderr): a script's json.load crashed. It gets {"error", "exit_status"} (newcomer pass)."""
    if case == "no commits":
        root = tmp_path / "repo"
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        args = ("status", "--json")
    else:
        root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
        if case == "broken andon.toml":
            (root / "andon.toml").write_text("[andon\n")
            args = ("status", "--json")
        else:
            args = ("validate", "P9", "--json")
    r = andon(root, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["exit_status"] == 2 and doc["error"], doc
    assert doc["error"].split(":")[0] in r.stderr, r.stderr


def test_a_test_command_naming_a_path_that_does_not_exist_says_so_at_preflight(tmp_path):
    """`[test] command` with a path that is not there: the summary said "the test command
    collects nothing"; pytest's own words (only in the log) name the path."""
    from helpers import fast, project_test_command
    config = fast([*project_test_command(), "tests_nope"])
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")}, config=config)
    r = andon(root, "run", "--agent", "command", "--command", "true")
    assert r.returncode == 3, r.stdout + r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert "pytest says: file or directory not found: tests_nope (check [test] command)" \
        in said, said


@pytest.mark.parametrize("option", ["-C", "--repo"])
def test_the_repository_named_after_the_command_is_a_usage_error_that_says_where_it_goes(
        tmp_path, option):
    """`andon status -C PATH` (the repository after the command, where git also refuses it):
    exit 2, click's own error, and where the option goes; nothing is read or written."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    r = andon(root, "status", option, str(root))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"No such option '{option}'" in r.stderr
    assert "-C/--repo goes before the command: andon -C PATH status" in r.stderr
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_no_help_shows_a_docstrings_markup():
    """`andon status --help` printed ``halted_by`` with its reST quotes (newcomer pass):
    a command's docstring is its --help, read in a terminal, not rendered."""
    import click
    from click.testing import CliRunner

    from andon.cli import main

    def commands(group: click.Group, path: list[str]):
        for name, cmd in group.commands.items():
            yield [*path, name]
            if isinstance(cmd, click.Group):
                yield from commands(cmd, [*path, name])
    seen = 0
    for path in [[], *commands(main, [])]:
        r = CliRunner().invoke(main, [*path, "--help"])
        assert r.exit_code == 0, (path, r.output)
        assert "``" not in r.output and ":func:" not in r.output, (path, r.output)
        seen += 1
    assert seen > 20  # every command and subcommand, not an empty walk
