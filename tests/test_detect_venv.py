"""`andon init` finds the project's virtualenv and the pytest plugins installed there (issue 9:
the default command used andon's interpreter, and with autoload off the project's fixtures
vanished). A real virtualenv that sees this environment's packages through a .pth file."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib

from andon.config import DEFAULT_TOML
from andon.detect import apply, detect, plugins_of


def test_init_writes_the_venv_interpreter_and_its_plugins_by_module(tmp_path):
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    found = {d.key: d for d in detect(tmp_path)}
    assert found["command"].value == [str(venv / "bin" / "python"), "-m", "pytest"]
    # what is installed here registers pytest11 entry points (xdist at least); xdist is
    # never named (it would change how the harness's runs execute)
    assert plugins_of(sys.executable) == plugins_of(venv / "bin" / "python")
    assert "xdist.plugin" not in found.get("plugins", found["command"]).value
    doc = tomllib.loads(apply(DEFAULT_TOML, list(found.values())))
    assert doc["test"]["command"][0] == str(venv / "bin" / "python")


def test_no_venv_no_guess(tmp_path):
    assert detect(tmp_path) == []
    assert plugins_of(tmp_path / "no-such-python") == []
