"""andon.toml: defaults, and errors that name file and line."""

import re
import sys

import pytest

from andon.config import DEFAULT_TOML, load_config
from andon.errors import ConfigError


def test_default_file_is_valid_and_python_means_this_interpreter(tmp_path):
    (tmp_path / "andon.toml").write_text(DEFAULT_TOML)
    c = load_config(tmp_path)
    assert c.andon.integration_branch == "andon/integration"
    assert c.test_argv()[0] == sys.executable
    assert c.gates.red_runs == 3


def test_the_default_file_names_the_agent_sandbox_and_its_commented_lines_load(tmp_path):
    """A newcomer whose agent's tools vanished in the sandbox (the default since issue 11)
    found no word of it in the andon.toml `andon init` wrote: the file names the setting, its
    page and `sandbox_paths`, and each of those commented lines, uncommented, loads."""
    lines = [ln for ln in DEFAULT_TOML.splitlines() if ln.startswith("# sandbox")]
    assert [ln.split()[1] for ln in lines] == ["sandbox", "sandbox_paths"], lines
    assert "docs/sandbox.md" in DEFAULT_TOML
    text = DEFAULT_TOML
    for ln in lines:
        text = text.replace(ln, ln[2:])
    (tmp_path / "andon.toml").write_text(text)
    c = load_config(tmp_path)
    assert c.agent.sandbox == "auto" and c.agent.sandbox_paths


def test_empty_file_gives_defaults(tmp_path):
    (tmp_path / "andon.toml").write_text("")
    assert load_config(tmp_path).test.pythonpath == ["src"]


def test_missing_file_says_run_init(tmp_path):
    with pytest.raises(ConfigError, match="andon init"):
        load_config(tmp_path)


def test_unknown_key_names_line(tmp_path):
    (tmp_path / "andon.toml").write_text("[gates]\nred_runs = 3\nhermetik_runs = 2\n")
    with pytest.raises(ConfigError, match=r"andon.toml:3: gates.hermetik_runs: unknown key"):
        load_config(tmp_path)


def test_wrong_value_names_line(tmp_path):
    (tmp_path / "andon.toml").write_text("[test]\ntimeout_s = -1\n")
    with pytest.raises(ConfigError, match=r"andon.toml:2: test.timeout_s"):
        load_config(tmp_path)


@pytest.mark.parametrize("section,line,key", [
    ("test", 'timeout_s = "900"', "test.timeout_s"),
    ("gates", 'red_runs = "3"', "gates.red_runs"),
    ("gates", "hermetic_runs = 2.0", "gates.hermetic_runs"),
    ("andon", 'keep_worktrees = "yes"', "andon.keep_worktrees"),
    ("andon", "keep_worktrees = 1", "andon.keep_worktrees"),
])
def test_a_value_of_the_wrong_type_is_an_error_not_converted(tmp_path, section, line, key):
    """As in packet.md (`max_attempts = "3"` is an error): a string, a float or an integer
    where another type belongs is named with its line, never quietly converted ("yes" read as
    true, 2.0 as 2)."""
    (tmp_path / "andon.toml").write_text(f"[{section}]\n{line}\n")
    with pytest.raises(ConfigError, match=rf"andon.toml:2: {re.escape(key)}"):
        load_config(tmp_path)


def test_an_integer_where_a_number_of_seconds_belongs_is_fine(tmp_path):
    (tmp_path / "andon.toml").write_text("[test]\ntimeout_s = 900\n")
    assert load_config(tmp_path).test.timeout_s == 900


def test_toml_syntax_error_names_line(tmp_path):
    (tmp_path / "andon.toml").write_text("[andon]\nx = = 1\n")
    with pytest.raises(ConfigError, match=r"andon.toml:2: invalid TOML"):
        load_config(tmp_path)


