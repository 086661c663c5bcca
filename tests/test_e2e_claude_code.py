"""The real Claude Code (pinned in tests/agent-clis.txt) driven end to end by `andon run
--agent claude-code` against the scripted model server (andon.demo.modelserver), as a user
runs it: a real git repository in tmp, HOME in tmp, ANTHROPIC_BASE_URL and a dummy key, and
andon's default permission args — which as root (as here) must work without any setting.

The script's tool calls run inside the CLI: the file edits are Claude Code's own Read, Edit
and Write tools. Each test names the behaviour: honest work merged; an edit of the planted
test rejected as tamper; the tokens andon records equal what the server sent, per model, and
the cost the CLI's result event reported; 401, 500 for ever and no answer end as layer
`environment` (the agent could not work) with the CLI's message; 429 then 200 is merged."""

import json
import os
from pathlib import Path

import pytest
from realcli import binary, pinned

from andon.demo.modelserver import ModelServer, Script

from helpers import (
    CALC,
    MUL_CODE,
    TAMPER_LEVELS,
    andon,
    assert_tamper_outcome,
    config_toml,
    git,
    make_project,
    mul_packet,
    skip_without_fs,
    with_sandbox,
)

PASSTHROUGH = ["ANTHROPIC_BASE_URL", "CLAUDE_CODE_MAX_RETRIES",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]


@pytest.fixture
def claude():
    return binary("claude")


def project(tmp_path: Path, timeout_s: int = 120, settings: str = "",
            sandbox: str | None = None, **packet) -> tuple[Path, Path]:
    wt = tmp_path / "wt"
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         worktree_root=wt)
    if sandbox is not None:
        config = with_sandbox(config, sandbox)
    config += ("\n[agents.claude-code]\n"
               f"env_passthrough = {json.dumps(PASSTHROUGH)}\ntimeout_s = {timeout_s}\n"
               + settings)
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", **packet)}, config=config)
    return root, wt / "P1-1"


