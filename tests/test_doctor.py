"""`andon doctor`: installed agents, versions, credentials present — never their values."""

import json
import os

from andon.doctor import check_agents

import fakes
from helpers import andon, make_project


def test_no_agent_installed_is_clear_and_exits_0(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {"PATH": f"{empty}:/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-ant-do-not-print"}
    r = andon(tmp_path, "doctor", env=env)
    assert r.returncode == 0, r.stderr
    for exe in ("claude", "codex", "aider", "gemini"):
        assert f"not installed (no `{exe}` on PATH)" in r.stdout
    assert "None of the agent CLIs is installed" in r.stdout
    assert "ANTHROPIC_API_KEY set" in r.stdout and "OPENAI_API_KEY not set" in r.stdout
    assert "sk-ant-do-not-print" not in r.stdout + r.stderr
    assert "price library: genai-prices" in r.stdout


def test_installed_agents_show_their_version_and_json(tmp_path):
    bin_dir = tmp_path / "bin"
    for name in ("claude", "codex", "aider", "gemini"):
        fakes.install(bin_dir, name)
    root = make_project(tmp_path / "p", config='[agents.codex]\nenv_passthrough = ["MY_PROXY"]\n')
    env = {"PATH": fakes.path_with(bin_dir), "MY_PROXY": "http://proxy"}
    r = andon(root, "doctor", "--json", env=env)
    assert r.returncode == 0, r.stderr
    got = {a["adapter"]: a for a in json.loads(r.stdout)["agents"]}
    assert got["claude-code"]["version"] == "2.0.37 (Claude Code)"
    assert got["codex"]["version"] == "codex-cli 0.46.0"
    assert got["aider"]["version"] == "aider 0.86.1"
    assert got["gemini"]["version"] == "0.9.0"
    assert got["codex"]["passthrough"] == {"MY_PROXY": True}
    assert "http://proxy" not in r.stdout
    r = andon(root, "doctor", env=env)
    assert "codex-cli 0.46.0" in r.stdout and "env_passthrough: MY_PROXY set" in r.stdout
    assert "None of the agent CLIs" not in r.stdout


def test_a_version_that_hangs_or_fails_is_reported(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexec sleep 300\n")
    (bin_dir / "codex").write_text("#!/bin/sh\necho 'bad flag' >&2; exit 3\n")
    for p in bin_dir.iterdir():
        p.chmod(0o755)
    checks = {c.adapter: c for c in check_agents(
        None, {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"}, timeout_s=5)}
    assert checks["claude-code"].problem == "`--version` did not answer within 5 s"
    assert checks["codex"].problem == "`--version` exited 3: bad flag"
    assert checks["aider"].path is None
