"""The ``context`` command: what filled an agent's context window, turn by turn."""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from andon.context import FORMATS, load
from andon.context.model import Conversation, TranscriptError
from andon.errors import InvalidValue, UsageError
from andon.safe_text import visible

from .common import fail

if TYPE_CHECKING:
    from andon.agents import Agent
    from andon.config import Config
    from andon.context.components import Rules
    from andon.context.label import Labelling


def _config_rules(repo: Path) -> list[tuple[str, str]]:
    """``[[context.rules]]`` of the repository's andon.toml, when there is one (checked:
    a broken andon.toml is an error, as for every command)."""
    from andon.config import CONFIG_NAME, load_config

    if not (repo / CONFIG_NAME).is_file():
        return []
    cfg = load_config(repo)
    return [(r.pattern, r.component) for r in cfg.context.rules]


def _rules(rule: tuple[str, ...], then: list[tuple[str, str]]) -> Rules:
    """``--rule`` options first, then andon.toml's rules."""
    from andon.context.components import compile_rules

    pairs = []
    for r in rule:
        pattern, sep, component = r.rpartition("=")
        if not sep or not pattern or not component:
            raise UsageError(f"--rule {r!r}: expected PATTERN=COMPONENT")
        try:
            pairs.append((pattern, component))
            compile_rules([(pattern, component)])
        except re.error as e:
            raise UsageError(f"--rule {r!r}: the pattern is not a regular expression: {e}") \
                from e
    return compile_rules(pairs + then)


def _labeller(repo: Path, spec: str, command: str | None) -> tuple[Agent, Config]:
    """The agent of ``--label-with`` and the config it runs under (andon.toml's, or the
    defaults outside a project)."""
    from andon.agents import make_agent
    from andon.config import CONFIG_NAME, Config, load_config

    config = load_config(repo) if (repo / CONFIG_NAME).is_file() else Config()
    return make_agent(spec, command or config.agent.command, config), config


def _label(labeller: tuple[Agent, Config], repo: Path, conv: Conversation,
           rules: Rules) -> Labelling:
    from andon.context.label import label_with

    agent, config = labeller
    evidence = Path(tempfile.mkdtemp(prefix="andon-context-label-"))
    done = label_with(agent, config, repo.resolve(), conv, rules, evidence)
    for p in done.problems:
        click.echo(f"label-with: {visible(p)}", err=True)
    if done.run is not None:
        click.echo(f"label-with: {len(done.labels)} name(s) from {visible(done.run['agent'])}; "
                   f"evidence: {evidence}", err=True)
    return done


@click.command("context")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Force the transcript format.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--html", "html_out", type=click.Path(path_type=Path),
              help="Write one self-contained offline HTML page here (one FILE only).")
@click.option("--rule", multiple=True, metavar="PATTERN=COMPONENT",
              help="A segment whose text matches PATTERN (a regex) is COMPONENT; repeatable; "
                   "before andon.toml's [[context.rules]].")
@click.option("--no-near", is_flag=True, help="Skip near-duplicate detection (MinHash).")
@click.option("--label-with", "label_agent", metavar="AGENT",
              help="Ask this agent adapter (claude-code, codex, command, …) to name the large "
                   "segments the rules left generic; its names become rules (off by default; "
                   "docs/context.md).")
@click.option("--command", metavar="CMD", help="The command of --label-with command.")
def context(files: tuple[Path, ...], fmt: str | None, as_json: bool, html_out: Path | None,
            rule: tuple[str, ...], no_near: bool, label_agent: str | None,
            command: str | None) -> None:
    """What filled an agent's context window, turn by turn, for any transcript: Claude Code,
    Codex, Gemini CLI, Aider, SWE-agent, mini-swe-agent, OpenAI or Anthropic messages."""
    from andon.context.analyse import analyse
    from andon.context.html import page
    from andon.context.render import summary

    if html_out and len(files) > 1:
        fail("--html writes one page: give one FILE")
    repo = Path((click.get_current_context().obj or {}).get("repo", "."))
    try:
        rules = _rules(rule, _config_rules(repo))
        labeller = _labeller(repo, label_agent, command) if label_agent else None
    except (UsageError, InvalidValue) as e:
        fail(str(e))
    reports = []
    for f in files:
        try:
            conv = load(f, fmt)
        except TranscriptError as e:
            for p in e.problems:
                click.echo(f"error: {visible(p)}", err=True)
            sys.exit(2)
        labelled = None
        if labeller is not None:
            labelled = _label(labeller, repo, conv, rules)
        report = analyse(conv, [*labelled.rules, *rules] if labelled else rules,
                         near=not no_near)
        if labelled is not None:
            report["labelled"] = {"labels": labelled.labels, "problems": labelled.problems,
                                  "run": labelled.run}
        reports.append(report)
        if html_out:
            html_out.write_text(page(report, conv), encoding="utf-8")
        if not as_json:
            from rich.console import Console

            summary(report, Console(highlight=False, soft_wrap=True))
            if html_out:
                click.echo(f"page: {visible(html_out)}")
    if as_json:
        # ASCII only: the transcripts' C1, bidi and zero-width characters as \u escapes
        click.echo(json.dumps(reports[0] if len(reports) == 1 else reports, indent=1))
