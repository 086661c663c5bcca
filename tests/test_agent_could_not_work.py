"""An agent that could not work is not the packet's fault (issue 16): a stage whose agent
changed nothing and exited non-zero (or was killed at the timeout) without producing output
fails the ``agent`` gate, layer ``environment``, with the agent's own message as the reason
and advice naming the setting — not ``no-change`` (layer ``code``), not retried into "no new
evidence". The exit status never lets anything pass."""

import dataclasses
import json
from pathlib import Path

import pytest

from andon.agents.base import AgentRun
from andon.gates.agent import could_not_work
from andon.usage import Usage

from helpers import MUL_CODE, andon, git, make_project, mul_packet

ROOT_REFUSAL = ("--dangerously-skip-permissions cannot be used with root/sudo privileges for "
                "security reasons")


def run_(tmp_path, exit_status=1, timed_out=False, claim="", output_tokens=None, stderr=""):
    t = tmp_path / "implement.transcript.log"
    t.write_text("")
    (tmp_path / "implement.stderr.log").write_text(stderr)
    return AgentRun("claude-code", exit_status, timed_out, 1.0, t, claim,
                    Usage(output_tokens=output_tokens))


@pytest.mark.parametrize("kw,setting", [
    ({"stderr": ROOT_REFUSAL + "\n"}, "permission_args"),
    ({"claim": "Invalid API key · Fix external API key"}, "API key"),
    ({"claim": "API Error: 429 rate_limit_error"}, "rate limiting"),
    ({"claim": "API Error: 500 {\"type\":\"api_error\"}", "output_tokens": 0}, "model API failed"),
    ({"exit_status": None, "timed_out": True}, "timeout_s"),
    ({"exit_status": 3, "claim": "Segmentation fault"}, "[agents.claude-code]"),
])
def test_could_not_work_names_the_layer_the_message_and_the_setting(tmp_path, kw, setting):
    r = could_not_work(run_(tmp_path, **kw), "implement", changed=False)
    assert r is not None and (r.gate, r.status, r.layer) == ("agent", "fail", "environment")
    said = kw.get("claim") or kw.get("stderr", "").strip()
    assert said in r.summary and said in r.findings[0].message
    assert setting in r.details["advice"] and "not the packet" in r.details["advice"]


@pytest.mark.parametrize("kw,changed", [
    ({}, True),                                  # it changed something: the gates judge it
    ({"exit_status": 0}, False),                 # exited 0 having done nothing: no-change
    ({"output_tokens": 250}, False),             # it worked (spent output) and failed
    ({"exit_status": 0, "timed_out": False, "claim": ROOT_REFUSAL}, False),  # words alone
])
def test_an_agent_that_worked_or_changed_something_is_judged_as_before(tmp_path, kw, changed):
    assert could_not_work(run_(tmp_path, **kw), "implement", changed) is None


def test_exit_0_with_a_provider_error_could_not_work_and_keeps_its_exit_status(tmp_path):
    run = dataclasses.replace(run_(tmp_path, exit_status=0, output_tokens=0,
                                   claim="aider exited 0 but the model API failed: "
                                         "litellm.InternalServerError: 500"),
                              agent="aider", provider_error="litellm.InternalServerError: 500")
    r = could_not_work(run, "implement", changed=False)
    assert r is not None and r.layer == "environment"
    assert "exited 0 but its model API failed" in r.summary
    assert r.details["exit_status"] == 0
    assert r.details["provider_error"] == "litellm.InternalServerError: 500"




def test_a_refused_cli_blocks_at_once_as_environment_with_advice_not_as_no_new_evidence(
        tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=3)})
    cmd = f"echo '{ROOT_REFUSAL}' >&2; exit 1"
    r = andon(root, "run", "--agent", "command", "--command", cmd)
    show = json.loads(andon(root, "show", "P1", "--json").stdout)
    attempt, = show["attempts"]                       # blocked at once: not retried
    assert show["packet"]["state"] == "blocked"
    assert attempt["failure_layer"] == "environment"
    assert ROOT_REFUSAL in attempt["reason"]
    assert "changed nothing" not in attempt["reason"] and "no new evidence" not in attempt["reason"]
    gates = [g["gate"] for g in attempt["gates"]]
    assert gates[-1] == "agent" and "scope" not in gates
    out = r.stdout + r.stderr
    assert "what to do:" in out and "permission_args" in out and "sharpen the packet" not in out


