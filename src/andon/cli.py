"""The command line: parse arguments, call the modules that do the work, print with rich.

Exit statuses (stable, for scripts): 0 success; 1 the line is halted (a blocked packet);
2 bad input (invalid packets or config, unknown packet id, another runner active);
3 preflight failed (the integration head does not pass its own suite).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from . import __version__
from .agents import make_agent
from .config import (CONFIG_NAME, DEFAULT_TOML, PACKETS_CONFTEST, Andon, load_config,
                     packets_dir_despite_errors)
from .errors import AndonError, ConfigError, PacketError, Problem, UsageError
from .packet import check_packets, load_packets, tests_problem
from .report import board, show_packet, status_rows, packet_detail, usage_of_rows
from .runner import EXIT_USAGE, Runner, base_drift, drift_notice, open_store
from .workspace import Repo

# Failure layers whose remedy lies outside the packet (what to fix, for the message).
NOT_THE_PACKET = {"verifier": "reviewer", "environment": "environment",
                  "harness": "cause in the evidence"}

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def _repo(ctx: click.Context, require_commit: bool = True) -> Repo:
    return Repo(Path(ctx.obj["repo"]), require_commit)


def _fail(message: str, status: int = EXIT_USAGE) -> None:
    err.print(f"[red]error:[/red] {escape(message)}", markup=True, soft_wrap=True)
    sys.exit(status)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "--repo", default=".", show_default=True, metavar="PATH",
              help="The git repository to work on.")
@click.version_option(__version__, prog_name="andon")
@click.pass_context
def main(ctx: click.Context, repo: str) -> None:
    """andon runs coding agents on a queue of work packets, each in its own git worktree,
    runs every check itself, and squash-merges only what passed.

    \b
    Typical session:
      andon init                 write andon.toml, make packets/
      andon check                are the packets valid?
      andon run --agent command --command "$PWD/my-agent.sh"
                                 (absolute: the command runs in the worktree)
      andon status               the board
      andon show B01             the evidence for one packet
      andon unblock B01          after editing a blocked packet
    Try `andon demo` to see it all on a built-in example.
    """
    ctx.obj = {"repo": repo}


@main.command()
@click.option("--force", is_flag=True, help="Overwrite an existing andon.toml.")
@click.pass_context
def init(ctx: click.Context, force: bool) -> None:
    """Write andon.toml with defaults for a pytest project and create packets/.

    The store (.andon/) is kept out of git through .git/info/exclude, so nothing andon
    writes ever shows in `git status`.
    """
    repo = _repo_or_fail(ctx, require_commit=False)  # `git init && andon init` works
    path = repo.root / CONFIG_NAME
    if path.exists() and not force:
        _fail(f"{path} exists; use --force to overwrite it")
    path.write_text(DEFAULT_TOML, encoding="utf-8")
    packets = repo.root / "packets"
    packets.mkdir(exist_ok=True)
    if not (packets / "conftest.py").exists():
        (packets / "conftest.py").write_text(PACKETS_CONFTEST)
    open_store(repo).close()
    out.print(f"wrote {path}\n"
              f"created {packets}/ (one folder per packet: packet.md, plant/), with a "
              "conftest.py that keeps plain pytest runs from collecting planted tests\n"
              f"the store is {repo.root / '.andon'}/ (excluded from git)",
              markup=False, soft_wrap=True)
    out.print("next: write a packet, then `andon check` and `andon run`")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print problems as JSON.")
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Validate every packet and andon.toml; print each problem as file:line: message.

    A packet whose spec changed since its spec_commit is reported as stale. Problems in
    andon.toml do not stop the packets from being checked. Exits 2 if anything is wrong.
    Reads only; the store is not touched.
    """
    def report(problems: list[Problem], packets: list, places: list[str]) -> None:
        if as_json:  # always one JSON document, whatever went wrong
            out.print_json(json.dumps({
                "ok": not problems, "packets": [p.id for p in packets],
                "problems": [{"path": str(p.path), "line": p.line, "message": p.message}
                             for p in problems]}))
        else:
            for p in problems:
                out.print(str(p), soft_wrap=True, markup=False)  # globs like src/[ab].py
            if problems:
                out.print(f"{len(problems)} problem(s) in {' and '.join(places)}",
                          markup=False)
            else:
                out.print(f"{len(packets)} packet(s) OK: {', '.join(p.id for p in packets)}")
        sys.exit(EXIT_USAGE if problems else 0)

    try:
        repo = _repo(ctx)
    except AndonError as exc:
        if not as_json:
            _fail(str(exc))
        report([Problem(Path(ctx.obj["repo"]), None, str(exc))], [], [])
    config, config_problems = None, []
    try:
        config = load_config(repo.root)
        packets_dir = config.andon.packets_dir
    except ConfigError as exc:
        config_problems = exc.problems or [Problem(repo.root / CONFIG_NAME, None, str(exc))]
        packets_dir = packets_dir_despite_errors(repo.root)
        if packets_dir is None:
            packets_dir = Andon().packets_dir
            err.print(f"note: {CONFIG_NAME} could not be read; checked the packets in the "
                      f"default folder {packets_dir}/", markup=False, soft_wrap=True)
        else:
            err.print(f"note: {CONFIG_NAME} is invalid; checked the packets in "
                      f"{packets_dir}/ (tiers and stale specs are checked once it is valid)",
                      markup=False, soft_wrap=True)
    packets, problems = check_packets(repo.root / packets_dir, repo.root)
    if config is not None:
        problems += _stale_problems(repo, config, packets, problems)
        if not as_json:
            for p in packets:
                if p.tests == "none":
                    err.print(f"note: {p.id} has no tests (tests = \"none\"): nothing is red "
                              "before the agent and no test must pass after it; "
                              + ("it waits for a person (gate = \"human\")" if p.gate == "human"
                                 else "gate = \"auto\" merges it on the other gates alone"),
                              markup=False, soft_wrap=True)
    problems = sorted(problems, key=lambda pr: (str(pr.path), pr.line or 0, pr.message))
    places = ([CONFIG_NAME] if config_problems else []) + ([f"{packets_dir}/"] if problems
                                                           else [])
    report(config_problems + problems, packets, places)


