"""A TOML syntax error in any file a user writes (andon.toml, a packet's front matter, an
experiment file) names the line it is on, and the column where tomllib gives one — including
an error tomllib only finds at the end of the document, which is on the last line, not the
first."""

from __future__ import annotations

from pathlib import Path

import pytest

from andon.config import DEFAULT_TOML, load_config
from andon.errors import ConfigError
from andon.experiments.spec import load_spec
from andon.packet import check_packets

CONDITION = '[[conditions]]\nname = "A"\nagent = "command"\n'


def config_error(tmp_path: Path, text: str) -> str:
    (tmp_path / "andon.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    return str(info.value)


def packet_error(tmp_path: Path, front: str) -> str:
    pdir = tmp_path / "packets"
    pdir.mkdir()
    (pdir / "A.md").write_text('+++\nid = "A"\nslug = "a-slug"\ngoal = "make it so"\n'
                               f"{front}+++\nBody.\n")
    _, problems = check_packets(pdir, tmp_path)
    assert len(problems) == 1, problems
    return str(problems[0])


def spec_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    return str(info.value)


def test_an_unclosed_array_at_the_end_of_andon_toml_is_on_its_last_line(tmp_path):
    text = DEFAULT_TOML + "broken = [\n"
    last = len(text.splitlines())
    assert last > 10  # the default file is long: line 1 would be far from the mistake
    message = config_error(tmp_path, text)
    assert f"andon.toml:{last}: invalid TOML" in message, message
    assert "(at end of document)" not in message


def test_a_mid_file_error_in_andon_toml_names_its_line_and_column(tmp_path):
    message = config_error(tmp_path, "[andon]\nx = = 1\n")
    assert "andon.toml:2: invalid TOML: Invalid value, column 5" in message, message


def test_an_unclosed_array_at_the_end_of_a_front_matter_is_on_its_last_line(tmp_path):
    message = packet_error(tmp_path, "tags = [\n")
    assert "A.md:5: invalid TOML in front matter:" in message, message


def test_a_mid_front_matter_error_names_its_file_line_and_column(tmp_path):
    message = packet_error(tmp_path, 'tier = \ngate = "auto"\n')
    assert "A.md:5: invalid TOML in front matter: Invalid value, column 8" in message, message


def test_an_unclosed_array_at_the_end_of_an_experiment_file_is_on_its_last_line(tmp_path):
    message = spec_error(tmp_path, CONDITION + 'tags = [\n')
    assert "exp.toml:4: not valid TOML:" in message, message
    assert "(at end of document)" not in message


def test_a_mid_file_error_in_an_experiment_file_names_its_line_and_column(tmp_path):
    message = spec_error(tmp_path, CONDITION + "repeats = = 2\n")
    assert "exp.toml:4: not valid TOML: Invalid value, column 11" in message, message
