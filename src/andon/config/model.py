"""The settings of ``andon.toml`` as pydantic models: where packets live, how the project's
tests run, gate, agent, budget and stage settings. Every key has a default that fits a
pytest project; unknown keys are errors (``extra="forbid"``). Reading the file and turning
validation errors into ``file:line`` messages is :mod:`andon.config.load`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from ..errors import ConfigError, InvalidValue
from ..gate_settings import FlakyGate, MutationGate, StaticGate

CONFIG_NAME = "andon.toml"
STATE_DIR = ".andon"


class _Strict(BaseModel):
    # strict: "900", "yes", 1 and 2.0 are errors where a number, a bool or an integer belongs,
    # as in packet.md, never converted (an integer where a float belongs is fine)
    model_config = ConfigDict(extra="forbid", strict=True)


class Andon(_Strict):
    packets_dir: str = "packets"
    integration_branch: str = "andon/integration"
    base_branch: str | None = Field(
        None, description="where the integration branch starts if it does not exist yet: "
                          "the first of refs/heads/<name>, refs/remotes/<name>, "
                          "refs/tags/<name> that exists (a full name refs/... is that ref); "
                          "default: the branch checked out when `andon run` starts")
    keep_worktrees: bool = False
    worktree_root: str | None = Field(
        None, description="directory for attempt worktrees; default: a folder in the system "
                          "temp dir, outside the repository so its conftest.py files never load")
    temp_dir: str = Field(
        "auto", description='where the trees only the harness reads go (gate clones, test '
                            'runs\' HOME and TMPDIR): "auto" (a tmpfs when the system temp dir '
                            'is on disk and /dev/shm has room; andon/tempdir.py), "system", or '
                            'an absolute path')
    agent_history: Literal["full", "shallow"] = Field(
        "full", description='what git history the worktree holds: "full" (every ancestor of '
                            'the base) or "shallow" (the base commit only, for huge repos); '
                            "never other branches, tags or later commits")

    @field_validator("temp_dir")
    @classmethod
    def _temp_dir(cls, v: str) -> str:
        if v in ("auto", "system") or v.startswith(("/", "~")):
            return v
        raise InvalidValue('expected "auto", "system" or an absolute path')


class Test(_Strict):
    command: list[str] = Field(
        default_factory=lambda: ["python", "-m", "pytest"],
        description='argv; "python" as the first word means the interpreter running andon')
    pythonpath: list[str] = Field(
        default_factory=lambda: ["src"],
        description="worktree-relative dirs put first on PYTHONPATH so tests import the "
                    "attempt's code, not an editable install of another checkout")
    timeout_s: float = Field(900, gt=0)
    plugins: list[str] = Field(
        default_factory=list,
        description="pytest plugins loaded by name (-p); autoloading through entry points is "
                    "off, so a plugin the agent adds to the package metadata never loads")
    network: Literal["off", "on"] = Field(
        "off", description='"off": every harness test run is in its own network namespace '
                           '(loopback only; see netless.py), where the machine allows it, '
                           'and the evidence says when it did not')
    setup: list[str] = Field(
        default_factory=list,
        description='argv run in every clone before its tests (clone_setup.py), e.g. a build '
                    'that writes a git-ignored _version.py; "python" = the test interpreter, '
                    '"{scratch}" = a throwaway dir outside the clone')
    setup_inputs: list[str] = Field(
        default_factory=list, description="more clone-relative files whose bytes key the "
                                          "set-up cache (pyproject.toml, setup.py, setup.cfg "
                                          "always do)")
    setup_timeout_s: float = Field(600, gt=0)
    setup_cache: bool = Field(True, description="reuse the files a set-up generated in a "
                                                "clone with the same inputs")
    jobs: int | None = Field(
        None, ge=1, description="independent test runs (hermetic's, flaky's) made at the same "
                                "time, each in its own clone; default: the cores andon may use")
    fork_server: bool = Field(
        True, description="fork each run from a process of the tests' interpreter that has "
                          "imported pytest (contain/forkserver.py; Linux): the same run "
                          "without the interpreter's and pytest's start-up. false: every run "
                          "starts a fresh interpreter")


class PatternRule(_Strict):
    """``[[gates.patterns.rules]]``: a user rule, a regex matched on each added line of
    non-test code."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    regex: str
    severity: Literal["block", "warn"] = "block"
    message: str = ""
    paths: list[str] = Field(default_factory=lambda: ["**/*.py"],
                             description="globs of the files the rule applies to")

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return valid_regex(v)


