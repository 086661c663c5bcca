"""Agent adapters: what the command adapter gives an agent, and how it ends one."""

from pathlib import Path

import pytest

from andon.agents import CommandAgent, ScriptedAgent, StageContext, make_agent
from andon.errors import ConfigError
from andon.packet import load_packets
from andon.prompt import PreviousFailure, render_prompt

from helpers import MUL_TEST, make_project, mul_packet, process_alive


@pytest.fixture
def packet(tmp_path):
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1", forbidden_paths=["setup.py"])})
    return load_packets(root / "packets", root)[0]


def ctx(tmp_path, packet, prompt="do it", timeout=30.0):
    wt = tmp_path / "wt"
    wt.mkdir(exist_ok=True)
    ev = tmp_path / "ev"
    ev.mkdir(exist_ok=True)
    pf = ev / "prompt.md"
    pf.write_text(prompt)
    return StageContext(packet, "implement", 1, wt, prompt, pf, ev, timeout)


def test_command_agent_gets_prompt_on_stdin_and_in_file_in_worktree(tmp_path, packet):
    c = ctx(tmp_path, packet, "the prompt text")
    agent = CommandAgent('cat > from_stdin.txt; cp "$ANDON_PROMPT_FILE" from_file.txt; '
                         'echo "$ANDON_PACKET_ID $ANDON_STAGE $ANDON_ATTEMPT"; '
                         'echo "All 99 tests pass!"')
    run = agent.run(c)
    assert (c.worktree / "from_stdin.txt").read_text() == "the prompt text"
    assert (c.worktree / "from_file.txt").read_text() == "the prompt text"
    assert run.exit_status == 0 and not run.timed_out
    transcript = run.transcript_path.read_text()
    assert "P1 implement 1" in transcript
    assert "All 99 tests pass!" in run.claim  # recorded, never used


def test_command_agent_timeout_kills_the_whole_process_group(tmp_path, packet):
    c = ctx(tmp_path, packet, timeout=5.0)  # time for the child to write its pid, under load
    pidfile = tmp_path / "child.pid"
    agent = CommandAgent(f"sh -c 'echo $$ > {pidfile}; exec sleep 300' & wait")
    run = agent.run(c)
    assert run.timed_out and run.exit_status is None
    assert not process_alive(int(pidfile.read_text()))


def test_command_agent_background_children_do_not_outlive_it(tmp_path, packet):
    """An agent that exits but leaves a writer behind: the harness kills the group."""
    c = ctx(tmp_path, packet)
    pidfile = tmp_path / "bg.pid"
    run = CommandAgent(f"(echo $$ > /dev/null; sh -c 'echo $$ > {pidfile}; exec sleep 300') "
                       "> /dev/null 2>&1 &\n"
                       f"while [ ! -s {pidfile} ]; do :; done; exit 3").run(c)
    assert run.exit_status == 3
    assert not process_alive(int(pidfile.read_text()))


def test_non_utf8_output_is_kept(tmp_path, packet):
    run = CommandAgent(r"printf 'caf\351\n'").run(ctx(tmp_path, packet))
    assert run.transcript_path.read_bytes() == b"caf\xe9\n"
    assert "caf" in run.claim


def test_scripted_agent_crash_is_recorded_not_raised(tmp_path, packet):
    def boom(c):
        raise RuntimeError("agent fell over")
    run = ScriptedAgent(boom).run(ctx(tmp_path, packet))
    assert run.exit_status == 1 and "agent fell over" in run.claim


def test_make_agent_names_the_known_adapters():
    with pytest.raises(ValueError, match=r"did you mean 'claude-code'.*known agents: command, "
                                         "scripted:module:function"):
        make_agent("claude-kode")
    with pytest.raises(ValueError, match="needs a command"):
        make_agent("command")
    with pytest.raises(ValueError, match="cannot load scripted agent"):
        make_agent("scripted:no_such_module:f")
    assert isinstance(make_agent("command", "true"), CommandAgent)


