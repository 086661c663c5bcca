"""The agent seam says what it needs (issue 15): the base class names every attribute the
runner sets or reads, its abstract methods are abstract, adapters are found through a lazy
name → ``module:Class`` table, and a stage run's usage is the typed ``Usage``."""

import json
import subprocess
import sys

import pytest

from andon import agents
from andon.agents import Agent, AgentRun, CommandAgent, ScriptedAgent, make_agent
from andon.agents.external import ExternalAgent, Parsed
from andon.errors import InvalidValue, UsageError
from andon.usage import Usage

from agent_ctx import stage_ctx

ADAPTER_MODULES = ("command", "scripted", "external", "claude_code", "codex", "aider",
                   "gemini", "aider_usage")


# -- the base class --------------------------------------------------------------------------

def test_the_base_class_names_what_the_runner_sets_and_reads():
    """``name`` (recorded with every attempt and stage run), ``network`` (make_agent sets
    "off"), ``command`` (the runner watches the scripts it names): declared on ``Agent`` with
    defaults, so an adapter that sets none of them still has all three."""
    declared = Agent.__annotations__
    assert {"name", "network", "command"} <= set(declared)

    class Minimal(Agent):
        name = "minimal"

        def run(self, ctx):
            raise AssertionError("not run here")

    m = Minimal()
    assert (m.name, m.network, m.command) == ("minimal", "on", None)
    assert CommandAgent("echo hi").command == "echo hi"
    assert ScriptedAgent(lambda ctx: None).command is None


def test_an_adapter_that_forgets_run_fails_at_construction():
    class NoRun(Agent):
        name = "no-run"

    with pytest.raises(TypeError, match=r"abstract.*run"):
        NoRun()


def test_an_agent_cli_adapter_that_forgets_argv_or_parse_fails_at_construction():
    """ExternalAgent's ``argv`` and ``parse`` are abstract: a CLI adapter without them is
    refused when built, not on its first run (a NotImplementedError in an attempt)."""
    class NoParse(ExternalAgent):
        name, executable = "no-parse", "sh"

        def argv(self, ctx, s, files):
            return ["sh", "-c", "true"]

    class NoArgv(ExternalAgent):
        name, executable = "no-argv", "sh"

        def parse(self, ctx, s, files):
            return Parsed()

    for cls, missing in ((NoParse, "parse"), (NoArgv, "argv")):
        with pytest.raises(TypeError, match=rf"abstract.*{missing}"):
            cls()
    with pytest.raises(TypeError, match="abstract"):
        ExternalAgent()


def test_every_adapter_in_the_table_is_a_concrete_agent():
    for name in agents.ADAPTERS:
        cls = agents.adapter_class(name)
        assert issubclass(cls, Agent) and not getattr(cls, "__abstractmethods__", None), name
    assert set(agents.EXTERNAL) == {"claude-code", "codex", "aider", "gemini"}
    assert all(issubclass(agents.adapter_class(n), ExternalAgent) for n in agents.EXTERNAL)


# -- the lazy table --------------------------------------------------------------------------

def _imported_after(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                          "print(json.dumps(sorted(m for m in sys.modules"
                          " if m.startswith('andon.agents.'))))"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_importing_the_agents_package_imports_no_adapter():
    loaded = _imported_after("import andon.agents")
    assert not [m for m in loaded if m.rpartition(".")[2] in ADAPTER_MODULES], loaded
    # the runner's import chain does not pull them in either
    loaded = _imported_after("import andon.runner")
    assert not [m for m in loaded if m.rpartition(".")[2] in ADAPTER_MODULES], loaded


def test_an_adapter_module_is_imported_when_its_name_is_used():
    loaded = _imported_after("from andon.agents import make_agent\nmake_agent('command', 'true')")
    assert "andon.agents.command" in loaded
    assert not {"andon.agents.codex", "andon.agents.gemini", "andon.agents.aider",
                "andon.agents.claude_code"} & set(loaded)
    # the classes stay importable by name from the package, e.g. `from andon.agents import X`
    loaded = _imported_after("from andon.agents import CodexAgent")
    assert "andon.agents.codex" in loaded and "andon.agents.gemini" not in loaded


def test_an_unknown_agent_names_the_ones_that_exist():
    with pytest.raises(InvalidValue) as e:
        make_agent("gemeni")
    assert isinstance(e.value, UsageError)
    msg = str(e.value)
    assert "unknown agent 'gemeni'" in msg and "did you mean 'gemini'?" in msg
    for name in ("command", "scripted:module:function", "claude-code", "codex", "aider",
                 "gemini"):
        assert name in msg
    with pytest.raises(InvalidValue, match="unknown agent 'zzz'; known agents: command"):
        agents.adapter_class("zzz")
    with pytest.raises(AttributeError, match="NoSuchAgent"):
        agents.NoSuchAgent  # noqa: B018 - the package's lazy attributes: a typo still fails


# -- usage is typed --------------------------------------------------------------------------

def test_a_stage_run_carries_a_usage_record(tmp_path):
    ctx = stage_ctx(tmp_path)
    run = CommandAgent("echo hi").run(ctx)
    assert isinstance(run.usage, Usage) and run.usage.wall_s is not None
    assert isinstance(ScriptedAgent(lambda c: "ok").run(ctx), AgentRun)
    assert ScriptedAgent(lambda c: "ok").run(ctx).usage is None


def test_the_stored_usage_is_the_same_json_as_before(store_target):
    """The store writes ``Usage.to_dict()``: the same keys and values a dict-typed usage
    had (no ``requests``), and None for a run that reported none (both backends)."""
    store = store_target.open()
    store.upsert_packet("P1", "p1", "packets/P1.md", "sha", {})
    a = store.new_attempt("P1", "command", 0)
    u = Usage(model="m", input_tokens=10, output_tokens=2, cost_usd=0.5,
              cost_source="reported", requests=[{"input_tokens": 10, "output_tokens": 2}])
    store.add_stage_run(a["id"], "implement", "command", 0, False, 1.0, "t", "", u, "now")
    store.add_stage_run(a["id"], "review", "command", 0, False, 1.0, "t", "", None, "now")
    stored, none = store.stage_runs(a["id"])
    assert stored["usage"] == u.to_dict() and "requests" not in stored["usage"]
    assert stored["usage"]["input_tokens"] == 10 and stored["usage"]["cost_source"] == "reported"
    assert none["usage"] is None
