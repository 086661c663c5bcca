"""The ``command`` adapter: any shell command is an agent.

The command runs under ``/bin/sh -c`` with the worktree as cwd, the stage prompt on stdin and
in the file named by ``ANDON_PROMPT_FILE``. Also set: ``ANDON_PACKET_ID``, ``ANDON_STAGE``,
``ANDON_ATTEMPT``, ``ANDON_WORKTREE``. stdout and stderr go to the transcript file on disk
(never held in memory). When it ends (or times out) the whole process group is killed with
SIGKILL, and on Linux so are the helpers it started in sessions of their own (``setsid``):
an agent that forks helpers cannot outlive its stage (the stage's usage notes say how many
were killed). The last lines of its output are recorded
as its claim — and ignored.

Usage reporting (optional): ``ANDON_USAGE_FILE`` names ``<evidence>/<stage>.usage.json``. A
command that knows what it used may write there one JSON object (at most 64 KiB), every key
optional::

    {"model": "claude-sonnet-4-5",     # model name, as the price table knows it
     "input_tokens": 31413,            # ALL prompt tokens, cache reads and writes included
     "output_tokens": 607,             # generated tokens, reasoning included
     "cache_read_tokens": 20284,       # part of input_tokens read from a prompt cache
     "cache_write_tokens": 11120,      # part of input_tokens written to a prompt cache
     "cost_usd": 0.0569,               # what it cost, if the agent said (used as is)
     "turns": 3}                       # the agent's turns

(token counts in the OpenTelemetry convention, see ``andon.usage``). It may also list the
run's API requests, each with the same four token keys and an optional ``model``::

     "requests": [{"input_tokens": 1779, "output_tokens": 226, "cache_read_tokens": 0},
                  ...]

Then the cost is priced request by request (price tiers apply per request), and the token
totals, when left out, are the requests' sums. Without ``cost_usd`` the cost is priced from
the tokens and the model (``pricing: "total"`` without requests). A file that is not such an
object is recorded as a note, never guessed at. Every run gets a usage record with its wall
time.

mini-swe-agent writes its per-call usage into its trajectory:
``python -m andon.agents.command mini-swe-agent TRAJ.json > "$ANDON_USAGE_FILE"`` turns it
into such a file (see :func:`usage_from_mini_swe_agent`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import plain_file
from ..errors import InvalidValue
from ..sandbox.netproxy import hosts_in
from ..usage import TOKEN_FIELDS, Usage, as_cost, as_count, price, sum_counts
from .base import Agent, AgentRun, StageContext
from .external import FormatError, clean_env
from .process import run_process, stage_notes

if TYPE_CHECKING:
    from ..config import Config

CLAIM_BYTES = 2000
USAGE_FILE_MAX = 64 * 1024


class CommandAgent(Agent):
    name = "command"
    command: str  # never empty: the constructor refuses a blank command

    def __init__(self, command: str, prices: Mapping[str, Any] | None = None,
                 env_passthrough: tuple[str, ...] | list[str] = ()):
        if not command.strip():
            raise InvalidValue("the command agent needs a command: --command '...' or "
                             "[agent] command = '...' in andon.toml")
        self.command = command
        self.prices = dict(prices or {})
        self.env_passthrough = tuple(env_passthrough)

    @classmethod
    def configured(cls, arg: str, command: str | None, config: Config | None) -> CommandAgent:
        """``--agent command:<shell command>``, else ``--command``, else ``[agent] command``
        (the CLI passes it as ``command``); ``[prices]`` and ``[agent] env_passthrough``."""
        passthrough = config.agent.env_passthrough if config is not None else ()
        return cls(arg or command or "", prices=config.prices if config is not None else {},
                   env_passthrough=passthrough)

    def run(self, ctx: StageContext) -> AgentRun:
        transcript = ctx.evidence_dir / f"{ctx.stage}.transcript.log"
        # A clean environment: the allowlist plus the names the user passes through
        # ([agent] env_passthrough), never the whole of the runner's environment.
        env = clean_env(self.env_passthrough)
        env.update(
            ANDON_PROMPT_FILE=str(ctx.prompt_file), ANDON_PACKET_ID=ctx.packet.id,
            ANDON_STAGE=ctx.stage, ANDON_ATTEMPT=str(ctx.attempt),
            ANDON_WORKTREE=str(ctx.worktree), PYTHONDONTWRITEBYTECODE="1",
        )
        usage_file = ctx.evidence_dir / f"{ctx.stage}.usage.json"
        usage_file.unlink(missing_ok=True)
        plan, written = ctx.sandbox, usage_file
        if plan is not None and plan.level != "none":
            # the evidence folder is hidden from a sandboxed agent: it writes its usage into
            # a folder of this stage's own, moved into place afterwards
            out = ctx.evidence_dir / ctx.stage
            out.mkdir(parents=True, exist_ok=True)
            written = out / usage_file.name
            written.unlink(missing_ok=True)
            # the model API named in its environment (ANTHROPIC_BASE_URL...) passes the proxy
            plan = plan.with_writable(out).with_hosts(*hosts_in((), env))
        env["ANDON_USAGE_FILE"] = str(written)
        if ctx.review_file:
            env["ANDON_REVIEW_FILE"] = str(ctx.review_file)
        p = run_process(["/bin/sh", "-c", self.command], ctx.worktree, env, ctx.prompt_file,
                        transcript, ctx.timeout_s, cut_network=self.network == "off",
                        sandbox=plan)
        if written != usage_file and written.is_file() and not written.is_symlink():
            written.replace(usage_file)
        usage = read_usage_file(usage_file)
        usage.wall_s = p.duration_s
        usage.notes[:0] = stage_notes(p, plan)
        price(usage, self.prices)
        return AgentRun(agent=self.name, exit_status=p.exit_status, timed_out=p.timed_out,
                        duration_s=p.duration_s, transcript_path=transcript,
                        claim=_tail(transcript), usage=usage, sandbox=p.sandbox,
                        limit_hit=p.limit_hit)


def read_usage_file(path: Path) -> Usage:
    """The usage a command reported in ``path`` (schema in the module docstring). Anything
    unreadable becomes a note and leaves the fields unknown (None)."""
    u = Usage()
    try:
        data = plain_file.read(path, USAGE_FILE_MAX)
    except FileNotFoundError:
        u.notes.append("no usage file written: usage unknown")
        return u
    except plain_file.NotPlain as exc:
        u.notes.append(f"usage file {exc.what}: not read")
        return u
    try:
        doc = json.loads(data)
    except ValueError as exc:
        u.notes.append(f"usage file is not JSON: {exc}")
        return u
    if not isinstance(doc, dict):
        u.notes.append("usage file is not a JSON object: not read")
        return u
    bad = [k for k in (*TOKEN_FIELDS, "turns")
           if doc.get(k) is not None and as_count(doc[k]) is None]
    requests = doc.get("requests")
    if requests is not None and (not isinstance(requests, list) or not all(
            isinstance(r, dict) and r.get("input_tokens") is not None
            and r.get("output_tokens") is not None
            and all(r.get(k) is None or as_count(r[k]) is not None for k in TOKEN_FIELDS)
            for r in requests)):
        bad.append("requests (a list of objects with whole input_tokens and output_tokens)")
    bad += ["cost_usd"] if doc.get("cost_usd") is not None and as_cost(doc["cost_usd"]) is None \
        else []
    if bad:
        u.notes.append(f"usage file: {', '.join(bad)} must be numbers >= 0 (counts whole): "
                       "not read")
        return u
    if isinstance(doc.get("model"), str) and doc["model"]:
        u.model = doc["model"]
    u.requests = [{**{k: as_count(r.get(k)) for k in TOKEN_FIELDS},
                   **({"model": r["model"]} if isinstance(r.get("model"), str) else {})}
                  for r in requests or []]
    summed = sum_counts(u.requests) if u.requests else {}
    for k in TOKEN_FIELDS:
        v = as_count(doc.get(k))
        setattr(u, k, summed.get(k) if v is None else v)
    u.turns = as_count(doc.get("turns"))
    cache = (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0)
    if u.input_tokens is not None and cache > u.input_tokens:
        u.notes.append(f"usage file: input_tokens ({u.input_tokens}) must include the cache "
                       f"tokens ({cache}) (OpenTelemetry convention): tokens not used")
        u.input_tokens = u.output_tokens = u.cache_read_tokens = u.cache_write_tokens = None
        u.requests = []
    u.report_cost(doc.get("cost_usd"))
    return u


def usage_from_mini_swe_agent(traj: Path) -> dict[str, Any]:
    """A usage file (the schema above) from a mini-swe-agent trajectory (``{info:
    {model_stats: {instance_cost, api_calls}, config: {model: {model_name}}}, messages:
    [..., {extra: {response: <Chat Completions response>}}]}``): one request per response's
    ``usage`` (``prompt_tokens`` holds ``prompt_tokens_details.cached_tokens``;
    ``completion_tokens`` holds the reasoning tokens: already the store's convention), the
    model of the first response (else the configured ``model_name``), and ``cost_usd`` =
    ``info.model_stats.instance_cost`` as mini-swe-agent reported it.

    Raises:
        FormatError: (a ValueError) the file is not such a trajectory (the message says what
            is missing).
    """
    try:
        doc = json.loads(plain_file.read_text(traj))
    except (OSError, ValueError) as exc:
        raise FormatError(f"{traj}: not a readable JSON trajectory: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise FormatError(f"{traj}: a mini-swe-agent trajectory has a `messages` list")
    requests, model = [], None
    for m in doc["messages"]:
        resp = (m.get("extra") or {}).get("response") if isinstance(m, dict) else None
        if not isinstance(resp, dict) or not isinstance(resp.get("usage"), dict):
            continue
        x = resp["usage"]
        details = x.get("prompt_tokens_details") or {}
        requests.append({"input_tokens": as_count(x.get("prompt_tokens")),
                         "output_tokens": as_count(x.get("completion_tokens")),
                         "cache_read_tokens": as_count(details.get("cached_tokens")),
                         "cache_write_tokens": as_count(details.get("cache_write_tokens"))})
        model = model or resp.get("model")
    info = i if isinstance(i := doc.get("info"), dict) else {}
    stats = s if isinstance(s := info.get("model_stats"), dict) else {}
    config = (info.get("config") or {}).get("model") or {}
    out: dict[str, Any] = {"model": model or config.get("model_name"),
                           "requests": requests, "turns": len(requests)}
    if as_cost(stats.get("instance_cost")) is not None:
        out["cost_usd"] = stats["instance_cost"]
    return out


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - CLAIM_BYTES))
        return f.read().decode("utf-8", errors="replace")


if __name__ == "__main__":  # python -m andon.agents.command mini-swe-agent TRAJ.json
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "mini-swe-agent":
        sys.exit("usage: python -m andon.agents.command mini-swe-agent TRAJ.json")
    try:
        print(json.dumps(usage_from_mini_swe_agent(Path(sys.argv[2]))))
    except ValueError as exc:
        sys.exit(f"andon: {exc}")