def _stale_problems(repo: Repo, config, packets, found: list[Problem]) -> list[Problem]:
    """Packets whose spec changed since their ``spec_commit``: `andon run` refuses them as
    stale. The same test as the runner's (git only; the store is not opened). Also a tier
    andon.toml lacks, and (for a packet with no other problem in ``found``: its fields
    decide it) a packet without tests or an opt-in."""
    runner = Runner(repo, config, None, lambda p, stage: None)  # type: ignore[arg-type]
    problems = []
    for p in packets:
        try:
            stages = config.stages_of(p.stages, p.tier)
        except AndonError as exc:
            problems.append(Problem(p.source, p.line_of("tier"), str(exc)))
        else:
            why = tests_problem(p, stages)
            if why and not any(f.path == p.source for f in found):
                problems.append(why)
        try:
            why = runner._stale_reason(p)
        except AndonError as exc:  # git could not answer: say so, and check the rest
            problems.append(Problem(p.source, p.line_of("spec_commit"), str(exc)))
            why = None
        if why:
            problems.append(Problem(p.source, p.line_of("spec_commit"),
                                    f"stale (`andon run` refuses it until spec_commit names "
                                    f"the spec you read): {why.rstrip()}"))
        for src in p.hidden_files.values():
            # a committed hidden test is in every agent's worktree: the hermetic gate refuses it
            try:
                rel = Path(src).resolve().relative_to(repo.root.resolve()).as_posix()
            except ValueError:
                continue
            if repo.file_bytes("HEAD", rel) is not None:
                problems.append(Problem(Path(src), None, "hidden test is committed, so agents "
                                        "can read it: add packets/*/hidden/ to .gitignore and "
                                        f"`git rm --cached {rel}`"))
    return problems


