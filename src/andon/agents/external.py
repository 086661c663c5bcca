"""What the adapters for agent CLIs share: a clean environment, one run, parsing, pricing.

An adapter for an external agent (``claude_code``, ``codex``, ``aider``, ``gemini``) says
which executable it starts, the argv for one stage, which variables the agent needs, and how
to read the agent's transcript. :class:`ExternalAgent` does the rest: it runs the agent in
the attempt's worktree through :func:`run_process` (own process group, SIGKILL on timeout,
output capped on disk with its tail kept, bytes kept as they are), stdout to
``<stage>.transcript.log`` and stderr to ``<stage>.stderr.log`` in the evidence folder, then
parses the transcript into a claim (the agent's final text — recorded, never believed) and
a :class:`~andon.usage.Usage` record, and prices it when the agent reported no cost (per
request when the parser read the requests; an adapter may ask for a reported cost to be
checked against andon's price: ``check_reported_cost``).

Environment: only ``PATH, HOME, LANG, LC_*, TERM, TMPDIR, USER``, the adapter's credential
variables (API keys) when they are set, the names listed in ``env_passthrough``, and
``ANDON_PACKET_ID``, ``ANDON_STAGE``, ``ANDON_ATTEMPT``, ``ANDON_WORKTREE``,
``ANDON_PROMPT_FILE`` (plus ``ANDON_REVIEW_FILE`` in review stages).

Parsing never raises on odd input: unknown event types are counted and kept in the
transcript, truncated JSON lines are skipped and counted, a missing usage block leaves the
tokens unknown (``None``, never 0) — each with a note in ``usage.notes``. Output in a format
the adapter does not know (for example an older protocol) raises :class:`FormatError`
inside the parser; the run records it as a note and leaves usage unknown.
"""

from __future__ import annotations

import json
import os
import shutil
from abc import abstractmethod
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import plain_file
from ..config import AgentSettings, Config
from ..context.model import Problem
from ..errors import AndonError, InvalidValue
from ..sandbox.installs import installation_of
from ..sandbox.netproxy import hosts_in
from ..usage import Usage, price
from .base import Agent, AgentRun, StageContext
from .process import DEFAULT_MAX_BYTES, run_process, stage_notes

BASE_ENV = ("PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER")
TAIL_BYTES = 1024 * 1024      # kept from the end of a capped transcript: the result event
CLAIM_BYTES = 2000
DEVNULL = Path(os.devnull)


class FormatError(AndonError, ValueError):
    """The agent printed output in a format (or format version) this adapter cannot read."""


def clean_env(names: tuple[str, ...] | list[str], source: Mapping[str, str] | None = None
              ) -> dict[str, str]:
    """The allowlisted variables of ``source`` (default ``os.environ``) plus ``names``,
    each only if it is set. Values are copied, never logged."""
    source = os.environ if source is None else source
    wanted = set(BASE_ENV) | set(names)
    return {k: v for k, v in source.items() if k in wanted or k.startswith("LC_")}


@dataclass
class Parsed:
    """What a parser read: the agent's final text and its usage (wall time filled later)."""

    claim: str = ""
    usage: Usage = field(default_factory=Usage)
    meta: dict[str, Any] = field(default_factory=dict)   # e.g. a session id for the adapter


