"""The OpenAI Responses API side of the scripted model server (``POST /v1/responses``), as
the Codex CLI calls it: one turn of the script becomes one response.

A turn ``{"tool": name, "input": "<text>"}`` is a ``custom_tool_call`` (a freeform tool, e.g.
Codex's ``exec``, whose input is JavaScript that calls ``tools.apply_patch(...)``); with an
object ``input`` it is a ``function_call`` (``arguments`` = the object as JSON); ``{"text"}``
is an assistant ``message``. Usage (the script gives it in Anthropic terms, see
:mod:`andon.demo.modelserver`): ``input_tokens`` = uncached + cache read + cache write,
``input_tokens_details.cached_tokens`` = cache read, ``output_tokens``, ``total_tokens``.

Streamed (``"stream": true``): ``response.created``, ``response.in_progress``, then for the
one output item ``response.output_item.added`` and ``response.output_item.done``, then
``response.completed`` with the whole response and its usage. Errors: ``{"error":
{"message", "type", "code"}}`` with the HTTP status.

Sources: OpenAI Responses API reference and its streaming events,
https://platform.openai.com/docs/api-reference/responses and
https://platform.openai.com/docs/api-reference/responses-streaming .
"""

from __future__ import annotations

import json
import time
from typing import Any


def openai_usage(u: dict[str, int]) -> dict[str, Any]:
    """The script's usage (Anthropic terms) in the Responses API's terms."""
    total_in = u["input_tokens"] + u["cache_read_input_tokens"] \
        + u["cache_creation_input_tokens"]
    return {"input_tokens": total_in,
            "input_tokens_details": {"cached_tokens": u["cache_read_input_tokens"]},
            "output_tokens": u["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total_in + u["output_tokens"]}


def output_item(turn: dict[str, Any], n: int) -> dict[str, Any]:
    if "text" in turn:
        return {"type": "message", "id": f"msg_scripted_{n:04d}", "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn["text"], "annotations": []}]}
    if isinstance(turn.get("input"), str):
        return {"type": "custom_tool_call", "id": f"ctc_scripted_{n:04d}", "status": "completed",
                "call_id": f"call_scripted_{n:04d}", "name": turn["tool"],
                "input": turn["input"]}
    return {"type": "function_call", "id": f"fc_scripted_{n:04d}", "status": "completed",
            "call_id": f"call_scripted_{n:04d}", "name": turn["tool"],
            "arguments": json.dumps(turn.get("input", {}))}


def response(turn: dict[str, Any], model: str, usage: dict[str, int], n: int
             ) -> dict[str, Any]:
    return {"id": f"resp_scripted_{n:04d}", "object": "response",
            "created_at": int(time.time()), "status": "completed", "model": model,
            "output": [output_item(turn, n)], "usage": openai_usage(usage), "error": None}


def _event(kind: str, seq: int, data: dict[str, Any]) -> bytes:
    body = {"type": kind, "sequence_number": seq, **data}
    return f"event: {kind}\ndata: {json.dumps(body)}\n\n".encode()


async def sse(turn: dict[str, Any], model: str, usage: dict[str, int], n: int):
    done = response(turn, model, usage, n)
    pending = {**done, "status": "in_progress", "output": [], "usage": None}
    item = done["output"][0]
    yield _event("response.created", 0, {"response": pending})
    yield _event("response.in_progress", 1, {"response": pending})
    yield _event("response.output_item.added", 2, {"output_index": 0,
                                                   "item": {**item, "status": "in_progress"}})
    yield _event("response.output_item.done", 3, {"output_index": 0, "item": item})
    yield _event("response.completed", 4, {"response": done})


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "server_error")
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
