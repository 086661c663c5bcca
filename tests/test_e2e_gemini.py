"""The real Gemini CLI (pinned in tests/agent-clis.txt) driven end to end by `andon run --agent
gemini` against the scripted model server's Gemini API, as a user runs it: a real git
repository in tmp, HOME in tmp with the user's own Gemini settings (the API-key auth method
chosen: `security.auth.selectedType`), GOOGLE_GEMINI_BASE_URL passed through, a dummy
GEMINI_API_KEY. andon trusts the worktree it made (GEMINI_CLI_TRUST_WORKSPACE=true), without
which the CLI drops `--yolo` and does nothing.

The edits are the CLI's own `read_file` and `replace` tools. Honest work is merged; a
`write_file` over the planted test is rejected as tamper; the tokens andon records equal what
the server sent, per model; 401 and no answer end as layer `environment`."""

import json
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

MODEL = "gemini-2.5-pro"


@pytest.fixture
def gemini():
    return binary("gemini")


def project(tmp_path: Path, timeout_s: int = 120, sandbox: str | None = None,
            **packet) -> Path:
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False)
    if sandbox is not None:
        config = with_sandbox(config, sandbox)
    config += (f'\n[agents.gemini]\nmodel = "{MODEL}"\ntimeout_s = {timeout_s}\n'
               'env_passthrough = ["GOOGLE_GEMINI_BASE_URL"]\n')
    return make_project(tmp_path / "repo", {"P1": mul_packet("P1", **packet)}, config=config)


def run(tmp_path: Path, gemini: Path, root: Path, server: ModelServer):
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    env = {"PATH": f"{gemini.parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
           "GOOGLE_GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": "dummy-key"}
    r = andon(root, "run", "--agent", "gemini", env=env)
    show = json.loads(andon(root, "show", "P1", "--json", env=env).stdout)
    return r, show


OPS = "src/calc/ops.py"
HONEST = [{"tool": "read_file", "input": {"file_path": OPS},
           "usage": {"input_tokens": 900, "output_tokens": 30, "cache_read_input_tokens": 100}},
          {"tool": "replace", "input": {"file_path": OPS, "old_string": "    return a / b\n",
                                        "new_string": "    return a / b\n" + MUL_CODE,
                                        "instruction": "add mul"},
           "usage": {"input_tokens": 1000, "output_tokens": 60}},
          {"text": "I added mul.", "usage": {"input_tokens": 1100, "output_tokens": 10}}]


def implement(show: dict) -> dict:
    return next(s for s in show["attempts"][0]["stages"] if s["stage"] == "implement")


def test_the_pinned_version_is_the_one_installed(gemini):
    import subprocess
    out = subprocess.run([str(gemini), "--version"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == pinned("@google/gemini-cli")


def test_honest_edit_through_the_clis_own_tools_is_merged_and_usage_is_what_was_sent(
        tmp_path, gemini):
    root = project(tmp_path)
    with ModelServer(Script(HONEST)) as s:
        r, show = run(tmp_path, gemini, root, s)
    assert r.returncode == 0, r.stdout + r.stderr
    assert show["packet"]["state"] == "done"
    assert git(root, "show", "andon/integration:src/calc/ops.py") == CALC + MUL_CODE
    u = implement(show)["usage"]
    sent = s.sent_usage()
    assert set(u["models"]) == set(sent), (u["models"], sent)
    for model, x in sent.items():
        got = u["models"][model]
        assert got["input_tokens"] == x["input_tokens"] + x["cache_read_input_tokens"], model
        assert got["output_tokens"] == x["output_tokens"], model
        assert got["cache_read_tokens"] == x["cache_read_input_tokens"], model


@pytest.mark.parametrize("sandbox", TAMPER_LEVELS)
def test_writing_over_the_planted_test_is_rejected_as_tamper(tmp_path, gemini, sandbox):
    """`none`: a tamper finding; under the sandbox: refused by the OS and recorded as locked."""
    skip_without_fs(sandbox)
    root = project(tmp_path, max_attempts=1, sandbox=sandbox)
    script = [{"tool": "write_file", "input": {"file_path": "tests/test_mul_p1.py",
                                               "content": "def test_mul():\n    pass\n"}},
              *HONEST[1:]]
    with ModelServer(Script(script)) as s:
        _, show = run(tmp_path, gemini, root, s)
    assert len(show["attempts"]) == 1
    assert_tamper_outcome(root, show, sandbox)


@pytest.mark.parametrize("fail", ["401", pytest.param("hang", marks=pytest.mark.waits)])
def test_a_model_api_that_fails_ends_as_environment(tmp_path, gemini, fail):
    root = project(tmp_path, timeout_s=20 if fail == "hang" else 120, max_attempts=3)
    with ModelServer(Script(HONEST, fail=fail)) as s:
        r, show = run(tmp_path, gemini, root, s)
    attempt, = show["attempts"]
    assert show["packet"]["state"] == "blocked"
    assert attempt["failure_layer"] == "environment", attempt["reason"]
    assert attempt["gates"][-1]["gate"] == "agent"
    assert "sharpen the packet" not in r.stdout + r.stderr