def test_an_agent_that_exits_non_zero_after_honest_work_is_still_merged(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    cmd = f"printf '{MUL_CODE}' >> src/calc/ops.py; echo 'API Error: 500' >&2; exit 1"
    r = andon(root, "run", "--agent", "command", "--command", cmd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "def mul" in git(root, "show", "andon/integration:src/calc/ops.py")


def test_a_cheat_that_exits_non_zero_to_dodge_no_change_gains_nothing(tmp_path):
    """Exiting 1 having done nothing is blocked at once (environment) — never merged, never
    an extra attempt; exiting 0 having done nothing stays `no-change` (code)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=3)})
    andon(root, "run", "--agent", "command", "--command", "echo done; exit 1")
    show = json.loads(andon(root, "show", "P1", "--json").stdout)
    assert show["packet"]["state"] == "blocked" and len(show["attempts"]) == 1
    assert not Path(root / ".git" / "refs" / "heads" / "andon" / "integration").exists() or \
        "def mul" not in git(root, "show", "andon/integration:src/calc/ops.py")
    root2 = make_project(tmp_path / "repo2", {"P1": mul_packet("P1", max_attempts=1)})
    andon(root2, "run", "--agent", "command", "--command", "echo done")
    a, = json.loads(andon(root2, "show", "P1", "--json").stdout)["attempts"]
    assert a["failure_layer"] == "code" and "changed nothing" in a["reason"]


def test_a_command_agent_that_could_not_work_is_pointed_at_its_command(tmp_path):
    """It said "`[agent] command` in andon.toml (permission_args, env_passthrough,
    extra_args) and its credentials" to a person who gave --command (newcomer pass)."""
    run = run_(tmp_path, exit_status=3, claim="Segmentation fault")
    run.agent = "command"
    r = could_not_work(run, "implement", changed=False)
    assert r is not None
    assert r.details["advice"].startswith("fix the agent's command: `--command` (or "
                                          "`[agent] command` in andon.toml)")
    assert "permission_args" not in r.details["advice"]


# A command agent's output is its own script's: a traceback's line numbers, file names and
# source lines, a timeout of its own, are no evidence that a model API was involved.
API_WORDS = ("could not be reached", "model API failed", "rate limiting", "model API is",
             "model API answering")
CRASHES = [
    ({"exit_status": 3}, "exited 3", "printed nothing"),
    ({"claim": 'Traceback (most recent call last):\n  File "/usr/lib/python3.11/subprocess.py",'
               ' line 571, in run\n    raise CalledProcessError(retcode, process.args,\n'
               "subprocess.CalledProcessError: Command 'false' returned non-zero exit status 1."
               "\n"},
     "exited 1", "subprocess.CalledProcessError: Command 'false' returned"),
    ({"exit_status": 2, "claim": 'Traceback (most recent call last):\n  File "agent.py", line 9,'
                                 ' in <module>\n    run(timeout=30, network=cfg, '
                                 'retry_on=ConnectionError)\n'
                                 "subprocess.TimeoutExpired: Command 'make' timed out after 30 "
                                 "seconds\n"},
     "exited 2", "timed out after 30 seconds"),
    ({"exit_status": 4, "claim": "loading config/network.toml\nerror 503 lines skipped\n"},
     "exited 4", "error 503 lines skipped"),
]


@pytest.mark.parametrize("kw,status,tail", CRASHES)
def test_a_command_that_crashed_on_its_own_is_not_called_a_model_api_failure(tmp_path, kw,
                                                                             status, tail):
    run = run_(tmp_path, **kw)
    run.agent = "command"
    r = could_not_work(run, "implement", changed=False)
    assert r is not None and r.layer == "environment"
    advice = r.details["advice"]
    assert not [w for w in API_WORDS if w in advice], advice
    assert advice.startswith("fix the agent's command: `--command` (or `[agent] command`")
    assert status in advice and tail in advice, advice
    assert "model API" not in r.summary and tail in r.summary, r.summary
    assert "producing output" not in r.summary, r.summary  # it did print, or said nothing


@pytest.mark.parametrize("said,setting", [
    ("urllib.error.URLError: <urlopen error [Errno 111] Connection refused>",
     "could not be reached"),
    ("httpx.ConnectError: [Errno -2] Name or service not known", "could not be reached"),
    ("curl: (6) Could not resolve host: api.example.com", "could not be reached"),
    ("urllib.error.HTTPError: HTTP Error 429: Too Many Requests", "rate limiting"),
    ("anthropic.InternalServerError: Error code: 529 - overloaded_error", "rate limiting"),
    ("API Error: 503 Service Unavailable", "model API failed"),
    ("Invalid API key", "API key"),
])
def test_a_command_whose_output_shows_a_network_or_api_failure_is_told_so(tmp_path, said,
                                                                          setting):
    run = run_(tmp_path, claim=f"Traceback (most recent call last):\n  File \"a.py\", line 1, "
                               f"in <module>\n    main()\n{said}\n")
    run.agent = "command"
    r = could_not_work(run, "implement", changed=False)
    assert r is not None and setting in r.details["advice"], r.details["advice"]


def test_a_command_killed_at_the_timeout_is_not_told_about_a_model_api(tmp_path):
    run = run_(tmp_path, exit_status=None, timed_out=True, claim="step 1 of 9\n")
    run.agent = "command"
    r = could_not_work(run, "implement", changed=False)
    assert r is not None and not [w for w in API_WORDS if w in r.details["advice"]]
    assert "timeout_s" in r.details["advice"] and "step 1 of 9" in r.details["advice"]


def test_a_crashed_command_script_is_advised_with_its_exit_status_and_output(tmp_path):
    """`andon run --command` whose script raised at line 521 (no network anywhere) was told
    "the model API failed: … retry later": the line number read as an HTTP 5xx."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=3)})
    cmd = """python3 -c 'exec("\\n" * 520 + "raise RuntimeError(\\"boom\\")")'"""
    r = andon(root, "run", "--agent", "command", "--command", cmd)
    assert r.returncode == 1, r.stdout + r.stderr
    todo = next(ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("what to do:"))
    assert not [w for w in API_WORDS if w in todo], todo
    assert "exited 1" in todo and "RuntimeError: boom" in todo, todo
    gate = json.loads(andon(root, "show", "P1", "--json").stdout)["attempts"][0]["gates"][-1]
    assert gate["gate"] == "agent" and gate["evidence"]["exit_status"] == 1
