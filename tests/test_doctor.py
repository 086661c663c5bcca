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


# -- what would stop an agent before it does anything (issue 16) ----------------------------

def _claude(bin_dir, version="2.1.332 (Claude Code)"):
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "claude").write_text(f"#!/bin/sh\necho '{version}'\n")
    (bin_dir / "claude").chmod(0o755)


def _check(tmp_path, environ, config_text=None, euid=0):
    from andon.config import load_config
    config = None
    if config_text is not None:
        root = tmp_path / "cfg"
        root.mkdir(exist_ok=True)
        (root / "andon.toml").write_text(config_text)
        config = load_config(root)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "ANTHROPIC_API_KEY": "sk-x", **environ}
    return {c.adapter: c for c in check_agents(config, env, euid=euid)}["claude-code"]


BYPASS = '[agents.claude-code]\npermission_args = ["--dangerously-skip-permissions"]\n'


def test_root_with_the_bypass_flag_is_warned_with_the_way_out(tmp_path):
    _claude(tmp_path / "bin")
    c = _check(tmp_path, {}, BYPASS, euid=0)
    w, = c.warnings
    assert "root" in w and "acceptEdits" in w and "IS_SANDBOX" in w
    assert _check(tmp_path, {}, BYPASS, euid=1000).warnings == []       # not root
    assert _check(tmp_path, {}, None, euid=0).warnings == []            # andon's default
    sandboxed = BYPASS + 'env_passthrough = ["IS_SANDBOX"]\n'
    assert _check(tmp_path, {"IS_SANDBOX": "1"}, sandboxed, euid=0).warnings == []


def test_missing_credentials_are_warned_unless_a_login_file_exists(tmp_path):
    _claude(tmp_path / "bin")
    c = _check(tmp_path, {"ANTHROPIC_API_KEY": ""})
    w, = c.warnings
    assert "no credentials" in w and "ANTHROPIC_API_KEY" in w and ".credentials.json" in w
    login = tmp_path / "home" / ".claude" / ".credentials.json"
    login.parent.mkdir(parents=True)
    login.write_text("{}")
    assert _check(tmp_path, {"ANTHROPIC_API_KEY": ""}).warnings == []


def test_a_cli_older_than_the_tested_version_is_warned(tmp_path):
    _claude(tmp_path / "bin", "2.0.37 (Claude Code)")
    w, = _check(tmp_path, {}).warnings
    assert "2.0.37 is older than 2.1.332" in w
    _claude(tmp_path / "bin", "2.1.400 (Claude Code)")
    assert _check(tmp_path, {}).warnings == []


def test_a_base_url_that_would_not_reach_the_agent_is_warned_and_shown(tmp_path):
    _claude(tmp_path / "bin")
    w, = _check(tmp_path, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}).warnings
    assert "ANTHROPIC_BASE_URL" in w and "env_passthrough" in w
    passed = '[agents.claude-code]\nenv_passthrough = ["ANTHROPIC_BASE_URL"]\n'
    assert _check(tmp_path, {"ANTHROPIC_BASE_URL": "http://x"}, passed).warnings == []
    root = make_project(tmp_path / "p", config=BYPASS)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    r = andon(root, "doctor", env=env)
    assert r.returncode == 0
    assert "warning: no credentials" in r.stdout and "warning: ANTHROPIC_BASE_URL" in r.stdout
    if os.geteuid() == 0:
        assert "Claude Code refuses as root" in r.stdout
    assert json.loads(andon(root, "doctor", "--json", env=env).stdout)["agents"][0]["warnings"]


def test_gemini_with_a_key_but_no_auth_method_chosen_is_warned(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gemini").write_text("#!/bin/sh\necho 0.61.0\n")
    (bin_dir / "gemini").chmod(0o755)
    home = tmp_path / "home"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home), "GEMINI_API_KEY": "k"}

    def gemini():
        return {c.adapter: c for c in check_agents(None, env, euid=1000)}["gemini"].warnings
    w, = gemini()
    assert "selectedType" in w and "exits 41" in w
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "gemini-api-key"}}}')
    assert gemini() == []


# -- git itself: the squash merge needs `git merge-tree --write-tree` (git 2.38) --------------

def test_the_git_on_path_is_reported_and_an_old_one_is_a_problem(tmp_path):
    root = make_project(tmp_path / "p")
    r = andon(root, "doctor", "--json")
    assert r.returncode == 0, r.stderr
    git = json.loads(r.stdout)["git"]
    assert git["version"].startswith("git version 2.") and git["problem"] is None
    out = andon(root, "doctor").stdout
    assert "git: git version 2." in out
    assert out.index("andon doctor") < out.index("git: git version")  # under its header

    # an old git first on PATH (Debian bullseye ships 2.30): doctor says what breaks and why
    old = tmp_path / "old-bin"
    old.mkdir()
    (old / "git").write_text("#!/bin/sh\necho 'git version 2.30.2'\n")
    (old / "git").chmod(0o755)
    env = {"PATH": f"{old}{os.pathsep}{os.environ['PATH']}"}
    git = json.loads(andon(root, "doctor", "--json", env=env).stdout)["git"]
    assert git["version"] == "git version 2.30.2"
    assert git["problem"] == ("git 2.30.2 is older than 2.38: andon's squash merge uses "
                              "`git merge-tree --write-tree` (git 2.38 and later); upgrade git")
    r = andon(root, "doctor", env=env)
    assert r.returncode == 0
    assert "git 2.30.2 is older than 2.38" in r.stdout
