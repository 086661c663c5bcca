"""A scripted model server on 127.0.0.1: the Anthropic Messages API answered from a script.

A real agent CLI (Claude Code) pointed at it with ``ANTHROPIC_BASE_URL`` runs its own tools
in andon's worktree without any account: each answer of the agent's loop is the next turn of
the script — a tool call (``{"tool": "Write", "input": {...}}``) or a text
(``{"text": "..."}``) — with the usage figures the turn gives (Anthropic convention:
``input_tokens`` not counting cache, ``cache_read_input_tokens``,
``cache_creation_input_tokens``, ``output_tokens``). Used by the end-to-end tests of the real
CLIs and by ``andon demo --agent claude-code``.

Which requests take a turn: those that offer tools (the agent's own loop). Side requests the
CLI makes for itself (a title, a quota probe: no ``tools``) get a one-word text with
``SIDE_USAGE``; they are logged like the rest, so a test can add up exactly what was sent.
(Responses and Chat Completions requests all take a turn: Codex and Aider make no side
requests there.) After the last turn every loop request is answered with the text ``"done"``.

Failure scripts (``Script.fail``): ``"401"`` (authentication_error for ever), ``"500"``
(api_error for ever), ``"429-then-200"`` (one rate_limit_error with ``retry-after: 0``, then
the script), ``"hang"`` (accepts the request and never answers, until the server stops).

Endpoints: ``POST /v1/messages`` (SSE when ``"stream": true``: message_start,
content_block_start / ping / content_block_delta / content_block_stop per block,
message_delta with the stop reason and the usage, message_stop; else one JSON message),
``POST /v1/messages/count_tokens`` (``{"input_tokens": n}``, n = request bytes / 4),
``GET /v1/models`` (the models the script names), ``POST /v1/responses``
(:mod:`andon.demo.responses_api`), ``POST /v1/chat/completions`` (:mod:`andon.demo.chat_api`),
``POST /v1beta/models/<model>:generateContent`` and ``:streamGenerateContent``
(:mod:`andon.demo.gemini_api`); anything else 404 with an Anthropic error
body. Every request is logged (:attr:`ModelServer.log`: method, path, headers without
credentials, JSON body, the status and the usage answered).

Sources: Anthropic Messages API and its streaming events,
https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/docs/build-with-claude/streaming ; errors,
https://docs.anthropic.com/en/api/errors .
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import InvalidArgument
from . import chat_api, gemini_api, responses_api

FAILS = ("401", "500", "429-then-200", "hang")
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
              "cache_creation_input_tokens")
DEFAULT_USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0}
SIDE_USAGE = {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 0,
              "cache_creation_input_tokens": 0}
SECRET_HEADERS = {"x-api-key", "authorization", "cookie"}


@dataclass
class Script:
    """What the server answers. ``turns``: dicts with ``tool`` + ``input`` or ``text``, and
    optional ``usage`` (missing keys from ``DEFAULT_USAGE``) and ``model`` (default: the
    model the request named). ``fail``: one of ``FAILS`` or None.

    Raises:
        ValueError: a turn with neither ``tool`` nor ``text``, an unknown usage key or a
            negative figure, or an unknown ``fail`` — naming the turn.
    """

    turns: list[dict[str, Any]] = field(default_factory=list)
    fail: str | None = None
    # Instead of one list for the whole server: the turns of the conversation a request
    # belongs to, chosen from the request itself (Anthropic only); the turn to answer is the
    # number of assistant messages the request already holds. Used by the demo.
    chooser: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None

    def __post_init__(self) -> None:
        if self.fail is not None and self.fail not in FAILS:
            raise InvalidArgument(f"fail: expected one of {', '.join(FAILS)}, got {self.fail!r}")
        for i, t in enumerate(self.turns, 1):
            if ("tool" in t) == ("text" in t):
                raise InvalidArgument(f"turn {i}: expected exactly one of `tool` or `text`, got "
                                 f"{sorted(t)}")
            if "tool" in t and not isinstance(t.get("input", {}), (dict, str)):
                raise InvalidArgument(f"turn {i}: `input` must be an object (or the text of a "
                                 f"freeform tool), got {t['input']!r}")
            for k, v in (t.get("usage") or {}).items():
                if k not in USAGE_KEYS or not isinstance(v, int) or v < 0:
                    raise InvalidArgument(f"turn {i}: usage {k}={v!r}: expected one of "
                                     f"{', '.join(USAGE_KEYS)} with a count >= 0")

    @classmethod
    def load(cls, path: Path) -> Script:
        """A script from a JSON file ``{"turns": [...], "fail": ...}``."""
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(list(data.get("turns", [])), data.get("fail"))


def usage_of(turn: dict[str, Any]) -> dict[str, int]:
    return {**DEFAULT_USAGE, **(turn.get("usage") or {})}


class ModelServer:
    """The server, in a thread of this process, on a free port of 127.0.0.1.

    ``with ModelServer(script) as s:`` — ``s.url`` is the base URL to give the CLI
    (``ANTHROPIC_BASE_URL``); ``s.log`` the requests so far (dicts, in order). The socket
    listens before ``start`` returns, so a client may connect at once.
    """

    def __init__(self, script: Script):
        self.script = script
        self.log: list[dict[str, Any]] = []
        self._next = 0
        self._failed = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = Starlette(routes=[
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1beta/models/{target}", self._gemini, methods=["POST"]),
            Route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "DELETE"]),
        ])
        config = uvicorn.Config(app, log_level="error", lifespan="off",
                                timeout_graceful_shutdown=1, access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="andon-modelserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True   # a hanging request must not hold the stop
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what was sent --------------------------------------------------------------------

    def sent_usage(self) -> dict[str, dict[str, int]]:
        """Per model, the sum of the usage answered with status 200 (as the server sent
        it, Anthropic convention)."""
        out: dict[str, dict[str, int]] = {}
        for r in self.log:
            if r.get("usage") and r["status"] == 200:
                m = out.setdefault(r["model"], dict.fromkeys(USAGE_KEYS, 0))
                for k in USAGE_KEYS:
                    m[k] += r["usage"][k]
        return out

    # -- endpoints ------------------------------------------------------------------------

    async def _entry(self, request: Request) -> tuple[dict[str, Any], Any]:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        entry = {"method": request.method, "path": request.url.path,
                 "query": str(request.url.query),
                 "headers": {k: v for k, v in request.headers.items()
                             if k.lower() not in SECRET_HEADERS},
                 "body": body, "status": None, "usage": None, "model": None}
        with self._lock:
            self.log.append(entry)
        return entry, body

    async def _failure(self, entry: dict[str, Any]) -> tuple[int, str, str] | None:
        """What the failure script answers this request: (status, error type, message), or
        None for a normal answer. ``hang`` never returns."""
        fail = self.script.fail
        if fail == "hang":
            entry["status"] = "hang"
            await asyncio.Event().wait()   # until the server is stopped
        if fail == "401":
            return 401, "authentication_error", "invalid x-api-key"
        if fail == "500":
            return 500, "api_error", "Internal server error"
        if fail == "429-then-200":
            with self._lock:
                first = self._failed == 0
                self._failed += 1
            if first:
                return 429, "rate_limit_error", "Number of requests has exceeded your rate limit"
        return None

    async def _messages(self, request: Request) -> Response:
        entry, body = await self._entry(request)
        if not isinstance(body, dict):
            return self._error(entry, 400, "invalid_request_error", "body is not JSON")
        failure = await self._failure(entry)
        if failure is not None:
            return self._error(entry, *failure, headers={"retry-after": "0"}
                               if failure[0] == 429 else None)
        turn = self._take(body, side=not body.get("tools"))
        model = turn.get("model") or body.get("model") or "claude-scripted"
        usage = SIDE_USAGE if turn.get("side") else usage_of(turn)
        entry.update(status=200, usage=dict(usage), model=model)
        msg_id = f"msg_scripted_{next(self._ids):04d}"
        if "tool" in turn:
            block = {"type": "tool_use", "id": f"toolu_scripted_{next(self._ids):04d}",
                     "name": turn["tool"], "input": turn.get("input", {})}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": turn["text"]}
            stop = "end_turn"
        if body.get("stream"):
            return StreamingResponse(_sse(msg_id, model, block, stop, usage),
                                     media_type="text/event-stream")
        return JSONResponse({"id": msg_id, "type": "message", "role": "assistant",
                             "model": model, "content": [block], "stop_reason": stop,
                             "stop_sequence": None, "usage": dict(usage)})

    async def _openai_turn(self, request: Request
                           ) -> Response | tuple[dict, dict, str, dict, int]:
        """What both OpenAI APIs do before they answer: read the JSON body, play a scripted
        failure, take the next turn and log it. Returns the error response, or (body, turn,
        model, usage, response number)."""
        entry, body = await self._entry(request)
        if not isinstance(body, dict):
            return self._json_error(entry, 400, "body is not JSON")
        failure = await self._failure(entry)
        if failure is not None:
            return self._json_error(entry, failure[0], failure[2])
        turn = self._take(body, side=False)
        model = turn.get("model") or body.get("model") or "gpt-scripted"
        usage = usage_of(turn)
        entry.update(status=200, usage=dict(usage), model=model)
        return body, turn, model, usage, next(self._ids)

    async def _responses(self, request: Request) -> Response:
        """OpenAI Responses API (Codex): every request is a turn of the agent's loop."""
        taken = await self._openai_turn(request)
        if isinstance(taken, Response):
            return taken
        body, turn, model, usage, n = taken
        if body.get("stream"):
            return StreamingResponse(responses_api.sse(turn, model, usage, n),
                                     media_type="text/event-stream")
        return JSONResponse(responses_api.response(turn, model, usage, n))

    async def _chat(self, request: Request) -> Response:
        """OpenAI Chat Completions (Aider through litellm): every request is a turn."""
        taken = await self._openai_turn(request)
        if isinstance(taken, Response):
            return taken
        body, turn, model, usage, n = taken
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(chat_api.sse(turn, model, usage, n, include),
                                     media_type="text/event-stream")
        return JSONResponse(chat_api.completion(turn, model, usage, n))

    async def _gemini(self, request: Request) -> Response:
        """Gemini API (Gemini CLI): requests that offer tools take a turn; the others (its
        model router's classifier, ...) get the side answer."""
        entry, body = await self._entry(request)
        model, _, method = request.path_params["target"].partition(":")
        if method not in ("generateContent", "streamGenerateContent") \
                or not isinstance(body, dict):
            entry["status"] = 404
            return JSONResponse(gemini_api.error_body(404, f"no {method!r} here"), 404)
        failure = await self._failure(entry)
        if failure is not None:
            entry["status"] = failure[0]
            return JSONResponse(gemini_api.error_body(failure[0], failure[2]), failure[0])
        turn = self._take(body, side=not body.get("tools"))
        if turn.get("side"):
            turn = {**turn, "text": gemini_api.side_text(body)}
        model = turn.get("model") or model
        usage = SIDE_USAGE if turn.get("side") else usage_of(turn)
        entry.update(status=200, usage=dict(usage), model=model)
        answer = gemini_api.response(turn, model, usage, next(self._ids))
        if method == "streamGenerateContent":
            return StreamingResponse(gemini_api.sse(answer), media_type="text/event-stream")
        return JSONResponse(answer)

    def _json_error(self, entry: dict, status: int, message: str) -> Response:
        entry["status"] = status
        return JSONResponse(responses_api.error_body(status, message), status_code=status,
                            headers={"retry-after": "0"} if status == 429 else None)

    def _take(self, body: dict[str, Any], side: bool) -> dict[str, Any]:
        if side:
            return {"text": "ok", "side": True}
        if self.script.chooser is not None:
            turns = self.script.chooser(body)
            i = sum(1 for m in body.get("messages") or [] if isinstance(m, dict)
                    and m.get("role") == "assistant")
            return turns[i] if i < len(turns) else {"text": "done"}
        with self._lock:
            i = self._next
            self._next += 1
        return self.script.turns[i] if i < len(self.script.turns) else {"text": "done"}

    async def _count_tokens(self, request: Request) -> Response:
        entry, body = await self._entry(request)
        entry["status"] = 200
        return JSONResponse({"input_tokens": max(1, len(json.dumps(body)) // 4)})

    async def _models(self, request: Request) -> Response:
        entry, _ = await self._entry(request)
        entry["status"] = 200
        names = sorted({t["model"] for t in self.script.turns if t.get("model")}) \
            or ["claude-scripted"]
        return JSONResponse({"data": [{"type": "model", "id": n, "display_name": n,
                                       "created_at": "2025-01-01T00:00:00Z"} for n in names],
                             "has_more": False, "first_id": names[0], "last_id": names[-1]})

    async def _other(self, request: Request) -> Response:
        entry, _ = await self._entry(request)
        return self._error(entry, 404, "not_found_error", f"no {request.url.path} here")

    def _error(self, entry: dict, status: int, kind: str, message: str,
               headers: dict[str, str] | None = None) -> Response:
        entry["status"] = status
        return JSONResponse({"type": "error", "error": {"type": kind, "message": message}},
                            status_code=status, headers=headers)


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


async def _sse(msg_id: str, model: str, block: dict[str, Any], stop: str,
               usage: dict[str, int]):
    """One message as the Messages API streams it: the input figures in message_start (with
    ``output_tokens`` 1, as the API does), the final cumulative usage in message_delta."""
    yield _event("message_start", {"message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {**usage, "output_tokens": min(1, usage["output_tokens"])}}})
    if block["type"] == "text":
        yield _event("content_block_start", {"index": 0,
                                             "content_block": {"type": "text", "text": ""}})
        yield _event("ping", {})
        yield _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                   "text": block["text"]}})
    else:
        yield _event("content_block_start", {"index": 0, "content_block": {**block,
                                                                           "input": {}}})
        yield _event("ping", {})
        yield _event("content_block_delta", {"index": 0, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
    yield _event("content_block_stop", {"index": 0})
    yield _event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": dict(usage)})
    yield _event("message_stop", {})
