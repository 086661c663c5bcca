"""``andon serve``: the dashboard on 127.0.0.1 (the package ``andon.web``)."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from . import common
from .common import fail, repo_or_fail


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port on 127.0.0.1; 0 picks a free one.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.option("--runs", "runs", multiple=True, type=click.Path(path_type=Path, dir_okay=False),
              metavar="RUNS.csv", help="A run table for the Experiments page (repeatable).")
@click.pass_context
def serve(ctx: click.Context, port: int, open_browser: bool, runs: tuple[Path, ...]) -> None:
    """The dashboard: the board (live), each packet's evidence and diff, the events, the
    experiments; approve, reject and unblock from the page.

    Listens on 127.0.0.1 only. The printed URL carries a token made for this server: without
    it no page opens and no action is taken. Needs the web extra (pip install 'andon[web]').
    Exits 2 when the extra is missing, there is no store yet, or the port is taken.
    """
    from ..web import missing
    if lacking := missing():
        fail(f"andon serve needs the web extra: pip install 'andon[web]' (missing: "
             f"{', '.join(lacking)})")
    repo = repo_or_fail(ctx)
    run_dashboard(repo.root, port, open_browser, list(runs))


def run_dashboard(root: Path, port: int, open_browser: bool, runs: list[Path]) -> None:
    """Serve ``root``'s store until Ctrl-C, printing the URL with its token first."""
    from ..web.app import Settings
    from ..web.server import bind, serve_forever, urls
    db = root / ".andon" / "andon.db"
    if not db.is_file():
        fail(f"no store at {db}: run `andon init` (then `andon run`) or `andon demo` first")
    for r in runs:
        if not r.is_file():
            fail(f"--runs {r}: no such file")
    settings = Settings(root, experiments=[r.resolve() for r in runs])
    try:
        sock = bind(port)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; try --port 0")
    _, login = urls(sock, settings)
    common.out.print(f"andon serve: {root}\nopen {login}\n(the token in this URL is the "
                     "only way in; Ctrl-C stops the server)", markup=False, soft_wrap=True)
    if open_browser:
        webbrowser.open(login)
    try:
        serve_forever(settings, sock)
    except KeyboardInterrupt:
        pass
