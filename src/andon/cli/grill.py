"""``andon grill FEATURE.md``: the interview in the terminal (docs/grill.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from ..errors import AndonError
from ..exits import EXIT_INTERRUPTED
from ..safe_text import markup_safe, visible
from . import common
from .common import config_or_fail, fail, repo_or_fail


@click.command()
@click.argument("feature", metavar="FEATURE.md")
@click.option("--agent", "agent_spec", default=None, metavar="NAME",
              help="The interview agent's adapter: claude-code, codex, aider, gemini, "
                   "command, or scripted:module:function (default: [agent] default).")
@click.option("--command", "command", default=None, metavar="SHELL",
              help="Shell command for the command agent: the prompt is on stdin and in "
                   "$ANDON_PROMPT_FILE; it writes its JSON to $ANDON_REVIEW_FILE.")
@click.option("--non-interactive", is_flag=True,
              help="Accept every recommended answer (a first draft, or for scripts).")
@click.option("--slug", default=None, metavar="SLUG",
              help="Name of the interview (log, branch andon/grill/SLUG, decisions file); "
                   "default: the feature file's name.")
@click.option("--restart", is_flag=True, help="Throw away this feature's log and start over.")
@click.pass_context
def grill(ctx: click.Context, feature: str, agent_spec: str | None, command: str | None,
          non_interactive: bool, slug: str | None, restart: bool) -> None:
    """Interview a person about FEATURE.md, one question at a time: the agent recommends an
    answer and says why; Enter accepts it, typed text corrects it. It ends by committing
    decisions/NNN-<slug>.md and glossary additions on the branch andon/grill/<slug>; your
    checkout, index and current branch are not touched.

    Resumable: after Ctrl-C or a crash, run the same command again. Exits 0 when the
    decisions are committed, 1 when the agent gave no valid turn, 2 on bad input, 130 on
    Ctrl-C (the answers so far are kept).
    """
    from ..agents import make_agent
    from ..grill import AgentFailed, Interview, TerminalAnswerer, accept_all
    from ..state import open_store

    repo = repo_or_fail(ctx)
    config = config_or_fail(repo)
    path = Path(feature)
    if not path.is_absolute() and not path.exists() and (repo.root / path).exists():
        path = repo.root / path
    try:
        agent = make_agent(agent_spec or config.agent.default, command or config.agent.command,
                           config)
        store = open_store(repo, config)
        interview = Interview(repo, config, agent, path, slug=slug, restart=restart,
                              event=lambda kind, data: store.event(kind, data=data),
                              say=lambda s: common.err.print(markup_safe(s, lines=True)))
    except AndonError as exc:
        fail(str(exc))
    again = f"andon grill {shlex.quote(feature)}" + (f" --slug {slug}" if slug else "")
    log = interview.log
    if log.phase == "done":
        common.out.print(visible(f"already written: branch {log.branch}, commit {log.commit}"),
                         markup=False)
        return
    if interview.resumed:
        common.err.print(f"resuming: {len(log.answers)} answer(s) in "
                         f"{visible(interview.log_path)}",
                         markup=False)
    answer = accept_all if non_interactive else TerminalAnswerer(common.out)
    try:
        result = interview.run(answer)
    except (KeyboardInterrupt, EOFError) as exc:
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else "input closed"
        common.err.print(f"\n{why}: {len(interview.log.answers)} answer(s) saved in "
                         f"{visible(interview.log_path)}; resume with: {visible(again)}",
                         markup=False)
        sys.exit(EXIT_INTERRUPTED)
    except AgentFailed as exc:
        fail(f"{exc}; the answers so far are kept: fix the agent, then {again}", 1)
    except AndonError as exc:
        fail(str(exc))
    u = result.usage
    cost = f", ${u['cost_usd']:.4f}" if u.get("cost_usd") is not None else ""
    tokens = (f", {u['input_tokens']} in / {u['output_tokens']} out tokens"
              if u.get("input_tokens") is not None else "")
    common.out.print(visible(f"decisions: {result.decisions_path} (copy: "
                             f"{result.decisions_copy})"), markup=False, soft_wrap=True)
    common.out.print(f"branch: {visible(result.branch)}\ncommit: {visible(result.commit)}",
                     markup=False)
    common.out.print(f"interview agent: {result.runs} run(s), {u['wall_s']:.1f} s"
                     f"{tokens}{cost}", markup=False)