def valid_regex(v: str) -> str:
    """``v`` if it compiles as a Python regex, else InvalidValue naming why."""
    try:
        re.compile(v)
    except re.error as exc:
        raise InvalidValue(f"not a valid regex: {exc}") from None
    return v


class Patterns(_Strict):
    """``[gates.patterns]``: rules run on the added lines of non-test code (gates/patterns.py)."""

    enabled: bool = True
    severities: dict[str, Literal["block", "warn", "off"]] = Field(
        default_factory=dict, description='override a built-in rule, e.g. {"broad-except" = '
                                          '"warn"}')
    rules: list[PatternRule] = Field(default_factory=list)


class ContextRule(_Strict):
    """``[[context.rules]]``: a segment of a transcript whose text matches ``pattern`` (a
    regex, searched) belongs to ``component`` (``andon context``; first match wins)."""

    pattern: str
    component: str = Field(min_length=1)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return valid_regex(v)


class ContextSettings(_Strict):
    """``[context]``: settings of ``andon context`` (docs/context.md)."""

    rules: list[ContextRule] = Field(default_factory=list)


class Gates(_Strict):
    red_runs: int = Field(3, ge=1)
    hermetic_runs: int = Field(3, ge=1)
    hermetic_random_order: bool = True
    patterns: Patterns = Field(default_factory=Patterns)
    mutation: MutationGate = Field(default_factory=MutationGate)
    static: StaticGate = Field(default_factory=StaticGate)
    flaky: FlakyGate = Field(default_factory=FlakyGate)
    base_reruns: int = Field(
        10, ge=0, description="a PASS_TO_PASS test that fails on a candidate is re-run this "
                              "many times on the base; failing there once makes it flaky on "
                              "the base, not the agent's failure (0: never excused)")
    max_suite_runs_per_attempt: int | None = Field(
        None, ge=1, description="budget of full-suite runs per attempt (the suite gate's and "
                                "the hermetic gate's); andon.toml is refused when the gate "
                                "settings need more")

    def suite_runs_per_attempt(self) -> int:
        """Full-suite runs an attempt that reaches the end of the hermetic gate makes: the
        suite gate's one, ``hermetic_runs``, and the random-order run. (A merge onto a moved
        integration branch checks the merged result once more, outside this count.)"""
        return 1 + self.hermetic_runs + int(self.hermetic_random_order)

    @field_validator("max_suite_runs_per_attempt")
    @classmethod
    def _budget_met(cls, v: int | None, info: ValidationInfo) -> int | None:
        runs, random = info.data.get("hermetic_runs"), info.data.get("hermetic_random_order")
        if v is None or runs is None or random is None:
            return v  # unset, or another key is already wrong (and reported)
        need = 1 + runs + int(random)
        if need > v:
            raise InvalidValue(
                f"cannot be met: an attempt runs the full suite {need} times (suite 1 + "
                f"hermetic_runs {runs}" + (" + the random-order run 1" if random else "")
                + f"), more than {v}; lower hermetic_runs, set hermetic_random_order = false "
                "or raise max_suite_runs_per_attempt")
        return v


class StageAgentSettings(_Strict):
    """One adapter's settings for one stage (``[agents.<name>.stages.<stage>]``): every key
    that is set replaces the adapter's own."""

    model: str | None = Field(None, description="model name passed to the agent CLI")
    extra_args: list[str] | None = Field(None, description="appended to the agent's argv")
    timeout_s: float | None = Field(None, gt=0, description="wall seconds; default "
                                                            "[agent] timeout_s")
    env_passthrough: list[str] | None = Field(
        None, description="more environment variables passed to the agent (names only)")