@main.command()
@click.option("--agent", "agent_spec", default=None, metavar="NAME",
              help="Agent adapter: claude-code, codex, aider, gemini (settings in "
                   "[agents.<name>]), command, or scripted:module:function "
                   "(default: [agent] default in andon.toml).")
@click.option("--command", "command", default=None, metavar="SHELL",
              help="Shell command for the command agent; the prompt is on stdin and in "
                   "$ANDON_PROMPT_FILE, cwd is the attempt's worktree.")
@click.option("--reviewer", "reviewer_spec", default=None, metavar="NAME",
              help="Agent adapter for the review stages (default: [agent] reviewer, else the "
                   "same as --agent). A reviewer gets $ANDON_REVIEW_FILE for its JSON.")
@click.option("--reviewer-command", default=None, metavar="SHELL",
              help="Shell command when the reviewer is the command agent.")
@click.option("--only", multiple=True, metavar="ID", help="Run only these packets (repeatable).")
@click.option("--keep-worktrees", is_flag=True, help="Keep each attempt's worktree for debugging.")
@click.pass_context
def run(ctx: click.Context, agent_spec: str | None, command: str | None,
        reviewer_spec: str | None, reviewer_command: str | None, only: tuple[str, ...],
        keep_worktrees: bool) -> None:
    """Drain the packet queue: for each ready packet, a worktree, the agent's stages, the
    gates, the reviews, and a squash merge onto the integration branch if all passed.

    Exits 0 when the queue is drained, 1 when a blocked packet halts the line, 2 on invalid
    input, 3 when the integration branch fails its own suite before anything ran.
    """
    repo = _repo_or_fail(ctx)
    config = _config_or_fail(repo)
    runner = _runner(repo, config, agent_spec, command, reviewer_spec, reviewer_command,
                     keep_worktrees)
    store = runner.store
    dirty = _uncommitted(repo)
    if dirty:  # andon works from commits: say so rather than leave it to be discovered
        out.print(f"note: {len(dirty)} file(s) in {repo.root} have uncommitted changes; "
                  "andon works from commits only, so they are not part of this run",
                  markup=False, soft_wrap=True)
    try:
        report = runner.run(list(only) or None)
    except PacketError as exc:
        for p in exc.problems:
            err.print(str(p), soft_wrap=True, markup=False)
        _fail(f"{len(exc.problems)} problem(s) in the packets; nothing ran (see `andon check`)")
    except AndonError as exc:
        _fail(str(exc))
    # packets a halted or refused run never reached are still there to see, as ready
    out.print(board(store, config, sorted((p.id, p.slug) for p in runner.packets.values())))
    if report.message:
        (err if report.exit_status else out).print(report.message, soft_wrap=True, markup=False)
    if report.preflight:
        for r in report.preflight.runs:
            err.print(f"evidence: {r.log_path}", markup=False, soft_wrap=True)
    sys.exit(report.exit_status)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable board.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """The board: every packet, its state, attempts, last result, and the tokens, cost and
    agent time it used (--json: per packet and for all packets)."""
    repo = _repo_or_fail(ctx)
    config = _config_or_fail(repo)
    store = open_store(repo)
    drift = base_drift(repo, config)
    # packets written since the last run (or before the first) are ready, not absent
    found, _ = check_packets(repo.root / config.andon.packets_dir, repo.root)
    on_disk = sorted((p.id, p.slug) for p in found)
    if as_json:
        rows = status_rows(store, on_disk)
        out.print_json(json.dumps({"integration_branch": config.andon.integration_branch,
                                   "base_drift": drift, "packets": rows,
                                   "usage": usage_of_rows(rows)}))
    else:
        out.print(board(store, config, on_disk))
        if drift:
            out.print(drift_notice(drift), highlight=False)


@main.command()
@click.argument("packet_id")
@click.option("--json", "as_json", is_flag=True, help="Everything, as JSON.")
@click.pass_context
def show(ctx: click.Context, packet_id: str, as_json: bool) -> None:
    """The evidence for one packet: attempts, gates with findings, diff stat, logs."""
    repo = _repo_or_fail(ctx)
    store = open_store(repo)
    detail = packet_detail(store, repo, packet_id)
    if detail is None:
        known = ", ".join(p["id"] for p in store.packets()) or "none (run `andon run` first)"
        _fail(f"no packet {packet_id!r} in the store; known: {known}")
    if as_json:
        out.print_json(json.dumps(detail))
    else:
        show_packet(out, detail)


