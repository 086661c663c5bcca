"""plain_file: reading what a hostile process may have put in a file's place.

Each read runs in a thread with a deadline: a read that blocks on a FIFO or reads
/dev/zero without end fails the test instead of hanging the suite. Teardown opens every
FIFO for writing, which ends a blocked open."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from andon import plain_file
from andon.plain_file import NotPlain

from helpers import unblock, within_deadline

FIFOS: list[Path] = []


@pytest.fixture(autouse=True)
def _unblock():
    yield
    unblock(FIFOS)


def read(path: Path, limit: int | None = None) -> bytes:
    return within(lambda: plain_file.read(path, limit))


def test_a_regular_file_is_read_whole(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 3_000_000)
    assert read(tmp_path / "f") == b"x" * 3_000_000
    assert plain_file.read_text(tmp_path / "f", limit=3_000_000) == "x" * 3_000_000


def test_what_is_not_a_regular_file_is_named_and_never_waited_on(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    FIFOS.append(fifo)
    secret = tmp_path / "secret"
    secret.write_text("id_rsa")
    cases = {
        fifo: "a FIFO",
        tmp_path / "zero": "a link",  # to /dev/zero: would read without end
        tmp_path / "to-secret": "a link",  # to a regular file: its bytes are not ours to show
        Path("/dev/zero"): "a character device",
        tmp_path / "folder": "a folder",
    }
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "to-secret").symlink_to(secret)
    (tmp_path / "folder").mkdir()
    for path, what in cases.items():
        with pytest.raises(NotPlain) as caught:
            read(path)
        assert caught.value.what == what and str(path) in str(caught.value), path
        assert isinstance(caught.value, OSError)
        assert plain_file.is_file(path) is False
    assert plain_file.is_file(secret)


def test_follow_reads_a_link_to_a_regular_file_and_names_a_link_to_anything_else(tmp_path):
    """For a file of the user's own (andon.toml, a packet) a link is followed, to a regular
    file only."""
    (tmp_path / "real").write_text("mine")
    (tmp_path / "to-real").symlink_to(tmp_path / "real")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    FIFOS.append(fifo)
    (tmp_path / "to-fifo").symlink_to(fifo)
    (tmp_path / "to-zero").symlink_to("/dev/zero")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert within(lambda: plain_file.read(tmp_path / "to-real", follow=True)) == b"mine"
    for name, what in (("to-fifo", "a link to a FIFO"), ("to-zero", "a link to a character device"),
                       ("loop", "a link")):
        with pytest.raises(NotPlain) as caught:
            within(lambda n=name: plain_file.read(tmp_path / n, follow=True))
        assert caught.value.what == what, name


def test_a_socket_is_named(tmp_path):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(NotPlain, match="a socket"):
            read(path)


def test_a_file_over_the_limit_is_refused_without_reading_it_all(tmp_path):
    (tmp_path / "big").write_bytes(b"y" * 101)
    with pytest.raises(NotPlain, match="larger than 100 bytes"):
        read(tmp_path / "big", limit=100)
    assert read(tmp_path / "big", limit=101) == b"y" * 101


def test_nothing_there_is_an_ordinary_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "nothing")


# -- what the agent CLIs write where andon reads it ---------------------------------------

def _stand_in(path: Path, kind: str, secret: Path) -> Path:
    """At ``path``: a FIFO, a link to /dev/zero or a link to the user's ``secret``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
        FIFOS.append(path)
    else:
        path.symlink_to("/dev/zero" if kind == "zero" else secret)
    return path


def within(fn):
    return within_deadline(fn, 10)


@pytest.mark.parametrize("kind", ["fifo", "zero", "link"])
def test_agent_files_in_the_stage_folder_are_read_only_when_regular(tmp_path, kind):
    """The stage's folder in the evidence is the agent's to write (the sandbox binds it
    writable), and so is its CLI's home: Codex's last message, Aider's chat history and
    analytics log, a command's usage file, a Gemini session recording. In the place of
    each, a stand-in is neither waited on, nor read without end, nor followed; the parse
    carries on without it."""
    from andon.agents import aider, codex, command, external, gemini
    from andon.config.model import AgentSettings

    secret = tmp_path / "users-secret.json"
    secret.write_text('{"sessionId": "0123456789", "messages": [], "note": "SECRET"}\n')
    transcript = tmp_path / "implement.transcript.log"
    transcript.write_text("")
    files = external.RunFiles(transcript, tmp_path / "implement.stderr.log",
                              tmp_path / "implement")
    _stand_in(codex.last_message_file(files), kind, secret)
    agent = codex.CodexAgent.__new__(codex.CodexAgent)  # no `codex` on PATH needed to parse
    agent.environ = {"HOME": str(tmp_path / "home")}
    parsed = within(lambda: agent.parse(None, AgentSettings(), files))  # type: ignore[arg-type]
    assert "SECRET" not in parsed.claim

    history = _stand_in(tmp_path / "implement.aider-chat.md", kind, secret)
    log = _stand_in(tmp_path / "implement.aider-analytics.jsonl", kind, secret)
    run = within(lambda: aider.parse_run(log, transcript, chat_history=history))
    assert run.usage.input_tokens is None

    usage_file = _stand_in(tmp_path / "usage.json", kind, secret)
    usage = within(lambda: command.read_usage_file(usage_file))
    what = "a FIFO" if kind == "fifo" else "a link"
    assert f"usage file {what}: not read" in usage.notes, usage.notes

    assert within(lambda: external.tail_text(usage_file)) == ""

    home = tmp_path / "home"
    _stand_in(home / ".gemini" / "tmp" / "p" / "chats" / "session-x-01234567.json", kind,
              secret)
    assert within(lambda: gemini.session_file(home, "0123456789")) is None
    codex_home = home / ".codex"
    _stand_in(codex_home / "sessions" / "2026" / "12" / "07" / "rollout-x-th1.jsonl", kind,
              secret)
    assert within(lambda: codex.rollout_file(codex_home, "th1")) is None
    assert within(lambda: codex.rollout_model(codex_home, "th1")) is None


@pytest.mark.parametrize("kind", ["fifo", "zero", "link"])
def test_mutmuts_result_files_are_read_only_when_regular(tmp_path, kind):
    """mutmut writes ``mutants/<file>`` and its ``.meta`` while the code under test runs, so
    that code can put a stand-in in their place: the mutation gate's readers neither wait,
    nor read without end, nor follow it; they find no result there."""
    from andon.gates import mutation

    secret = tmp_path / "users-secret.json"
    secret.write_text('{"exit_code_by_key": {"calc.ops.x_mul__mutmut_1": 0}}')
    (tmp_path / "src" / "calc").mkdir(parents=True)
    (tmp_path / "src" / "calc" / "ops.py").write_text("def mul(a, b):\n    return a * b\n")
    _stand_in(tmp_path / "mutants" / "src" / "calc" / "ops.py", kind, secret)
    _stand_in(tmp_path / "mutants" / "src" / "calc" / "ops.py.meta", kind, secret)

    assert within(lambda: mutation.mutant_diffs(tmp_path, "src/calc/ops.py",
                                                ["calc.ops.x_mul__mutmut_1"])) == {}
    assert within(lambda: mutation.read_results(tmp_path, {"src/calc/ops.py": ["mul"]})) == {}