class AgentSettings(StageAgentSettings):
    """``[agents.<name>]``: settings of one adapter (claude-code, codex, aider, gemini)."""

    permission_args: list[str] | None = Field(
        None, description="replace the flags andon passes so the agent may edit files and "
                          "run commands without asking (see docs/agents/<name>.md)")
    max_output_bytes: int | None = Field(None, gt=0, description="cap of the transcript")
    stages: dict[StageName, StageAgentSettings] = Field(default_factory=dict)

    def for_stage(self, stage: str) -> AgentSettings:
        """These settings with ``stages.<stage>`` laid over them."""
        over = cast(dict[str, StageAgentSettings], self.stages).get(stage)
        if over is None:
            return self
        data = self.model_dump(exclude={"stages"})
        data.update({k: v for k, v in over.model_dump().items() if v is not None})
        return AgentSettings.model_validate(data)


class Price(_Strict):
    """``[prices."<model>"]``: your price for a model, USD per million tokens. Cache rates
    default to the input rate."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_read_per_mtok: float | None = Field(None, ge=0)
    cache_write_per_mtok: float | None = Field(None, ge=0)


class Budget(_Strict):
    max_cost_usd: float | None = Field(None, gt=0, description="USD")
    max_wall_s: float | None = Field(None, gt=0, description="seconds agents ran")


class Budgets(_Strict):
    """``[budgets.attempt]``, ``[budgets.packet]``, ``[budgets.run]``: see budget.py."""

    attempt: Budget = Field(default_factory=Budget)
    packet: Budget = Field(default_factory=Budget)
    run: Budget = Field(default_factory=Budget)


class Agent(_Strict):
    default: str = "command"
    command: str | None = Field(None, description="shell command for the `command` adapter")
    timeout_s: float = Field(1800, gt=0)
    prompt_template: str | None = Field(None, description="path of a Jinja2 template that "
                                                          "replaces the built-in prompt")
    env_passthrough: list[str] = Field(
        default_factory=list, description="variables the command agent gets besides PATH, "
        "HOME, LANG, LC_*, TERM, TMPDIR, USER (e.g. its API key's name); values never logged")
    prompt_dir: str | None = Field(None, description="directory of <stage>.md.j2 templates "
                                                     "that replace the built-in ones")
    reviewer: str | None = Field(None, description="adapter for review stages; default: the "
                                                   "same as for the other stages")
    reviewer_command: str | None = Field(None, description="shell command of the command "
                                                           "adapter when it reviews")
    network: Literal["allow", "on", "off"] = Field(
        "allow", description='"allow" (default): at sandbox level fs+net an agent stage '
        'reaches only its model API and allow_hosts, through andon\'s filtering proxy '
        '(docs/sandbox.md); "off": no network (loopback only), also without the sandbox; '
        '"on": the host\'s network. Below fs+net "allow" is the host\'s network (doctor '
        'and the evidence say so)')
    allow_hosts: list[str] = Field(
        default_factory=list, description='hosts an agent stage may reach besides its '
        'model API under network = "allow": "host" (ports 443 and 80), "host:port", '
        '"*.domain"; a loopback host with a port (a local model server) is served at the '
        'same address inside the sandbox')
    sandbox: Literal["auto", "none", "fs", "fs+net"] = Field(
        "auto", description='what an agent stage can reach (src/andon/sandbox/, docs/sandbox.md): '
        '"fs" sees only its worktree, a private HOME and TMPDIR writable; "fs+net" also has '
        'its own network (network = "allow": the model API and allow_hosts; "off": none); '
        '"auto" the strongest this machine gives, '
        '"none" where it gives nothing (doctor and each stage\'s evidence say so); '
        '`andon run` refuses an explicit level it cannot have')
    sandbox_paths: list[str] = Field(
        default_factory=list, description='more paths an agent stage sees: "ro:<path>" '
        '(read-only, the default) or "rw:<path>"; relative paths from the checkout')
    memory_mb: int | None = Field(
        None, gt=0, description="memory cap of one agent stage (cgroup, else RLIMIT_AS); "
                                "a stage over it ends with layer environment")
    max_processes: int | None = Field(
        1024, gt=0, description="processes and threads one agent stage may have at once "
                                "(cgroup pids, else RLIMIT_NPROC): a fork bomb ends the stage")

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        from ..sandbox.netproxy import parse_entry  # here: `andon status` loads no sandbox
        for entry in v:
            parse_entry(entry)  # InvalidValue naming the entry and the accepted forms
        return v


StageName = Literal["atdd", "implement", "review", "review-tests", "review-correctness"]


class Stages(_Strict):
    default: list[StageName] = Field(
        default_factory=lambda: list[StageName](["implement", "review"]),
        description="stages of a packet that names neither `stages` nor a `tier`")
    tiers: dict[str, list[StageName]] = Field(
        default_factory=dict, description='stages per tier, e.g. critical = ["atdd", '
                                          '"implement", "review-tests", "review-correctness"]')
    test_paths: list[str] = Field(
        default_factory=lambda: ["tests/**", "test/**", "**/test_*.py", "**/*_test.py",
                                 "**/conftest.py"],
        description="globs of test files: the only paths atdd may change, and paths "
                    "implement may not change when the packet has an atdd stage")
    review_max_asks: int = Field(2, ge=1, description="how often a reviewer is asked for a "
                                                      "valid document before the attempt fails")


class Run(_Strict):
    """``[run]``: how `andon run` works the queue (workers.py)."""
    workers: int = Field(1, ge=1, le=64, description="attempts at once, each in its own "
                         "worktree; 1 works one packet at a time (`andon run --workers N`)")


class StoreSettings(_Strict):
    """``[store]``: where andon keeps its state (docs/store.md)."""

    url: str | None = Field(
        None, description='"postgresql://user:password@host/db" for a PostgreSQL store that '
                          'several workers share; default: .andon/andon.db (SQLite). '
                          '$ANDON_STORE_URL, when set, wins')

    @field_validator("url")
    @classmethod
    def _scheme(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("postgresql://", "postgres://", "sqlite:///")):
            raise InvalidValue("expected postgresql://… or sqlite:///path")
        return v


class GrillSettings(_Strict):
    """``[grill]``: the interview of `andon grill` (docs/grill.md)."""

    glossary: str = Field("GLOSSARY.md", description="the file glossary additions are "
                          "appended to (repository-relative)")
    decisions_dir: str = Field("decisions", description="where decisions/NNN-<slug>.md go")
    max_asks: int = Field(3, ge=1, description="how often the interview agent is asked for a "
                          "valid turn document before the interview stops")
    max_questions: int = Field(30, ge=1, description="questions per phase; then the harness "
                               "moves the interview to its next phase")


class PlanSettings(_Strict):
    """``[plan]``: how thin a drafted packet must be (`andon plan`, docs/plan.md)."""
    max_allowed_paths: int = Field(8, ge=1, description="globs in one draft's allowed_paths")
    max_invariants: int = Field(8, ge=1, description="invariants of one draft")
    max_planted_files: int = Field(5, ge=0, description="planted test files of one draft")
    max_packets: int = Field(12, ge=1, description="drafts in one plan")


class Config(_Strict):
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    prices: dict[str, Price] = Field(default_factory=dict)
    budgets: Budgets = Field(default_factory=Budgets)
    andon: Andon = Field(default_factory=Andon)
    test: Test = Field(default_factory=Test)
    gates: Gates = Field(default_factory=Gates)
    agent: Agent = Field(default_factory=Agent)
    stages: Stages = Field(default_factory=Stages)
    context: ContextSettings = Field(default_factory=ContextSettings)
    run: Run = Field(default_factory=Run)
    store: StoreSettings = Field(default_factory=StoreSettings)
    grill: GrillSettings = Field(default_factory=GrillSettings)
    plan: PlanSettings = Field(default_factory=PlanSettings)

    def stages_of(self, packet_stages: Sequence[str] | None, tier: str | None) -> list[str]:
        """The packet's stages: its own, else its tier's, else ``[stages] default``.

        Raises:
            ConfigError: the packet names a tier that andon.toml does not define.
        """
        if packet_stages:
            return list(packet_stages)
        if tier:
            if tier not in self.stages.tiers:
                defined = ", ".join(self.stages.tiers) or "none"
                raise ConfigError(f"tier {tier!r} is not defined in [stages.tiers] of "
                                  f"{CONFIG_NAME}; defined: {defined}")
            return list(self.stages.tiers[tier])
        return list(self.stages.default)

    def test_argv(self) -> list[str]:
        argv = list(self.test.command)
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        return argv
