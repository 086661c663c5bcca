"""The dashboard as a Starlette application: pages, the board's live fragment, the three
actions and the package's own static files.

Every page needs the server's token (see guard.py); the store is opened read-only for
pages and written only by the actions, through :mod:`andon.decisions` (the CLI's code).
"""

from __future__ import annotations

import getpass
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from ..git.repo import Repo
from ..safe_text import visible
from . import actions, diffview, guard, stages, views

STATIC = {  # name → media type; only these names are ever served
    "andon.js": "text/javascript", "andon.css": "text/css"}


@dataclass
class Settings:
    """What one server serves: the repository, its token and the run tables (CSV) of the
    Experiments page, by position (a request names an index, never a path)."""

    repo_root: Path
    token: str = field(default_factory=guard.new_token)
    experiments: list[Path] = field(default_factory=list)

    @property
    def db(self) -> Path:
        return self.repo_root / ".andon" / "andon.db"


class RowsCache:
    """The board's rows as last rendered, under the store's change mark they were read at;
    shared by the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mark: str | None = None
        self._html = Markup("")

    def get(self, mark: str) -> Markup | None:
        with self._lock:
            return self._html if mark == self._mark else None

    def put(self, mark: str, html: Markup) -> None:
        with self._lock:
            self._mark, self._html = mark, html


def _inert(value: object) -> object:
    """Every ``{{ }}`` value before autoescape: text with its controls, bidi and zero-width
    characters shown (safe_text.visible), so that what an agent wrote cannot reorder or hide
    itself on the page; HTML the views made (Markup: diffview) did so itself."""
    return visible(value, lines=True) if isinstance(value, str) and not isinstance(
        value, Markup) else value


def _env(root: str) -> Environment:
    env = Environment(loader=PackageLoader("andon.web", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      finalize=_inert)
    env.globals.update(urlencode=urlencode, root=root)
    # a link the views made: an anchor on the page, or a path under this server's root
    env.filters["href"] = lambda link: link if link.startswith("#") else root + link
    return env


class Guard(BaseHTTPMiddleware):
    def __init__(self, app, settings: Settings):
        super().__init__(app)
        self.settings = settings

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if not guard.host_allowed(request.headers.get("host")):
            return _secure(_plain("refused: unknown Host (use 127.0.0.1)", 421))
        path = request.url.path
        if path.startswith("/static/") or path == "/favicon.ico":
            return _secure(await call_next(request))
        if not guard.same(guard.token_of(path), self.settings.token):
            return _secure(_plain("refused: no token or a wrong one; open the URL `andon "
                                  "serve` printed (…/t/TOKEN/)", 403))
        return _secure(await call_next(request))


def _plain(text: str, status: int) -> Response:
    return Response(text, status, media_type="text/plain; charset=utf-8")


def _secure(resp: Response) -> Response:
    resp.headers.setdefault("Content-Security-Policy", guard.CSP)
    for k, v in guard.HEADERS.items():
        resp.headers.setdefault(k, v)
    return resp


def create_app(settings: Settings) -> Starlette:
    """The ASGI application serving ``settings.repo_root``'s store."""
    root = f"/t/{settings.token}"
    env = _env(root)
    repo = Repo(settings.repo_root)
    csrf = guard.csrf_value(settings.token)
    pygments_css = diffview.style_css()
    chain_status = stages.ChainStatus()

    def page(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(csrf=csrf, **ctx), status)

    def store():
        return views.open_read_only(settings.db)

    def with_store(fn):
        s = store()
        try:
            return fn(s)
        finally:
            s.close()

    rows_cache = RowsCache()
    packet_files = views.PacketFiles(settings.repo_root)

    def rows_mark(s) -> tuple[str, views.OnDisk]:
        # the store's mark and the packet files': a file removed or added moves the board
        # (removed, not run yet) as much as a new event does
        files = packet_files.read()
        return '"' + s.change_mark() + "-" + files.mark + '"', files

    def rows_html(s) -> tuple[str, Markup]:
        # the mark is read before the rows, so a change between the two is fetched at the
        # next poll, never missed; rows rendered for one mark serve every request until the
        # store or the packets folder moves (each open page polls every 2 s)
        mark, files = rows_mark(s)
        html = rows_cache.get(mark)
        if html is None:
            html = Markup(env.get_template("board_rows.html").render(
                b=views.board(s, files.packets, files.complete), csrf=csrf))
            rows_cache.put(mark, html)
        return mark, html

    def board(request: Request) -> Response:
        # the rows' mark goes into the page, so its first poll gets 304 unless the store moved
        mark, rows = with_store(rows_html)
        return page("board.html", rows=rows, mark=mark, nav="board")

    def board_rows(request: Request) -> Response:
        # when the store has nothing new since the page's mark, answer without the rows
        def fragment(s):
            mark, _ = rows_mark(s)
            if request.headers.get("if-none-match") == mark:
                return Response(status_code=304, headers={"ETag": mark})
            mark, rows = rows_html(s)
            return HTMLResponse(rows, headers={"ETag": mark})
        return with_store(fragment)

    def packet(request: Request) -> Response:
        pid = request.path_params["pid"]
        d = with_store(lambda s: views.packet(s, repo, pid))
        if d is None:
            return page("message.html", 404, title="no such packet",
                        message=f"no packet {pid!r} in the store")
        return page("packet.html", d=d, nav="board", note=actions.NOTES.get(
            request.query_params.get("done", "")))

    def _attempt(pid: str, n: int) -> dict[str, Any] | None:
        def find(s):
            return next((a for a in s.attempts(pid) if a["n"] == n), None)
        return with_store(find)

    def run_log(request: Request) -> Response:
        p = request.path_params
        gates = with_store(lambda s: [g for a in s.attempts(p["pid"]) if a["n"] == p["n"]
                                      for g in s.gate_results(a["id"])])
        try:
            run = gates[p["gi"]]["evidence"].get("runs", [])[p["ri"]]
        except IndexError:
            return page("message.html", 404, title="no such run", message="no such run")
        found = views.evidence_file(repo, run.get("log_path"))
        text = found[1] if found else (run.get("output_tail") or "")
        return page("log.html", pid=p["pid"], n=p["n"], gate=gates[p["gi"]], run=run,
                    lines=text.splitlines(), whole=found is not None)

    def transcript(request: Request) -> Response:
        p = request.path_params
        stages = with_store(lambda s: [st for a in s.attempts(p["pid"]) if a["n"] == p["n"]
                                       for st in s.stage_runs(a["id"])])
        if not 0 <= p["si"] < len(stages):
            return page("message.html", 404, title="no such stage", message="no such stage")
        st = stages[p["si"]]
        found = views.evidence_file(repo, st.get("transcript_path"))
        return page("transcript.html", pid=p["pid"], n=p["n"], stage=st,
                    text=found[1] if found else None)

    def context(request: Request) -> Response:
        # the stage is found by its position in the store; the file is the one the store
        # recorded, read only inside .andon/; the page (inline script and style, agent text
        # inside) runs sandboxed in an opaque origin that can reach nothing
        p = request.path_params
        stages_of = with_store(lambda s: [st for a in s.attempts(p["pid"]) if a["n"] == p["n"]
                                          for st in s.stage_runs(a["id"])])
        path = (views.evidence_path(repo, stages_of[p["si"]].get("transcript_path"))
                if 0 <= p["si"] < len(stages_of) else None)
        html = stages.context_page(path) if path is not None else None
        if html is None:
            return page("message.html", 404, title="no context view",
                        message="this stage has no transcript andon.context can read")
        resp = HTMLResponse(html)
        resp.headers["Content-Security-Policy"] = guard.CONTEXT_CSP
        return resp

    def events(request: Request) -> Response:
        q = request.query_params
        e = with_store(lambda s: views.events(s, q.get("packet") or None, q.get("kind") or None,
                                              chain_status=chain_status))
        return page("events.html", e=e, packet=q.get("packet", ""), kind=q.get("kind", ""),
                    nav="events")

    def experiments(request: Request) -> Response:
        return page("experiments.html", tables=actions.experiment_list(settings.experiments),
                    stored=with_store(actions.stored_list), nav="experiments")

    def stored(request: Request) -> Response:
        name, q = request.path_params["name"], request.query_params
        conditions = with_store(lambda s: actions.stored_conditions(s, name))
        if conditions is None:
            return page("message.html", 404, title="no such experiment",
                        message=f"no experiment {name!r} in the store")
        return page("experiment.html", stored_name=name, path=f"experiment {name}",
                    baseline=q.get("baseline", ""), candidate=q.get("candidate", ""),
                    conditions=conditions, nav="experiments")

    def stored_report(request: Request) -> Response:
        name, q = request.path_params["name"], request.query_params
        found = with_store(lambda s: actions.stored_compare_html(
            s, name, q.get("baseline", ""), q.get("candidate") or None))
        if found is None:
            return _plain("no such experiment", 404)
        resp = HTMLResponse(found[1], found[0])
        resp.headers["Content-Security-Policy"] = guard.REPORT_CSP
        return resp

    def experiment(request: Request) -> Response:
        i, q = request.path_params["i"], request.query_params
        if not 0 <= i < len(settings.experiments):
            return page("message.html", 404, title="no such run table", message="no such table")
        return page("experiment.html", i=i, path=str(settings.experiments[i]),
                    baseline=q.get("baseline", ""), candidate=q.get("candidate", ""),
                    conditions=actions.conditions(settings.experiments[i]), nav="experiments")

    def experiment_report(request: Request) -> Response:
        i, q = request.path_params["i"], request.query_params
        if not 0 <= i < len(settings.experiments):
            return _plain("no such table", 404)
        status, html = actions.compare_html(settings.experiments[i], q.get("baseline", ""),
                                            q.get("candidate") or None)
        resp = HTMLResponse(html, status)
        resp.headers["Content-Security-Policy"] = guard.REPORT_CSP
        return resp

    async def act(request: Request) -> Response:
        form = await _form(request)
        if not guard.same(str(form.get("csrf") or ""), csrf) or not guard.origin_allowed(
                request.headers.get("origin"), request.headers.get("host")):
            return _plain("refused: the form's CSRF value or the Origin is wrong", 403)
        pid, verb = request.path_params["pid"], request.path_params["verb"]
        from starlette.concurrency import run_in_threadpool
        ok, message = await run_in_threadpool(
            actions.decide, repo, verb, pid, _who(), str(form.get("why") or ""))
        if not ok:
            return page("message.html", 409, title=f"{verb} {pid}: refused", message=message,
                        back=f"{root}/packets/{pid}")
        return RedirectResponse(f"{root}/packets/{pid}?" + urlencode({"done": verb}), 303)

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "pygments.css":
            return Response(pygments_css, media_type="text/css")
        if name not in STATIC:
            return _plain("not found", 404)
        body = resources.files("andon.web").joinpath("static", name).read_bytes()
        return Response(body, media_type=STATIC[name])

    def favicon(request: Request) -> Response:
        return Response(status_code=204)

    pages = [
        Route("/", board), Route("/board/rows", board_rows),
        Route("/packets/{pid}", packet),
        Route("/packets/{pid}/attempts/{n:int}/gates/{gi:int}/runs/{ri:int}/log", run_log),
        Route("/packets/{pid}/attempts/{n:int}/stages/{si:int}/transcript", transcript),
        Route("/packets/{pid}/attempts/{n:int}/stages/{si:int}/context", context),
        Route("/packets/{pid}/{verb:str}", act, methods=["POST"]),
        Route("/events", events), Route("/experiments", experiments),
        Route("/experiments/{i:int}", experiment),
        Route("/experiments/{i:int}/report", experiment_report),
        Route("/experiments/stored/{name}", stored),
        Route("/experiments/stored/{name}/report", stored_report),
    ]
    routes = [Mount(root, routes=pages), Route("/static/{name}", static),
              Route("/favicon.ico", favicon)]
    return Starlette(routes=routes, middleware=[Middleware(Guard, settings=settings)])


async def _form(request: Request) -> dict[str, str]:
    """An url-encoded form body (what the pages' forms send), first value of each field;
    parsed here so that no multipart parser is needed. Another content type is empty."""
    if request.headers.get("content-type", "").split(";")[0].strip() != (
            "application/x-www-form-urlencoded"):
        return {}
    body = (await request.body())[:100_000].decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body).items()}


def _who() -> str:
    try:
        return f"{getpass.getuser()} (andon serve)"
    except (KeyError, OSError):
        return "a person (andon serve)"