@main.command()
@click.argument("packet_id")
@click.pass_context
def unblock(ctx: click.Context, packet_id: str) -> None:
    """Put a blocked packet back in the queue (after you have edited it)."""
    repo = _repo_or_fail(ctx)
    config = _config_or_fail(repo)
    store = open_store(repo)
    row = store.packet(packet_id)
    if row is None:
        _fail(f"no packet {packet_id!r} in the store")
    if row["state"] != "blocked":
        _fail(f"packet {packet_id} is {row['state']}, not blocked")
    try:
        packets = {p.id: p for p in load_packets(repo.root / config.andon.packets_dir,
                                                 repo.root)}
    except PacketError as exc:
        for p in exc.problems:
            err.print(str(p), soft_wrap=True, markup=False)
        _fail("fix the packets first; the packet stays blocked")
    p = packets.get(packet_id)
    if p is None:
        _fail(f"packet {packet_id} no longer exists in {config.andon.packets_dir}/")
    edited = p.content_sha != row["content_sha"]
    attempts = store.attempts(packet_id)
    layer = attempts[-1]["failure_layer"] if attempts else None
    store.upsert_packet(p.id, p.slug, str(p.source), p.content_sha,
                        p.model_dump(mode="json", by_alias=True))
    store.transition(packet_id, "ready", "unblocked", data={"packet_edited": edited})
    out.print(f"{packet_id} is ready again; its attempt count starts afresh")
    if layer in NOT_THE_PACKET:
        # the advice was to fix the reviewer or the environment: an unchanged packet is right
        out.print(f"it was blocked by a {layer} failure, not by the packet: if you fixed "
                  f"the {NOT_THE_PACKET[layer]}, the next run tries again", markup=False)
    elif not edited:
        err.print(f"warning: {p.source} is unchanged since it was blocked; the same failure "
                  "will probably block it again", markup=False)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="The findings as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Which agent CLIs are installed (on PATH), their versions, and whether their
    credential variables are set (values are never shown). Exits 0: it only reports."""
    from .config import load_config
    from .doctor import check_agents, render, report_json
    config = None
    try:
        config = load_config(Path(ctx.obj["repo"]))
    except AndonError as exc:  # no (valid) andon.toml here: report with the defaults
        if (Path(ctx.obj["repo"]) / "andon.toml").exists():
            err.print(f"note: {exc}; reporting without its [agents] settings",
                      markup=False, soft_wrap=True)
    checks = check_agents(config)
    if as_json:
        out.print_json(json.dumps(report_json(checks)))
    else:
        render(out, checks)


@main.command()
@click.option("--dir", "where", type=click.Path(path_type=Path), default=None,
              help="Build the demo here instead of a temporary directory (must not exist).")
@click.option("--agent", type=click.Choice(["scripted", "claude-code"]), default="scripted",
              help="claude-code: the packets go through the real Claude Code, against a "
                   "scripted model server on 127.0.0.1 (no account needed).")
def demo(where: Path | None, agent: str) -> None:
    """Build a small example project with packets and run it with scripted agents:
    honest ones merged, cheats caught, a repeated failure halting the line.

    Exits 0 only if every outcome is the expected one.
    """
    from .demo import run_demo
    sys.exit(run_demo(out, where, agent))


def _check_command_path(repo: Repo, command: str | None, what: str) -> None:
    """A command runs in the attempt's worktree: a relative script that exists here but is
    not committed on the integration head will not be there. Say so before anything runs."""
    if not command:
        return
    try:
        first = shlex.split(command)[0]
    except (ValueError, IndexError):
        return
    if "/" not in first or first.startswith("/") or first.startswith("$"):
        return
    here = (Path.cwd() / first).resolve()
    rel = here.relative_to(repo.root).as_posix() if here.is_relative_to(repo.root) else None
    tracked = rel is not None and repo.git("ls-files", "--", rel).strip() != ""
    if here.exists() and not tracked:
        _fail(f"{what} {command!r}: {first} is not committed, and the command runs in the "
              f"attempt's worktree, where it will not exist; use the absolute path {here}")


def _uncommitted(repo: Repo) -> list[str]:
    """Paths with uncommitted changes or untracked (not ignored) in the user's checkout."""
    fields = iter(repo.git("status", "--porcelain", "-z", "--untracked-files=all",
                           check=False).split("\0"))
    paths = []
    for entry in fields:
        if len(entry) > 3:
            paths.append(entry[3:])
            if "R" in entry[:2] or "C" in entry[:2]:
                next(fields, None)  # a rename's source path follows as its own field
    return paths