def config_errors(tmp_path, text: str) -> list[str]:
    """Every line of the ConfigError that ``text`` as andon.toml raises, without the path."""
    (tmp_path / "andon.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    prefix = str(tmp_path / "andon.toml")
    lines = str(info.value).splitlines()
    assert all(line.startswith(prefix + ":") for line in lines), lines
    return [line.removeprefix(prefix) for line in lines]


def test_unknown_table_suggests_the_closest(tmp_path):
    assert config_errors(tmp_path, "[andon]\n\n[gate]\nred_runs = 2\n") == [
        ":3: [gate]: unknown table; did you mean [gates]?"]


def test_unknown_key_suggests_the_closest(tmp_path):
    assert config_errors(tmp_path, "[gates]\nred_run = 3\n") == [
        ":2: gates.red_run: unknown key; did you mean 'red_runs'?"]
    assert config_errors(tmp_path, "[agent]\ndefault = 'command'\ntimout_s = 60\n") == [
        ":3: agent.timout_s: unknown key; did you mean 'timeout_s'?"]


def test_unknown_key_without_a_close_one_lists_the_known_keys(tmp_path):
    [error] = config_errors(tmp_path, "[gates]\ncolour = 3\n")
    assert error.startswith(":2: gates.colour: unknown key; known keys of [gates]: red_runs, "
                            "hermetic_runs, hermetic_random_order, patterns,"), error


def test_unknown_top_level_name_lists_the_tables(tmp_path):
    [error] = config_errors(tmp_path, "colour = 3\n")
    assert error.startswith(":1: colour: unknown key; known tables: agents, prices,"), error


def test_unknown_key_in_a_nested_and_a_named_table(tmp_path):
    text = "[budgets.atempt]\nmax_cost_usd = 1\n[agents.codex]\nmodle = 'o3'\n"
    assert config_errors(tmp_path, text) == [
        ":1: [budgets.atempt]: unknown table; did you mean [budgets.attempt]?",
        ":4: agents.codex.modle: unknown key; did you mean 'model'?",
    ]


def test_unknown_stage_names_suggest_the_stage(tmp_path):
    text = ('[stages]\ndefault = ["review", "implment"]\n'
            '[stages.tiers]\ncritical = ["atd"]\n'
            '[agents.codex.stages.reviw]\nmodel = "o3"\n')
    assert config_errors(tmp_path, text) == [
        ":2: stages.default entry 2: unknown value 'implment'; did you mean 'implement'?",
        ":4: stages.tiers.critical entry 1: unknown value 'atd'; did you mean 'atdd'?",
        ":5: [agents.codex.stages.reviw]: unknown stage; did you mean 'review'?",
    ]


def test_unknown_value_without_a_close_one_lists_the_values(tmp_path):
    text = '[gates.patterns]\nseverities = {broad-except = "loud"}\n'
    assert config_errors(tmp_path, text) == [(
        ":2: gates.patterns.severities.broad-except: unknown value 'loud'; "
        "expected one of: 'block', 'warn', 'off'")]


def test_errors_come_in_file_order_and_wrong_values_say_what_was_given(tmp_path):
    text = "[test]\ntimeout_s = -1\n[gates]\nred_runs = 0\n[andon]\nkeep_worktrees = 'maybe'\n"
    errors = config_errors(tmp_path, text)
    assert [e.split(":")[1] for e in errors] == ["2", "4", "6"], errors
    assert errors[0] == ":2: test.timeout_s: Input should be greater than 0, got -1"


def test_a_suite_run_budget_the_gate_settings_cannot_meet_is_refused_at_load(tmp_path):
    """[gates] max_suite_runs_per_attempt below suite 1 + hermetic_runs + the random-order
    run: refused naming the line, what an attempt needs and what to change; a budget the
    settings meet loads."""
    [error] = config_errors(tmp_path, "[gates]\nhermetic_runs = 3\n"
                                      "max_suite_runs_per_attempt = 4\n")
    assert error.startswith(":3: gates.max_suite_runs_per_attempt: "), error
    assert "full suite 5 times (suite 1 + hermetic_runs 3 + the random-order run 1)" in error
    assert "more than 4" in error and "got 4" in error
    (tmp_path / "andon.toml").write_text("[gates]\nhermetic_runs = 2\n"
                                         "hermetic_random_order = false\n"
                                         "max_suite_runs_per_attempt = 3\n")
    c = load_config(tmp_path)
    assert c.gates.suite_runs_per_attempt() == 3 == c.gates.max_suite_runs_per_attempt


def test_test_jobs_must_be_positive(tmp_path):
    assert config_errors(tmp_path, "[test]\njobs = 0\n") == [
        ":2: test.jobs: Input should be greater than or equal to 1, got 0"]
    (tmp_path / "andon.toml").write_text("[test]\njobs = 3\n")
    assert load_config(tmp_path).test.jobs == 3


@pytest.mark.parametrize("table", [
    '[[gates.patterns.rules]]\nid = "x"\nregex = "a(b"\n',
    '[[context.rules]]\npattern = "a(b"\ncomponent = "doc"\n',
])
def test_a_regex_that_does_not_compile_is_named(tmp_path, table):
    (tmp_path / "andon.toml").write_text(table)
    with pytest.raises(ConfigError, match="not a valid regex"):
        load_config(tmp_path)


def test_a_command_written_as_one_string_gets_the_list_to_write(tmp_path):
    """Before: pydantic's "Input should be a valid list, got 'python -m pytest'" (a
    newcomer pass); now the line, what was expected and the array to write instead."""
    (tmp_path / "andon.toml").write_text('[test]\ncommand = "python -m pytest -x"\n')
    with pytest.raises(ConfigError) as got:
        load_config(tmp_path)
    assert str(got.value).endswith(
        'andon.toml:2: test.command: expected a list (a TOML array), got the string '
        "'python -m pytest -x'; write it as command = [\"python\", \"-m\", \"pytest\", \"-x\"]")