def test_prompt_carries_packet_and_previous_failure(packet):
    text = render_prompt(packet, 2, "packets", PreviousFailure(
        1, "suite", "code", "tests.test_mul_p1::test_mul failed", "assert 7 == 12"))
    assert "calc.ops.mul multiplies." in text
    assert "`src/calc/**`" in text and "`setup.py`" in text
    assert "tests/test_mul_p1.py" in text
    assert "Attempt 1 was rejected by the `suite` gate (code)" in text
    assert "assert 7 == 12" in text
    first = render_prompt(packet, 1, "packets")
    assert "previous attempt" not in first.lower()


def test_prompt_template_override_and_its_errors(tmp_path, packet):
    t = tmp_path / "t.md.j2"
    t.write_text("Only: {{ packet.goal }} / {{ planted | join(',') }}")
    assert render_prompt(packet, 1, "packets", template_path=t) == \
        "Only: calc.ops.mul multiplies. / tests/test_mul_p1.py"
    t.write_text("line one\n{% if %}")
    with pytest.raises(ConfigError, match=r"t.md.j2:2: invalid prompt template"):
        render_prompt(packet, 1, "packets", template_path=t)
    with pytest.raises(ConfigError, match="cannot read prompt template"):
        render_prompt(packet, 1, "packets", template_path=tmp_path / "missing.j2")


def test_a_template_cannot_reach_python(tmp_path, packet):
    """A prompt template is a file in the checkout an agent could rewrite: the usual escape
    from Jinja2 to ``os`` is refused as a template error and runs nothing."""
    marker = tmp_path / "ran"
    t = tmp_path / "t.md.j2"
    t.write_text(f"{{{{ cycler.__init__.__globals__.os.system('touch {marker}') }}}}")
    with pytest.raises(ConfigError, match="invalid prompt template"):
        render_prompt(packet, 1, "packets", template_path=t)
    assert not marker.exists()


def test_mul_test_fixture_is_what_the_packet_plants(packet):
    assert Path(packet.plant_files["tests/test_mul_p1.py"]).read_text() == MUL_TEST


def test_command_agent_gets_a_clean_environment(tmp_path, packet, monkeypatch):
    """The command agent sees the allowlist (PATH, HOME, …) and the names passed through,
    never the rest of the runner's environment (a secret it was not given stays away)."""
    monkeypatch.setenv("ANDON_TEST_SECRET", "s3cret")
    monkeypatch.setenv("ANDON_TEST_GIVEN", "ok")
    c = ctx(tmp_path, packet)
    CommandAgent('echo "secret=${ANDON_TEST_SECRET:-unset} given=${ANDON_TEST_GIVEN:-unset} '
                 'path=${PATH:+set}"', env_passthrough=["ANDON_TEST_GIVEN"]).run(c)
    out = (c.evidence_dir / "implement.transcript.log").read_text()
    assert "secret=unset given=ok path=set" in out


def test_a_prompt_shows_bytes_that_are_not_utf8_as_escapes():
    """A diff of a PNG or a latin-1 file reaches the prompt as str with surrogate escapes
    (git output, decoded with surrogateescape): written to the UTF-8 prompt file it crashed
    the attempt. Each such byte reads ``\\xNN``; valid text, emoji included, is unchanged."""
    from andon.prompt import visible
    raw = b"+\x89PNG\r\n+caf\xe9 \xe2\x9c\x93 \xf0\x9f\x90\x8d\n"
    shown = visible(raw.decode("utf-8", "surrogateescape"))
    assert shown == "+\\x89PNG\r\n+caf\\xe9 \u2713 \U0001f40d\n"
    shown.encode("utf-8")  # what the prompt file needs
    assert visible("\ud800 lone") == "\\ud800 lone"  # a surrogate standing for no byte
    assert visible("plain text\n") == "plain text\n"