def json_lines(path: Path, usage: Usage) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL transcript, one per line. Lines that are not JSON are
    skipped: a line that starts like JSON but does not parse is counted as truncated, other
    text (a marker of dropped bytes, a stray log line) as not JSON; both end up in notes."""
    truncated = other = 0
    # the agent may have left a link or a FIFO in its place: neither followed nor waited on
    with plain_file.open_regular(path) as f:
        for raw in f:
            line = raw.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                if line.startswith(b"{"):
                    truncated += 1
                else:
                    other += 1
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                other += 1
    if truncated:
        usage.notes.append(f"{truncated} truncated JSON line(s) skipped")
    if other:
        usage.notes.append(f"{other} line(s) that are not JSON objects skipped")


def note_problems(usage: Usage, problems: Sequence[Problem]) -> None:
    """The lines a transcript parser of ``andon.context`` skipped, as notes: truncated JSON
    lines and other lines counted apart (the words ``json_lines`` uses)."""
    truncated = sum("truncated" in p.message for p in problems)
    if truncated:
        usage.notes.append(f"{truncated} truncated JSON line(s) skipped")
    if len(problems) > truncated:
        usage.notes.append(f"{len(problems) - truncated} line(s) that are not JSON objects "
                           "skipped")


def note_unknown(usage: Usage, unknown: Counter) -> None:
    if unknown:
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted(unknown.items()))
        usage.notes.append(f"unknown event types kept in the transcript, not read: {kinds}")


def tail_text(path: Path, n: int = CLAIM_BYTES) -> str:
    try:
        return plain_file.tail(path, n)
    except OSError:
        return ""


@dataclass
class RunFiles:
    """Where one stage run's files go (all in the attempt's evidence folder)."""

    transcript: Path
    stderr: Path
    prefix: Path          # <evidence>/<stage>: adapters add their own suffixes


class ExternalAgent(Agent):
    """Base of the CLI adapters. Subclasses set the class attributes and implement
    :meth:`argv` and :meth:`parse`; they may override :meth:`stdin` and :meth:`after`.

    Args:
        settings: ``[agents.<name>]`` from andon.toml (model, extra_args, timeout_s, ...).
        prices: ``[prices]`` from andon.toml, used when the agent reports no cost.
        environ: where the clean environment is taken from (default ``os.environ``).

    Raises:
        InvalidValue: the executable is not on PATH (the message says how to check).
    """

    name = ""
    executable = ""
    credential_env: tuple[str, ...] = ()      # passed through when set; `andon doctor` lists them
    # Under $HOME: what the CLI keeps state in (login, sessions andon reads usage from); kept
    # writable inside the sandbox's private HOME. A trailing "/" is a folder made if missing.
    home_state: tuple[str, ...] = ()
    # The model API's hosts, let through andon's proxy under [agent] network = "allow"
    # (with the hosts of the URLs in its arguments and *BASE_URL* variables: netproxy.hosts_in)
    api_hosts: tuple[str, ...] = ()
    default_permission_args: tuple[str, ...] = ()
    docs = ""
    tested_version: str | None = None   # `andon doctor` warns about an older CLI
    check_reported_cost = False  # True: a reported cost far from andon's price is replaced

    def __init__(self, settings: AgentSettings | None = None,
                 prices: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None):
        self.settings = settings or AgentSettings()
        self.prices = dict(prices or {})
        self.environ = dict(os.environ if environ is None else environ)
        if self.find() is None:
            raise InvalidValue(f"the {self.name} agent needs `{self.executable}` on PATH, and it "
                             f"is not there; install it or run `andon doctor` (see {self.docs})")

    @classmethod
    def configured(cls, arg: str, command: str | None, config: Config | None
                   ) -> ExternalAgent:
        """``[agents.<name>]`` and ``[prices]`` of ``config``; ``--agent`` takes no argument
        and ``--command`` is not used."""
        settings = config.agents.get(cls.name) if config is not None else None
        return cls(settings, config.prices if config is not None else {})

    def find(self) -> str | None:
        return shutil.which(self.executable, path=self.environ.get("PATH", os.defpath))

    # -- what subclasses provide ----------------------------------------------------------

    @abstractmethod
    def argv(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> list[str]:
        """The command line of one stage; its first word is replaced by the executable's
        path on the clean environment's PATH."""

    @abstractmethod
    def parse(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> Parsed:
        """The claim and usage read from the run's files; raises only FormatError."""

    def stdin(self, ctx: StageContext) -> Path:
        return ctx.prompt_file

    def before(self, ctx: StageContext) -> Any:
        return None

    def after(self, ctx: StageContext, state: Any, usage: Usage) -> None:
        return None

    def permission_args(self, s: AgentSettings) -> list[str]:
        return list(self.default_permission_args if s.permission_args is None
                    else s.permission_args)

    # -- one run --------------------------------------------------------------------------

    def env(self, ctx: StageContext, s: AgentSettings) -> dict[str, str]:
        env = clean_env([*self.credential_env, *(s.env_passthrough or [])], self.environ)
        env.update(ANDON_PACKET_ID=ctx.packet.id, ANDON_STAGE=ctx.stage,
                   ANDON_ATTEMPT=str(ctx.attempt), ANDON_WORKTREE=str(ctx.worktree),
                   ANDON_PROMPT_FILE=str(ctx.prompt_file))
        review_file = getattr(ctx, "review_file", None)
        if review_file:
            env["ANDON_REVIEW_FILE"] = str(review_file)
        return env

    def run(self, ctx: StageContext) -> AgentRun:
        s = self.settings.for_stage(ctx.stage)
        files = RunFiles(ctx.evidence_dir / f"{ctx.stage}.transcript.log",
                         ctx.evidence_dir / f"{ctx.stage}.stderr.log",
                         ctx.evidence_dir / ctx.stage)
        env = self.env(ctx, s)
        plan = ctx.sandbox
        if plan is not None and plan.level != "none":
            # the evidence folder is hidden from a sandboxed agent: the files it writes
            # itself (last message, chat log) go to a folder of this stage's own, bound in
            out = ctx.evidence_dir / ctx.stage
            out.mkdir(parents=True, exist_ok=True)
            files = RunFiles(files.transcript, files.stderr, out / ctx.stage)
            plan = plan.with_home_state(self.state_paths(env)).with_writable(out)
        exe = shutil.which(self.executable, path=env.get("PATH", os.defpath)) or self.executable
        if plan is not None and plan.level != "none":
            plan = plan.with_readonly(*installation_of(exe))  # wrap names it by its real folder
        argv = [exe, *self.argv(ctx, s, files)[1:]]
        if plan is not None:  # its model API: the CLI's own hosts, and the URLs it is given
            plan = plan.with_hosts(*self.api_hosts, *hosts_in(argv[1:], env))
        state = self.before(ctx)
        try:
            p = run_process(argv, ctx.worktree, env, self.stdin(ctx), files.transcript,
                            s.timeout_s or ctx.timeout_s, s.max_output_bytes or DEFAULT_MAX_BYTES,
                            stderr_path=files.stderr, keep_tail=TAIL_BYTES,
                            cut_network=self.network == "off", sandbox=plan)
        except OSError as exc:  # cannot start: recorded like any other failed run
            plain_file.write(files.transcript, b"")
            plain_file.write(files.stderr, f"andon: cannot start {argv[0]}: {exc}\n")
            usage = Usage(model=s.model, notes=[f"cannot start {argv[0]}: {exc}"])
            return AgentRun(self.name, 127, False, 0.0, files.transcript,
                            f"cannot start {argv[0]}: {exc}", usage)
        try:
            parsed = self.parse(ctx, s, files)
        except FormatError as exc:
            parsed = Parsed(usage=Usage(model=s.model, notes=[f"unreadable output: {exc}"]))
        usage = parsed.usage
        usage.wall_s = p.duration_s
        if usage.model is None:
            usage.model = s.model
        if p.bytes_dropped:
            usage.notes.append(f"transcript capped: {p.bytes_dropped} bytes dropped "
                               "(the first and the last bytes are kept)")
        if p.timed_out:
            usage.notes.append(f"killed after the {s.timeout_s or ctx.timeout_s:g} s timeout")
        usage.notes[:0] = stage_notes(p, plan)
        self.after(ctx, state, usage)
        price(usage, self.prices, check_reported=self.check_reported_cost)
        claim = parsed.claim or tail_text(files.stderr)
        return AgentRun(agent=self.name, exit_status=p.exit_status, timed_out=p.timed_out,
                        duration_s=p.duration_s, transcript_path=files.transcript,
                        claim=claim, usage=usage, sandbox=p.sandbox, limit_hit=p.limit_hit)

    def state_paths(self, env: Mapping[str, str]) -> list[str]:
        """``home_state`` as paths under the agent's ``HOME`` (folders made when missing, so
        what the CLI writes there outlives the stage's private HOME)."""
        home = env.get("HOME")
        if not home:
            return []
        for name in self.home_state:
            if name.endswith("/"):
                os.makedirs(os.path.join(home, name), exist_ok=True)
        return [n.rstrip("/") for n in self.home_state]
