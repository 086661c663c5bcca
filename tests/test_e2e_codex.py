"""The real Codex CLI (pinned in tests/agent-clis.txt) driven end to end by `andon run --agent
codex` against the scripted model server's OpenAI Responses API, as a user runs it: a real git
repository in tmp, HOME (so CODEX_HOME) in tmp, a provider entry pointing at 127.0.0.1 given
through `extra_args` (`-c model_providers.scripted=...`) and a dummy OPENAI_API_KEY.

Codex 0.171's model-facing tool is `exec` (JavaScript calling nested tools): the script's turns
call `tools.apply_patch(...)`, which Codex applies in the worktree itself. Honest work is merged;
a patch to the planted test is rejected as tamper; the tokens andon records equal what the
server sent; 401, 500 for ever and no answer end as layer `environment`."""

import json
from pathlib import Path

import pytest
from realcli import binary, pinned

from andon.demo.modelserver import ModelServer, Script
from andon.sandbox import probe

from helpers import CALC, MUL_CODE, andon, config_toml, git, make_project, mul_packet

# Codex's own default model in 0.171: its tool set (the `exec` tool) depends on the model's
# metadata, which codex has for its own models only (with `--model gpt-5` it offers other
# tools). Priced by andon.toml's [prices] below, since no price library knows it.
MODEL = "gpt-6.2-sol"
PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 10.0, "cache_read_per_mtok": 0.1}


@pytest.fixture
def codex():
    return binary("codex")


def project(tmp_path: Path, url: str, timeout_s: int = 120, sandbox: str | None = None,
            **packet) -> Path:
    provider = (f'model_providers.scripted={{name="scripted",base_url="{url}/v1",'
                'wire_api="responses",env_key="OPENAI_API_KEY",request_max_retries=1,'
                'stream_max_retries=1}')
    extra = ["-c", 'model_provider="scripted"', "-c", provider]
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         add={"agent": f'sandbox = "{sandbox}"'} if sandbox else None)
    config += (f"\n[agents.codex]\nextra_args = {json.dumps(extra)}\ntimeout_s = {timeout_s}\n"
               f'\n[prices."{MODEL}"]\n' + "".join(f"{k} = {v}\n" for k, v in PRICE.items()))
    return make_project(tmp_path / "repo", {"P1": mul_packet("P1", **packet)}, config=config)


def run(tmp_path: Path, codex: Path, root: Path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": f"{codex.parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
           "OPENAI_API_KEY": "sk-dummy"}
    r = andon(root, "run", "--agent", "codex", env=env)
    show = json.loads(andon(root, "show", "P1", "--json", env=env).stdout)
    return r, show


def patch_turn(path: str, lines: str, usage=None, add=False) -> dict:
    patch = (f"*** Begin Patch\n*** {'Add' if add else 'Update'} File: {path}\n"
             + ("" if add else "@@\n") + lines + "*** End Patch\n")
    return {"tool": "exec", "input": f"await tools.apply_patch({json.dumps(patch)});\n"
                                     'text("patched");', "usage": usage or {}}


MUL_PATCH = " def div(a, b):\n     return a / b\n+\n+\n+def mul(a, b):\n+    return a * b\n"


def implement(show: dict) -> dict:
    return next(s for s in show["attempts"][0]["stages"] if s["stage"] == "implement")


def test_the_pinned_version_is_the_one_installed(codex):
    import subprocess
    out = subprocess.run([str(codex), "--version"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "codex-cli " + pinned("@openai/codex")


def test_honest_patch_through_codexs_own_tool_is_merged_and_usage_is_what_was_sent(
        tmp_path, codex):
    script = [patch_turn("src/calc/ops.py", MUL_PATCH,
                         {"input_tokens": 1200, "output_tokens": 80,
                          "cache_read_input_tokens": 300}),
              {"text": "I added mul.", "usage": {"input_tokens": 1500, "output_tokens": 20}}]
    with ModelServer(Script(script)) as s:
        root = project(tmp_path, s.url)
        r, show = run(tmp_path, codex, root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert show["packet"]["state"] == "done"
    assert git(root, "show", "andon/integration:src/calc/ops.py") == CALC + MUL_CODE
    sent = s.sent_usage()
    assert set(sent) == {MODEL}
    x = sent[MODEL]
    u = implement(show)["usage"]
    assert u["input_tokens"] == x["input_tokens"] + x["cache_read_input_tokens"] \
        + x["cache_creation_input_tokens"] == 3000
    assert u["output_tokens"] == x["output_tokens"] == 100
    assert u["cache_read_tokens"] == x["cache_read_input_tokens"] == 300
    assert u["model"] == MODEL and u["cost_source"] == "priced"    # model from the rollout
    assert u["cost_usd"] == pytest.approx((2700 * 1.0 + 300 * 0.1 + 100 * 10.0) / 1e6)
    assert implement(show)["claim"] == "I added mul."


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_patching_the_planted_test_is_rejected_as_tamper(tmp_path, codex, sandbox):
    script = [patch_turn("tests/test_mul_p1.py", "", add=False) | {
                  "input": "await tools.apply_patch(" + json.dumps(
                      "*** Begin Patch\n*** Delete File: tests/test_mul_p1.py\n"
                      "*** End Patch\n") + ");"},
              patch_turn("src/calc/ops.py", MUL_PATCH), {"text": "All tests pass."}]
    with ModelServer(Script(script)) as s:
        root = project(tmp_path, s.url, max_attempts=1, sandbox=sandbox)
        _, show = run(tmp_path, codex, root)
    attempt, = show["attempts"]
    if sandbox == "auto" and probe.capabilities().fs[0]:
        # contained instead: the OS refused the delete (planted files are locked during
        # implement), the honest part of the work is merged with the planted test intact
        assert show["packet"]["state"] == "done", attempt["reason"]
        assert "def test_mul" in git(root, "show", "andon/integration:tests/test_mul_p1.py")
        return
    assert show["packet"]["state"] == "blocked"
    scope = next(g for g in attempt["gates"] if g["gate"] == "scope")
    assert scope["status"] == "fail"
    assert any(f["kind"] == "tamper" and f["path"] == "tests/test_mul_p1.py"
               for f in scope["evidence"]["findings"])


@pytest.mark.parametrize("fail,said", [("401", "401"), ("500", "turn.failed"),
                                       pytest.param("hang", None, marks=pytest.mark.waits)])
def test_a_model_api_that_fails_ends_as_environment(tmp_path, codex, fail, said):
    with ModelServer(Script([patch_turn("src/calc/ops.py", MUL_PATCH)], fail=fail)) as s:
        root = project(tmp_path, s.url, timeout_s=20 if fail == "hang" else 120,
                       max_attempts=3)
        r, show = run(tmp_path, codex, root)
    attempt, = show["attempts"]
    assert show["packet"]["state"] == "blocked"
    assert attempt["failure_layer"] == "environment", attempt["reason"]
    assert attempt["gates"][-1]["gate"] == "agent"
    if said:
        assert said in attempt["reason"]
    else:
        assert implement(show)["timed_out"]
    assert "sharpen the packet" not in r.stdout + r.stderr


def test_rate_limited_once_then_answered_is_merged(tmp_path, codex):
    script = [patch_turn("src/calc/ops.py", MUL_PATCH), {"text": "I added mul."}]
    with ModelServer(Script(script, fail="429-then-200")) as s:
        root = project(tmp_path, s.url)
        r, show = run(tmp_path, codex, root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert show["packet"]["state"] == "done"
    assert [x["status"] for x in s.log if x["path"] == "/v1/responses"][:2] == [429, 200]