def run(tmp_path: Path, claude: Path, root: Path, server: ModelServer,
        key: str = "sk-ant-dummy"):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": f"{claude.parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
           "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": key,
           "CLAUDE_CODE_MAX_RETRIES": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1"}
    r = andon(root, "run", "--agent", "claude-code", env=env)
    show = json.loads(andon(root, "show", "P1", "--json", env=env).stdout)
    return r, show


def honest(wt: Path, usage1=None, usage3=None) -> list[dict]:
    ops = str(wt / "src/calc/ops.py")
    return [{"tool": "Read", "input": {"file_path": ops}, "usage": usage1 or {}},
            {"tool": "Edit", "input": {"file_path": ops, "old_string": "    return a / b\n",
                                       "new_string": "    return a / b\n" + MUL_CODE}},
            {"text": "I added mul to src/calc/ops.py.", "usage": usage3 or {}}]


def implement(show: dict, n: int = 0) -> dict:
    return next(s for s in show["attempts"][n]["stages"] if s["stage"] == "implement")


def test_the_pinned_version_is_the_one_installed(claude):
    import subprocess
    out = subprocess.run([str(claude), "--version"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.startswith(pinned("@anthropic-ai/claude-code") + " ")


def test_honest_edit_through_claudes_own_tools_is_merged_as_root_by_default(tmp_path, claude):
    root, wt = project(tmp_path)
    with ModelServer(Script(honest(wt))) as s:
        r, show = run(tmp_path, claude, root, s)
    assert r.returncode == 0, r.stdout + r.stderr
    assert show["packet"]["state"] == "done"
    assert git(root, "show", "andon/integration:src/calc/ops.py") == CALC + MUL_CODE
    loop = [x for x in s.log if x["path"] == "/v1/messages" and x["body"].get("tools")]
    assert len(loop) == 3                    # Read, Edit, the final text: the script's turns
    # the Read result went back to the model: the tool really ran in the worktree
    assert "def div(a, b)" in json.dumps(loop[1]["body"]["messages"])
    assert implement(show)["exit_status"] == 0


@pytest.mark.parametrize("sandbox", TAMPER_LEVELS)
def test_editing_the_planted_test_is_rejected_as_tamper(tmp_path, claude, sandbox):
    """At `none` the edit lands and is a tamper finding; under the sandbox the OS refuses
    it and the record says the file was locked (helpers.assert_tamper_outcome)."""
    skip_without_fs(sandbox)
    root, wt = project(tmp_path, max_attempts=1, sandbox=sandbox)
    planted = str(wt / "tests/test_mul_p1.py")
    script = [{"tool": "Write", "input": {"file_path": planted,
                                          "content": "def test_mul():\n    pass\n"}},
              {"tool": "Write", "input": {"file_path": str(wt / "src/calc/ops.py"),
                                          "content": CALC + MUL_CODE}},
              {"text": "All tests pass."}]
    with ModelServer(Script(script)) as s:
        _, show = run(tmp_path, claude, root, s)
    assert len(show["attempts"]) == 1
    assert_tamper_outcome(root, show, sandbox)
    if sandbox == "none":
        scope = next(g for g in show["attempts"][0]["gates"] if g["gate"] == "scope")
        assert scope["failure_layer"] == "permission"
        assert "andon/integration" not in git(root, "branch", "--list", "andon/integration") \
            or "def mul" not in git(root, "show", "andon/integration:src/calc/ops.py")


def test_tokens_and_cost_equal_what_the_server_sent_and_the_cli_reported(tmp_path, claude):
    root, wt = project(tmp_path)
    script = honest(wt, {"input_tokens": 1234, "output_tokens": 56,
                         "cache_read_input_tokens": 700, "cache_creation_input_tokens": 89},
                    {"input_tokens": 2000, "output_tokens": 300})
    # a second model: a subagent on haiku (Claude Code keys modelUsage by the model it asked
    # for), whose one request takes the script's second turn
    script = [{"tool": "Agent", "input": {"description": "Look at ops", "prompt": "Read ops",
                                          "subagent_type": "general-purpose",
                                          "model": "haiku", "run_in_background": False}},
              {"text": "ops has add and div.", "usage": {"input_tokens": 77,
                                                          "output_tokens": 9}}, *script]
    with ModelServer(Script(script)) as s:
        r, show = run(tmp_path, claude, root, s)
    assert r.returncode == 0, r.stdout + r.stderr
    stage = implement(show)
    u = stage["usage"]
    sent = s.sent_usage()
    assert set(u["models"]) == set(sent) and len(sent) == 2, sent
    for model, x in sent.items():
        got = u["models"][model]
        assert got["output_tokens"] == x["output_tokens"], model
        assert got["cache_read_tokens"] == x["cache_read_input_tokens"], model
        assert got["cache_write_tokens"] == x["cache_creation_input_tokens"], model
        assert got["input_tokens"] == (x["input_tokens"] + x["cache_read_input_tokens"]
                                       + x["cache_creation_input_tokens"]), model
    result = [json.loads(line) for line in Path(stage["transcript_path"]).read_text()
              .splitlines() if line.startswith("{")][-1]
    assert result["type"] == "result"
    assert u["cost_source"] == "reported" and u["cost_usd"] == result["total_cost_usd"] > 0
    for model, m in result["modelUsage"].items():
        assert u["models"][model]["cost_usd"] == m["costUSD"]


@pytest.mark.parametrize("fail,said", [
    ("401", "api key"),
    ("500", "500"),
    pytest.param("hang", None, marks=pytest.mark.waits),
])
def test_a_model_api_that_fails_ends_as_environment_not_as_the_packets_fault(
        tmp_path, claude, fail, said):
    root, wt = project(tmp_path, timeout_s=20 if fail == "hang" else 120, max_attempts=3)
    with ModelServer(Script(honest(wt), fail=fail)) as s:
        r, show = run(tmp_path, claude, root, s)
    attempt, = show["attempts"]                   # blocked at once, not retried
    assert show["packet"]["state"] == "blocked"
    assert attempt["failure_layer"] == "environment", attempt["reason"]
    assert attempt["gates"][-1]["gate"] == "agent"
    assert "no new evidence" not in attempt["reason"]
    if said:
        assert said in attempt["reason"].lower()
    else:
        assert implement(show)["timed_out"]
    assert "what to do:" in r.stdout + r.stderr
    assert "sharpen the packet" not in r.stdout + r.stderr
    assert any(x["status"] == ("hang" if fail == "hang" else int(fail)) for x in s.log)


def test_rate_limited_once_then_answered_is_merged(tmp_path, claude):
    root, wt = project(tmp_path)
    with ModelServer(Script(honest(wt), fail="429-then-200")) as s:
        r, show = run(tmp_path, claude, root, s)
    assert r.returncode == 0, r.stdout + r.stderr
    assert show["packet"]["state"] == "done"
    assert [x["status"] for x in s.log if x["path"] == "/v1/messages"][:2] == [429, 200]


@pytest.mark.skipif(os.geteuid() != 0, reason="Claude Code refuses its bypass flag only as root")
def test_the_bypass_flag_refused_as_root_is_environment_with_the_setting_to_fix(tmp_path, claude):
    """Issue 16's first run: `--dangerously-skip-permissions` as root, one line on stderr, exit
    1. Not "the agent changed nothing", not retried into "no new evidence"."""
    # sandbox none: the refusal needs the CLI to run as root; the sandbox maps the agent to
    # an unprivileged uid, where the flag is accepted (the next test)
    root, wt = project(tmp_path, max_attempts=3,
                       settings='permission_args = ["--dangerously-skip-permissions"]\n',
                       sandbox="none")
    with ModelServer(Script(honest(wt))) as s:
        r, show = run(tmp_path, claude, root, s)
    attempt, = show["attempts"]
    assert show["packet"]["state"] == "blocked"
    assert attempt["failure_layer"] == "environment"
    assert "cannot be used with root/sudo privileges" in attempt["reason"]
    assert implement(show)["exit_status"] == 1
    out = r.stdout + r.stderr
    assert "permission_args" in out and "IS_SANDBOX" in out and "sharpen" not in out
    assert not [x for x in s.log if x["path"] == "/v1/messages"]   # it asked nothing


@pytest.mark.skipif(os.geteuid() != 0, reason="the root refusal is what the sandbox avoids")
def test_the_bypass_flag_as_root_works_under_the_default_sandbox(tmp_path, claude):
    """Under the default sandbox the CLI runs as an unprivileged uid, so the flag that root
    may not use is accepted and the honest work is merged."""
    root, wt = project(tmp_path, max_attempts=3,
                       settings='permission_args = ["--dangerously-skip-permissions"]\n')
    with ModelServer(Script(honest(wt))) as s:
        r, show = run(tmp_path, claude, root, s)
    assert show["packet"]["state"] == "done", r.stdout[-2000:] + r.stderr[-2000:]


def test_no_credentials_is_environment_with_the_credentials_advice(tmp_path, claude):
    root, wt = project(tmp_path, max_attempts=3)
    with ModelServer(Script(honest(wt))) as s:
        r, show = run(tmp_path, claude, root, s, key="")
    attempt, = show["attempts"]
    assert show["packet"]["state"] == "blocked"
    assert attempt["failure_layer"] == "environment", attempt["reason"]
    assert "credentials" in r.stdout + r.stderr
