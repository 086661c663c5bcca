"""The command line: parse arguments, call the modules that do the work, print with rich.

Exit statuses (stable, for scripts): 0 success; 1 the line is halted (a blocked packet);
2 bad input (invalid packets or config, unknown packet id, another runner active);
3 preflight failed (the integration head does not pass its own suite); 141 the reader of the
output went away (`andon status | head -1`: 128 + SIGPIPE, as a program the signal ended).

One module per group of verbs: ``setup`` (init, check, doctor, demo), ``line`` (run, status,
show), ``decide`` (approve, reject, unblock), ``experiments`` (compare, experiment
run/status/export), ``validate``, ``serve`` (the dashboard), ``verify`` (the hash chain);
``common`` holds what they share. Each command imports the modules that do its work in its
own body, so that ``andon --help`` and ``andon status`` load no runner, gates or contracts
(0.9 s of imports before: tests/test_cli_start.py, benchmarks/cli_start.py).
"""

from __future__ import annotations

from typing import Any

import click

from .. import __version__
from . import decide, experiments, line, setup, worker
from .common import broken_pipe
from .context import context
from .grill import grill
from .plan import plan
from .serve import serve
from .validate import validate
from .verify import verify


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # a plain write (rich's own: common.out.on_broken_pipe)
            broken_pipe()
        except click.NoSuchOption as exc:
            # as with git's -C, the repository is named before the command, not after it
            if exc.option_name not in ("-C", "--repo") or not ctx.invoked_subcommand:
                raise
            raise click.NoSuchOption(
                exc.option_name, f"{exc.message} -C/--repo goes before the command: andon -C "
                f"PATH {ctx.invoked_subcommand} ...", exc.possibilities, exc.ctx) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
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


for command in (setup.init, setup.check, line.run, line.status, line.show, decide.unblock,
                setup.doctor, setup.demo, decide.approve, decide.reject, experiments.compare,
                validate, context, serve, experiments.experiment, verify, plan, grill):
    main.add_command(command)
main.add_command(worker.worker)

__all__ = ["main"]
