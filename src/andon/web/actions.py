"""The dashboard's writes and its experiment reports, each through the code the CLI uses:
:mod:`andon.decisions` for approve / reject / unblock, ``experiments.compare`` and
``experiments.html.render_html`` for a comparison (``andon compare --html``)."""

from __future__ import annotations

from pathlib import Path

from markupsafe import escape

from .. import decisions
from ..config import load_config
from ..errors import AndonError, PacketError
from ..git.repo import Repo

VERBS = ("approve", "reject", "unblock")
# the note a packet page shows after an action (a fixed text per verb, never from the request)
NOTES = {"approve": "approved: the change was squash-merged (its state is above)",
         "reject": "rejected: back to needs_work; the next attempt's prompt carries the reason",
         "unblock": "unblocked: ready again; the next `andon run` picks it up"}


def decide(repo: Repo, verb: str, packet_id: str, who: str, why: str) -> tuple[bool, str]:
    """Carry out ``verb`` on ``packet_id`` as the CLI does; (done, message). Every
    AndonError (not awaiting a person, not blocked, a runner holds the repository, invalid
    packets, a blank reason) becomes (False, its message) and the store is unchanged."""
    if verb not in VERBS:
        return False, f"unknown action {verb!r}; expected one of {', '.join(VERBS)}"
    try:
        config = load_config(repo.root)
        if verb == "approve":
            state = decisions.approve(repo, config, packet_id, who)
        elif verb == "reject":
            state = decisions.reject(repo, config, packet_id, who, why)
        else:
            decisions.unblock(repo, config, packet_id)
            state = "ready"
    except PacketError as exc:
        return False, "fix the packets first: " + "; ".join(str(p) for p in exc.problems)
    except (AndonError, KeyError) as exc:
        return False, str(exc)
    return True, state


def experiment_list(paths: list[Path]) -> list[dict]:
    """One entry per run table given to ``andon serve --runs``: index, path, conditions,
    rows, or the problem reading it."""
    out = []
    for i, p in enumerate(paths):
        try:
            table = _read(p)
            out.append({"i": i, "path": str(p), "conditions": _conditions(table),
                        "rows": len(table.runs), "problem": None})
        except AndonError as exc:
            out.append({"i": i, "path": str(p), "conditions": [], "rows": 0,
                        "problem": str(exc)})
    return out


def conditions(path: Path) -> list[str]:
    try:
        return _conditions(_read(path))
    except AndonError:
        return []


def compare_html(path: Path, baseline: str, candidate: str | None) -> tuple[int, str]:
    """(HTTP status, page): the comparison report exactly as ``andon compare --html``
    writes it, or a short page with the problem (escaped)."""
    from ..experiments.compare import compare
    from ..experiments.html import render_html
    try:
        table = _read(path)
        if not baseline:
            return 400, "<p>choose a baseline condition</p>"
        return 200, render_html(compare(table, baseline, candidate))
    except AndonError as exc:
        return 400, f"<p>{escape(str(exc))}</p>"


def stored_list(store) -> list[dict]:
    """The experiments ``andon experiment run`` stored: name, source, runs, conditions."""
    from ..experiments.stored import run_table
    out = []
    for e in store.experiments():
        table = run_table(store, e["name"])
        out.append({"name": e["name"], "source": e["source"], "rows": len(table.runs),
                    "conditions": table.conditions(), "updated": e["updated_at"][:19]})
    return out


def stored_conditions(store, name: str) -> list[str] | None:
    """The conditions of stored experiment ``name``; None when there is none by that name."""
    from ..experiments.stored import run_table
    if store.experiment(name) is None:
        return None
    return run_table(store, name).conditions()


def stored_compare_html(store, name: str, baseline: str, candidate: str | None
                        ) -> tuple[int, str] | None:
    """(HTTP status, page) of a stored experiment's comparison, the page ``andon compare
    --html`` writes from its export; None when there is no experiment ``name``."""
    from ..experiments.compare import compare
    from ..experiments.html import render_html
    from ..experiments.stored import run_table
    if store.experiment(name) is None:
        return None
    if not baseline:
        return 400, "<p>choose a baseline condition</p>"
    try:
        return 200, render_html(compare(run_table(store, name), baseline, candidate))
    except AndonError as exc:
        return 400, f"<p>{escape(str(exc))}</p>"


def _read(path: Path):
    from ..experiments.runs import read_csv
    return read_csv(str(path))


def _conditions(table) -> list[str]:
    return table.conditions()
