"""The Gemini API side of the scripted model server (``POST /v1beta/models/<model>:
generateContent`` and ``:streamGenerateContent?alt=sse``), as the Gemini CLI calls it.

A turn ``{"tool": name, "input": {...}}`` is a ``functionCall`` part, ``{"text"}`` a text
part. Usage (the script gives it in Anthropic terms, see :mod:`andon.demo.modelserver`):
``promptTokenCount`` = uncached + cache read + cache write (Gemini counts cached tokens in the
prompt), ``cachedContentTokenCount`` = cache read, ``candidatesTokenCount`` = output. Streamed,
the whole answer is one ``data:`` chunk (the CLI reads a stream of ``GenerateContentResponse``
objects). Errors: ``{"error": {"code", "message", "status"}}`` with the HTTP status.

Sources: Gemini API reference, https://ai.google.dev/api/generate-content (the response,
``UsageMetadata``) and https://ai.google.dev/api/caching ; errors,
https://ai.google.dev/gemini-api/docs/troubleshooting .
"""

from __future__ import annotations

import json
from typing import Any

STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND",
          429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}


def usage_metadata(u: dict[str, int]) -> dict[str, int]:
    prompt = u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
    return {"promptTokenCount": prompt, "candidatesTokenCount": u["output_tokens"],
            "cachedContentTokenCount": u["cache_read_input_tokens"], "thoughtsTokenCount": 0,
            "totalTokenCount": prompt + u["output_tokens"]}


def response(turn: dict[str, Any], model: str, usage: dict[str, int], n: int
             ) -> dict[str, Any]:
    part = ({"text": turn["text"]} if "text" in turn else
            {"functionCall": {"name": turn["tool"], "args": turn.get("input", {})}})
    return {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage_metadata(usage), "modelVersion": model,
            "responseId": f"resp_scripted_{n:04d}"}


def sample(schema: Any) -> Any:
    """The plainest value a JSON schema (Gemini's upper-case types or JSON Schema's) allows:
    the answer to a side request that asks for JSON (the CLI's model router asks for a
    ``complexity_score``), so the CLI goes on instead of asking again."""
    if not isinstance(schema, dict):
        return "scripted"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "string")).lower()
    if kind == "object":
        return {k: sample(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    return {"integer": 1, "number": 1, "boolean": False}.get(kind, "scripted")


def side_text(body: dict[str, Any]) -> str:
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    return json.dumps(sample(schema)) if schema else "ok"


async def sse(body: dict[str, Any]):
    yield f"data: {json.dumps(body)}\r\n\r\n".encode()


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message,
                      "status": STATUS.get(status, "UNKNOWN")}}
