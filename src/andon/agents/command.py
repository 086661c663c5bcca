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

(token counts in the OpenTelemetry convention, see ``andon.usage``). Without ``cost_usd``
the cost is priced from the tokens and the model. A file that is not such an object is
recorded as a note, never guessed at. Every run gets a usage record with its wall time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..usage import Usage, as_cost, as_count, price
from .base import AgentRun, StageContext
from .external import clean_env
from .process import leftover_note, run_process

CLAIM_BYTES = 2000
USAGE_FILE_MAX = 64 * 1024


class CommandAgent:
    name = "command"
    network = "on"  # "off": the command runs without network (make_agent sets it)

    def __init__(self, command: str, prices: Mapping[str, Any] | None = None,
                 env_passthrough: tuple[str, ...] | list[str] = ()):
        if not command.strip():
            raise ValueError("the command agent needs a command: --command '...' or "
                             "[agent] command = '...' in andon.toml")
        self.command = command
        self.prices = dict(prices or {})
        self.env_passthrough = tuple(env_passthrough)

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
        env["ANDON_USAGE_FILE"] = str(usage_file)
        if ctx.review_file:
            env["ANDON_REVIEW_FILE"] = str(ctx.review_file)
        p = run_process(["/bin/sh", "-c", self.command], ctx.worktree, env, ctx.prompt_file,
                        transcript, ctx.timeout_s, cut_network=self.network == "off")
        usage = read_usage_file(usage_file)
        usage.wall_s = p.duration_s
        if note := leftover_note(p):
            usage.notes.insert(0, note)
        price(usage, self.prices)
        return AgentRun(agent=self.name, exit_status=p.exit_status, timed_out=p.timed_out,
                        duration_s=p.duration_s, transcript_path=transcript,
                        claim=_tail(transcript), usage=usage.to_dict())


def read_usage_file(path: Path) -> Usage:
    """The usage a command reported in ``path`` (schema in the module docstring). Anything
    unreadable becomes a note and leaves the fields unknown (None)."""
    u = Usage()
    if not path.is_file():
        u.notes.append("no usage file written: usage unknown")
        return u
    if path.stat().st_size > USAGE_FILE_MAX:
        u.notes.append(f"usage file over {USAGE_FILE_MAX} bytes: not read")
        return u
    try:
        doc = json.loads(path.read_bytes())
    except ValueError as exc:
        u.notes.append(f"usage file is not JSON: {exc}")
        return u
    if not isinstance(doc, dict):
        u.notes.append("usage file is not a JSON object: not read")
        return u
    bad = [k for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                       "cache_write_tokens", "turns")
           if doc.get(k) is not None and as_count(doc[k]) is None]
    bad += ["cost_usd"] if doc.get("cost_usd") is not None and as_cost(doc["cost_usd"]) is None \
        else []
    if bad:
        u.notes.append(f"usage file: {', '.join(bad)} must be numbers >= 0 (counts whole): "
                       "not read")
        return u
    if isinstance(doc.get("model"), str) and doc["model"]:
        u.model = doc["model"]
    u.input_tokens, u.output_tokens = as_count(doc.get("input_tokens")), as_count(
        doc.get("output_tokens"))
    u.cache_read_tokens = as_count(doc.get("cache_read_tokens"))
    u.cache_write_tokens = as_count(doc.get("cache_write_tokens"))
    u.turns = as_count(doc.get("turns"))
    cache = (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0)
    if u.input_tokens is not None and cache > u.input_tokens:
        u.notes.append(f"usage file: input_tokens ({u.input_tokens}) must include the cache "
                       f"tokens ({cache}) (OpenTelemetry convention): tokens not used")
        u.input_tokens = u.output_tokens = u.cache_read_tokens = u.cache_write_tokens = None
    u.report_cost(doc.get("cost_usd"))
    return u


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - CLAIM_BYTES))
        return f.read().decode("utf-8", errors="replace")
