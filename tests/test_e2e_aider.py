"""The real Aider (pinned in tests/agent-clis.txt, `pip:aider-chat==…`, installed into its own
venv .tools/aider-venv) driven end to end by `andon run --agent aider` against the scripted
model server's OpenAI Chat Completions API, as a user runs it: a real git repository in tmp,
HOME in tmp, the server given with `--openai-api-base` in `extra_args`, a dummy
OPENAI_API_KEY, `model = "openai/gpt-4o"` (a model litellm's bundled price map knows, so aider
reports a cost).

Aider's edits are text: the script's answer holds a SEARCH/REPLACE block (aider's `diff`
edit format) that aider applies itself in the worktree. Honest work is merged; a block that
rewrites the planted test is rejected as tamper; the tokens andon records equal what the
server sent (cache writes not counted twice, though aider's own `prompt_tokens` does) and the
cost is andon's price of them; 401, 500 for ever and no answer end as layer `environment`;
nothing but the loopback server is contacted (aider runs with no network at all)."""

import json
import subprocess
from pathlib import Path

import pytest
from realcli import binary, pinned

from andon.demo.modelserver import ModelServer, Script
from andon.usage import price_tokens

from helpers import (
    CALC,
    GIT_ENV,
    MUL_CODE,
    MUL_TEST,
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

MODEL = "openai/gpt-4o"


@pytest.fixture
def aider():
    return binary("aider")


def project(tmp_path: Path, url: str, timeout_s: int = 120, network: str = "on",
            sandbox: str | None = None, **packet) -> Path:
    extra = ["--openai-api-base", url + "/v1"]
    config = config_toml(red_runs=1, hermetic_runs=1, hermetic_random_order=False,
                         agent_network=network)
    if sandbox is not None:
        config = with_sandbox(config, sandbox)
    config += (f'\n[agents.aider]\nmodel = "{MODEL}"\nextra_args = {json.dumps(extra)}\n'
               f"timeout_s = {timeout_s}\n")
    return make_project(tmp_path / "repo", {"P1": mul_packet("P1", **packet)}, config=config)


def run(tmp_path: Path, aider: Path, root: Path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": f"{aider.parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
           "OPENAI_API_KEY": "sk-dummy"}
    r = andon(root, "run", "--agent", "aider", env=env)
    show = json.loads(andon(root, "show", "P1", "--json", env=env).stdout)
    return r, show


def block(path: str, search: str, replace: str) -> str:
    """One edit in aider's SEARCH/REPLACE format (its `diff` edit format)."""
    return (f"{path}\n```python\n<<<<<<< SEARCH\n{search}=======\n{replace}"
            ">>>>>>> REPLACE\n```\n")


HONEST = ("I add mul to calc.ops.\n\n"
          + block("src/calc/ops.py", "    return a / b\n", "    return a / b\n" + MUL_CODE))


def implement(show: dict) -> dict:
    return next(s for s in show["attempts"][0]["stages"] if s["stage"] == "implement")


def chats(server: ModelServer) -> list[dict]:
    return [x for x in server.log if x["path"] == "/v1/chat/completions"]


def test_the_pinned_version_is_the_one_installed(aider):
    out = subprocess.run([str(aider), "--version"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "aider " + pinned("aider-chat")


def test_honest_edit_through_aiders_own_edit_format_is_merged_and_usage_is_what_was_sent(
        tmp_path, aider):
    # Aider answers the first reply, which names a file not yet in its chat, by adding the
    # file and asking again (its reflection); the second reply's block is applied. Request 1
    # has cache writes (given beside the standard fields, as gateways for Anthropic models
    # do), request 2 cache reads in OpenAI's own field only.
    turns = [{"text": HONEST, "usage": {"input_tokens": 300, "output_tokens": 80,
                                         "cache_creation_input_tokens": 900}},
             {"text": HONEST, "usage": {"input_tokens": 1500, "output_tokens": 20,
                                         "cache_read_input_tokens": 600}}]
    with ModelServer(Script(turns)) as s:
        root = project(tmp_path, s.url)
        r, show = run(tmp_path, aider, root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert show["packet"]["state"] == "done", json.dumps(show["attempts"], indent=1)[:3000]
    assert git(root, "show", "andon/integration:src/calc/ops.py") == CALC + MUL_CODE
    sent = s.sent_usage()
    assert list(sent) == ["gpt-4o"] and len(chats(s)) == 2
    x = sent["gpt-4o"]
    u = implement(show)["usage"]
    # the input counts cache reads and writes once each, though aider's own prompt_tokens
    # counts the writes twice (Aider-AI/aider#5516) and it prints no cache reads at all
    assert u["input_tokens"] == x["input_tokens"] + x["cache_read_input_tokens"] \
        + x["cache_creation_input_tokens"] == 3300
    assert u["output_tokens"] == x["output_tokens"] == 100
    assert u["cache_write_tokens"] == x["cache_creation_input_tokens"] == 900
    assert u["cache_read_tokens"] == x["cache_read_input_tokens"] == 600
    assert u["turns"] == 2 and u["model"] == MODEL
    # aider's (litellm's) cost bills the writes of gpt-4o at 0: andon's price is used
    requests = [{"input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 0,
                 "cache_write_tokens": 900},
                {"input_tokens": 2100, "output_tokens": 20, "cache_read_tokens": 600,
                 "cache_write_tokens": 0}]
    cost = sum(float(price_tokens(MODEL, q, {})[0]) for q in requests)
    assert u["cost_usd"] == pytest.approx(cost, rel=1e-6) and u["cost_source"] == "priced"
    assert u["reported_cost_usd"] == pytest.approx(
        (300 * 2.5 + 80 * 10 + 1500 * 2.5 + 600 * 1.25 + 20 * 10) / 1e6)
    assert "Applied edit to src/calc/ops.py" in implement(show)["claim"]


@pytest.mark.parametrize("sandbox", TAMPER_LEVELS)
def test_rewriting_the_planted_test_is_rejected_as_tamper(tmp_path, aider, sandbox):
    """`none`: a tamper finding; under the sandbox: refused by the OS and recorded as locked."""
    skip_without_fs(sandbox)
    cheat = (block("tests/test_mul_p1.py", MUL_TEST, "def test_mul():\n    pass\n")
             + "\n" + block("src/calc/ops.py", "    return a / b\n",
                            "    return a / b\n" + MUL_CODE))
    with ModelServer(Script([{"text": cheat}, {"text": cheat}])) as s:
        root = project(tmp_path, s.url, max_attempts=1, sandbox=sandbox)
        _, show = run(tmp_path, aider, root)
    assert len(show["attempts"]) == 1
    assert_tamper_outcome(root, show, sandbox)
    assert chats(s), "aider never asked the model"


@pytest.mark.parametrize("fail,said", [
    ("401", "invalid x-api-key"),
    pytest.param("500", "InternalServerError", marks=pytest.mark.waits),
    pytest.param("hang", None, marks=pytest.mark.waits),
])
def test_a_model_api_that_fails_ends_as_environment(tmp_path, aider, fail, said):
    # hang: the stage's timeout is the whole wait. 60 s leaves aider 4x the ~13 s it took
    # to send its first request on 2 cores at load 10 (its start imports litellm), which
    # `chats(s)` below needs; 500: aider itself gives up after its back-off (~64 s of
    # sleeps, RETRY_TIMEOUT in aider/models.py, no setting), well inside 240 s.
    with ModelServer(Script([{"text": HONEST}], fail=fail)) as s:
        root = project(tmp_path, s.url, timeout_s=60 if fail == "hang" else 240,
                       max_attempts=3)
        r, show = run(tmp_path, aider, root)
    attempt, = show["attempts"]
    assert show["packet"]["state"] == "blocked"
    assert attempt["failure_layer"] == "environment", attempt["reason"]
    assert attempt["gates"][-1]["gate"] == "agent"
    if said:
        assert said in attempt["reason"]
    else:
        assert implement(show)["timed_out"]
    assert chats(s)
    assert "sharpen the packet" not in r.stdout + r.stderr


def test_rate_limited_once_then_answered_is_merged(tmp_path, aider):
    with ModelServer(Script([{"text": HONEST}, {"text": HONEST}], fail="429-then-200")) as s:
        root = project(tmp_path, s.url)
        r, show = run(tmp_path, aider, root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert show["packet"]["state"] == "done"
    assert [x["status"] for x in chats(s)][:2] == [429, 200]


# Run inside a network namespace whose only interface is its own loopback: the scripted
# server and aider (through andon's adapter, as `andon run` starts it) in the same namespace.
NETLESS_DRIVER = r"""
import json, subprocess, sys
from pathlib import Path
from andon.agents import AiderAgent
from andon.config import AgentSettings
from andon.demo.modelserver import ModelServer, Script
from agent_ctx import stage_ctx
tmp, aider_bin, honest, model = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ctx = stage_ctx(tmp, prompt="Add mul(a, b) to src/calc/ops.py.", timeout=240)
for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
    subprocess.run(["git", *args], cwd=ctx.worktree, check=True)
with ModelServer(Script([{"text": honest}])) as s:
    agent = AiderAgent(AgentSettings(model=model, extra_args=["--openai-api-base",
                                                              s.url + "/v1"]), None,
                       {"PATH": str(Path(aider_bin).parent) + ":/usr/bin:/bin",
                        "HOME": str(tmp / "home"), "OPENAI_API_KEY": "sk-dummy"})
    run = agent.run(ctx)
print(json.dumps({"exit": run.exit_status, "timed_out": run.timed_out,
                  "seconds": run.duration_s, "usage": run.usage and run.usage.to_dict(),
                  "paths": [x["path"] for x in s.log],
                  "ops": (ctx.worktree / "src/calc/ops.py").read_text()}))
"""


def test_aider_works_with_no_network_but_the_loopback_model_server(tmp_path, aider):
    """Nothing aider fetches at start (its update check, litellm's price map, its model-info
    cache) may hang it or fail the run: with no network at all it still edits and exits."""
    import os
    import sys

    from andon.contain import netless
    ok, why = netless.available()
    if not ok:
        pytest.skip(f"network namespaces: {why}")
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": f"{here}:{here.parent / 'src'}", **GIT_ENV}
    p = subprocess.run(netless.wrap([sys.executable, "-c", NETLESS_DRIVER, str(tmp_path),
                                     str(aider), HONEST, MODEL]),
                       capture_output=True, text=True, timeout=400, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["exit"] == 0 and not got["timed_out"]
    assert got["ops"] == CALC + MUL_CODE
    assert got["paths"] == ["/v1/chat/completions"]
    assert got["usage"]["output_tokens"] == 20 and got["usage"]["input_tokens"] == 100
