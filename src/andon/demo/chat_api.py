"""The OpenAI Chat Completions side of the scripted model server (``POST
/v1/chat/completions``), as Aider calls it through litellm: one turn of the script becomes one
completion with one choice.

A turn ``{"text": "..."}`` is an assistant message with that ``content`` (Aider's edits are
text: SEARCH/REPLACE blocks in the answer) and ``finish_reason`` ``"stop"``; ``{"tool": name,
"input": {...}}`` is a message with one ``tool_calls`` entry (``type`` ``"function"``,
``arguments`` = the input as JSON) and ``finish_reason`` ``"tool_calls"``.

Usage (the script gives it in Anthropic terms, see :mod:`andon.demo.modelserver`):
``prompt_tokens`` = uncached + cache read + cache write (OpenAI counts cached tokens in the
prompt), ``prompt_tokens_details.cached_tokens`` = cache read, ``completion_tokens``,
``total_tokens``. Chat Completions has no field for cache writes; when a turn has some they
are also given as ``cache_creation_input_tokens`` beside the standard fields, as
OpenAI-compatible gateways for Anthropic models do, so a client that reads it (litellm) sees
them.

Streamed (``"stream": true``): Server-Sent Events, ``data: <chunk>`` each, ``object``
``chat.completion.chunk``: the role, the content (or the tool call: its id and name, then its
arguments), a chunk with the ``finish_reason``; with ``stream_options.include_usage`` every
chunk has ``"usage": null`` and one more chunk with empty ``choices`` carries the usage; then
``data: [DONE]``.

Sources: OpenAI Chat Completions reference (the chat completion object, the chunk object,
``stream_options``), https://platform.openai.com/docs/api-reference/chat .
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any


def chat_usage(u: dict[str, int]) -> dict[str, Any]:
    """The script's usage (Anthropic terms) in Chat Completions terms."""
    prompt = u["input_tokens"] + u["cache_read_input_tokens"] \
        + u["cache_creation_input_tokens"]
    out: dict[str, Any] = {
        "prompt_tokens": prompt, "completion_tokens": u["output_tokens"],
        "total_tokens": prompt + u["output_tokens"],
        "prompt_tokens_details": {"cached_tokens": u["cache_read_input_tokens"]},
        "completion_tokens_details": {"reasoning_tokens": 0}}
    if u["cache_creation_input_tokens"]:
        out["cache_creation_input_tokens"] = u["cache_creation_input_tokens"]
    return out


def _tool_call(turn: dict[str, Any], n: int) -> dict[str, Any]:
    args = turn.get("input", {})
    return {"id": f"call_scripted_{n:04d}", "type": "function",
            "function": {"name": turn["tool"],
                         "arguments": args if isinstance(args, str) else json.dumps(args)}}


def completion(turn: dict[str, Any], model: str, usage: dict[str, int], n: int
               ) -> dict[str, Any]:
    """The whole answer (``"stream"`` false)."""
    if "text" in turn:
        message: dict[str, Any] = {"role": "assistant", "content": turn["text"]}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [_tool_call(turn, n)]}
        finish = "tool_calls"
    return {"id": f"chatcmpl-scripted{n:04d}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}],
            "usage": chat_usage(usage)}


async def sse(turn: dict[str, Any], model: str, usage: dict[str, int], n: int,
              include_usage: bool) -> AsyncIterator[bytes]:
    """The same answer as chunks (see the module docstring)."""
    head = {"id": f"chatcmpl-scripted{n:04d}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    if include_usage:
        head["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                     "logprobs": None}]}
        return f"data: {json.dumps(body)}\n\n".encode()

    if "text" in turn:
        yield chunk({"role": "assistant", "content": ""})
        yield chunk({"content": turn["text"]})
        yield chunk({}, "stop")
    else:
        call = _tool_call(turn, n)
        yield chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": call["id"], "type": "function",
             "function": {"name": call["function"]["name"], "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": 0, "function": {
            "arguments": call["function"]["arguments"]}}]})
        yield chunk({}, "tool_calls")
    if include_usage:
        body = {**head, "choices": [], "usage": chat_usage(usage)}
        yield f"data: {json.dumps(body)}\n\n".encode()
    yield b"data: [DONE]\n\n"
