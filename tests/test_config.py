"""andon.toml: defaults, and errors that name file and line."""

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


def test_toml_syntax_error_names_line(tmp_path):
    (tmp_path / "andon.toml").write_text("[andon]\nx = = 1\n")
    with pytest.raises(ConfigError, match=r"andon.toml:2: invalid TOML"):
        load_config(tmp_path)