def _runner(repo: Repo, config, agent_spec: str | None = None, command: str | None = None,
            reviewer_spec: str | None = None, reviewer_command: str | None = None,
            keep_worktrees: bool = False) -> Runner:
    _check_command_path(repo, command or config.agent.command, "--command")
    _check_command_path(repo, reviewer_command or config.agent.reviewer_command,
                        "--reviewer-command")
    try:
        agent = make_agent(agent_spec or config.agent.default, command or config.agent.command,
                           config)
        rspec = reviewer_spec or config.agent.reviewer
        rcommand = reviewer_command or config.agent.reviewer_command
        if rspec:
            reviewer = make_agent(rspec, rcommand or command or config.agent.command, config)
        elif rcommand:
            reviewer = make_agent("command", rcommand, config)
        else:
            reviewer = agent
    except ValueError as exc:
        _fail(str(exc))
    return Runner(repo, config, open_store(repo),
                  lambda p, stage: reviewer if stage.startswith("review") else agent,
                  echo=lambda s: out.print(s, soft_wrap=True, markup=False),
                  keep_worktrees=keep_worktrees)


@main.command()
@click.argument("packet_id")
@click.pass_context
def approve(ctx: click.Context, packet_id: str) -> None:
    """Approve a packet that awaits a person (gate = "human"): squash-merge it now.

    Look first: `andon show ID` has the diff, the gate evidence, the reviewers' verdicts and
    findings. Exits 0 when merged, 1 if the merged result failed its checks, 2 if the packet
    is not awaiting a person.
    """
    repo = _repo_or_fail(ctx)
    config = _config_or_fail(repo)
    runner = _decision_runner(repo, config)
    try:
        state = runner.approve(packet_id, who=_who())
    except AndonError as exc:
        _fail(str(exc))
    out.print(f"{packet_id}: {state}")
    sys.exit(0 if state == "done" else 1)


@main.command()
@click.argument("packet_id")
@click.option("--why", required=True, help="The reason; the next attempt's prompt carries it.")
@click.pass_context
def reject(ctx: click.Context, packet_id: str, why: str) -> None:
    """Reject a packet that awaits a person: back to needs_work, with your reason as
    evidence for the next attempt."""
    repo = _repo_or_fail(ctx)
    config = _config_or_fail(repo)
    runner = _decision_runner(repo, config)
    try:
        state = runner.reject(packet_id, who=_who(), why=why)
    except AndonError as exc:
        _fail(str(exc))
    out.print(f"{packet_id}: {state}; `andon run` will try again with your reason")


def _decision_runner(repo: Repo, config) -> Runner:
    def no_agent(packet, stage):
        raise UsageError("a person's decision runs no agent")
    return Runner(repo, config, open_store(repo), no_agent,
                  echo=lambda s: out.print(s, soft_wrap=True, markup=False))


def _who() -> str:
    import getpass
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "a person"


def _repo_or_fail(ctx: click.Context, require_commit: bool = True) -> Repo:
    try:
        return _repo(ctx, require_commit)
    except AndonError as exc:
        _fail(str(exc))
        raise  # unreachable


def _config_or_fail(repo: Repo):
    try:
        return load_config(repo.root)
    except UsageError as exc:
        _fail(str(exc))
        raise
