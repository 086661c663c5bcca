"""The ``gemini`` adapter: Gemini CLI in headless mode with JSON output.

Invocation (cwd the attempt's worktree)::

    gemini --prompt <prompt text> --output-format json [--model M] --yolo [extra_args...]

The environment gets ``GEMINI_CLI_TRUST_WORKSPACE=true`` (unless it is set already): the
Gemini CLI's documented way, for headless runs, to trust the folder it runs in. The worktree
is one andon just made; untrusted, the CLI overrides ``--yolo`` to its default approval mode
("Approval mode overridden to \"default\" because the current folder is not trusted") and
then refuses or exits 55 before doing anything (0.61.0 and its recent predecessors).

A prompt longer than ``ARG_LIMIT`` bytes goes on stdin instead (the CLI reads stdin in
headless mode and adds it to the prompt), with ``--prompt`` saying so. ``--yolo`` (approve
every tool call) is the default ``permission_args``. Credentials: ``GEMINI_API_KEY``,
``GOOGLE_API_KEY``, ``GOOGLE_GENAI_USE_VERTEXAI``, ``GOOGLE_CLOUD_PROJECT``,
``GOOGLE_CLOUD_LOCATION``, ``GOOGLE_APPLICATION_CREDENTIALS`` when set, or the login kept
under ``$HOME/.gemini``.

Output read back — one JSON object on stdout (stderr is kept apart in its own file)::

    {"session_id": ..., "response": "<final text>",
     "stats": {"models": {"<model>": {"api": {"totalRequests", "totalErrors",
                                              "totalLatencyMs"},
                                      "tokens": {"input", "prompt", "candidates", "total",
                                                 "cached", "thoughts", "tool"}}},
               "tools": {...}, "files": {...}},
     "error": {"type", "message", "code"}}          # only when the request failed

Usage per model: ``input_tokens`` = ``prompt`` (which includes ``cached``) + ``tool``
(tool-use prompt tokens); ``output_tokens`` = ``candidates`` + ``thoughts`` (reasoning is
output in the store's convention); ``cache_read_tokens`` = ``cached``; cache writes are not
reported (``None``). ``turns`` = the sum of ``api.totalRequests``. The CLI reports no cost:
it is priced per request from the session's chat recording (:func:`session_file`,
:func:`parse_session`) when it adds up to these totals, else per model with the totals
split evenly over ``api.totalRequests`` (price tiers apply per request). The claim is
``response`` (or the error message).

A JSON object whose ``stats`` has no ``models`` table is a format this adapter does not know
(it fails clearly, usage unknown); output that is not JSON at all (a CLI without
``--output-format json``) too.

Sources: Gemini CLI headless mode, https://github.com/google-gemini/gemini-cli/blob/main/
docs/cli/headless.md (``--prompt``, ``--output-format json``, the ``response``/``stats``/
``error`` schema, exit codes); ../shared/FORMATS.md (Gemini CLI: the ``stats.models`` token
fields, ``prompt`` includes ``cached``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import plain_file
from ..config import AgentSettings
from ..context import gemini as context_gemini
from ..usage import as_count, sum_counts
from .base import StageContext
from .external import DEVNULL, ExternalAgent, FormatError, Parsed, RunFiles, note_problems

ARG_LIMIT = 100_000   # bytes; Linux refuses a single argument over 128 KiB
STDIN_NOTE = "Follow the instructions given on standard input."
STREAM_EVENTS = {"init", "message", "tool_use", "tool_result", "error", "result"}


class GeminiAgent(ExternalAgent):
    name = "gemini"
    executable = "gemini"
    home_state = (".gemini/",)
    credential_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
                      "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                      "GOOGLE_APPLICATION_CREDENTIALS")
    api_hosts = ("generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com",
                 "oauth2.googleapis.com", "aiplatform.googleapis.com")
    default_permission_args = ("--yolo",)
    docs = "docs/agents/gemini.md"
    tested_version = "0.61.0"   # end to end against the real binary (tests/agent-clis.txt)

    def env(self, ctx: StageContext, s: AgentSettings) -> dict[str, str]:
        env = super().env(ctx, s)
        env.setdefault("GEMINI_CLI_TRUST_WORKSPACE",
                       self.environ.get("GEMINI_CLI_TRUST_WORKSPACE") or "true")
        return env

    def argv(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> list[str]:
        prompt = ctx.prompt if len(ctx.prompt.encode()) <= ARG_LIMIT else STDIN_NOTE
        argv = [self.executable, "--prompt", prompt, "--output-format", "json"]
        if s.model:
            argv += ["--model", s.model]
        return argv + self.permission_args(s) + list(s.extra_args or [])

    def stdin(self, ctx: StageContext) -> Path:
        return ctx.prompt_file if len(ctx.prompt.encode()) > ARG_LIMIT else DEVNULL

    def parse(self, ctx: StageContext, s: AgentSettings, files: RunFiles) -> Parsed:
        out = parse_json(files.transcript, s.model)
        home = Path(self.environ.get("HOME", "~")).expanduser()
        found = session_file(home, out.meta.get("session_id") or "")
        if found is not None and out.usage.has_tokens:
            try:
                rec = parse_session(found, s.model)
            except FormatError as exc:
                out.usage.notes.append(f"chat recording not read: {exc}")
                return out
            # priced per request only if the recording adds up to the run's totals
            out.usage.requests = rec.usage.requests
            out.usage.notes.append(f"requests read from the chat recording {found.name}")
        return out


def parse_json(path: Path, configured_model: str | None = None) -> Parsed:
    """Read ``gemini --output-format json`` output (see the module docstring).

    Raises:
        FormatError: no JSON object in the output, or one this adapter does not know.
    """
    out = Parsed()
    u = out.usage
    u.model = configured_model
    try:
        text = plain_file.read_text(path)
    except OSError:
        text = ""
    if not text.strip():
        u.notes.append("no output: usage unknown")
        return out
    doc = _find_object(text)
    if doc is None:
        if text.lstrip().startswith("{"):
            u.notes.append("the JSON output is truncated: usage unknown")
            return out
        raise FormatError("no JSON object in the output (is it `--output-format json`?)")
    if doc.get("type") in STREAM_EVENTS:   # `-o stream-json` given in extra_args
        return parse_stream_json(path, configured_model)
    if not {"response", "stats", "error"} & doc.keys():
        raise FormatError(f"a JSON object without response/stats/error: keys "
                          f"{', '.join(sorted(doc)) or 'none'}")
    err = doc.get("error")
    if isinstance(err, dict):
        u.notes.append(f"error: {err.get('type')}: {err.get('message')}")
    response = doc.get("response")
    out.claim = response if isinstance(response, str) else (
        str(err.get("message")) if isinstance(err, dict) else "")
    stats = doc.get("stats")
    if stats is None:
        u.notes.append("no stats block: usage unknown")
        return out
    models = stats.get("models") if isinstance(stats, dict) else None
    if not isinstance(models, dict):
        keys = ", ".join(sorted(stats)) if isinstance(stats, dict) else type(stats).__name__
        raise FormatError(f"stats has no `models` table: a stats format this adapter does "
                          f"not know (keys: {keys})")
    turns = 0
    for name, m in models.items():
        t = m.get("tokens") if isinstance(m, dict) else None
        if not isinstance(t, dict):
            u.notes.append(f"{name}: no token counts")
            u.models[name] = {"input_tokens": None, "output_tokens": None}
            continue
        prompt, cand = as_count(t.get("prompt")), as_count(t.get("candidates"))
        tool, thoughts = as_count(t.get("tool")) or 0, as_count(t.get("thoughts")) or 0
        api = m.get("api") if isinstance(m.get("api"), dict) else {}
        u.models[name] = {
            "input_tokens": None if prompt is None else prompt + tool,
            "output_tokens": None if cand is None else cand + thoughts,
            "cache_read_tokens": as_count(t.get("cached")), "cache_write_tokens": None,
            "requests": as_count(api.get("totalRequests"))}
        turns += as_count(api.get("totalRequests")) or 0
    for k, v in sum_counts(u.models.values()).items():
        setattr(u, k, v)
    u.turns = turns if models else None
    if u.models and configured_model is None:
        u.model = max(u.models, key=lambda k: u.models[k].get("output_tokens") or 0)
    if isinstance(doc.get("session_id"), str):
        out.meta["session_id"] = doc["session_id"]
    return out


def parse_session(path: Path, configured_model: str | None = None) -> Parsed:
    """Read a Gemini CLI chat recording (``~/.gemini/tmp/<project hash>/chats/
    session-*.json``: ``{sessionId, messages: [{type: "user" | "gemini", model, tokens:
    {input, output, cached, thoughts, tool, total}, ...}]}``) with the one parser,
    ``andon.context.gemini.session``: one ``gemini`` message per API request (input = the
    prompt, cached included, + tool-use prompt tokens; output = candidates + thoughts), their
    sums per model, ``turns`` = their number.

    Raises:
        FormatError: not a JSON object with a ``messages`` list.
    """
    out = Parsed()
    u = out.usage
    try:
        doc = json.loads(plain_file.read_text(path))
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: not a Gemini CLI chat recording: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise FormatError(f"{path}: a JSON object with a `messages` list was expected")
    conv = context_gemini.session(path, doc)
    replies = [m for m in conv.main.messages if m.role == "assistant"]
    per_model: dict[str, list[dict]] = {}
    if conv.reported.get("replies_without_tokens") or any(m.usage is None for m in replies):
        u.notes.append("a gemini message without token counts: tokens unknown")
    else:
        for m in replies:
            assert m.usage is not None  # checked just above
            model = m.usage.model if isinstance(m.usage.model, str) else configured_model
            counts = {"input_tokens": m.usage.input_tokens,
                      "output_tokens": m.usage.output_tokens,
                      "cache_read_tokens": m.usage.cache_read_tokens,
                      "cache_write_tokens": None}
            u.requests.append({**counts, "model": model})
            per_model.setdefault(model or "?", []).append(counts)
    texts = [t for m in replies if (t := "".join(p.text for p in m.parts if p.kind == "text"))]
    out.claim = texts[-1] if texts else ""
    u.models = {k: sum_counts(v) for k, v in per_model.items()}
    for k, v in sum_counts(u.models.values()).items():
        setattr(u, k, v)
    u.turns = len(u.requests) if u.requests else None
    u.model = configured_model or (max(u.models, key=lambda k: u.models[k].get(
        "output_tokens") or 0) if u.models else None)
    out.meta["session_id"] = conv.reported.get("session_id")
    return out


def session_file(home: Path, session_id: str) -> Path | None:
    """The chat recording of ``session_id`` under ``home/.gemini/tmp``, or None. Its name
    ends with the first 8 characters of the id; the ``sessionId`` inside must match."""
    if not session_id or len(session_id) < 8:
        return None
    for path in sorted((home / ".gemini" / "tmp").glob(f"*/chats/session-*{session_id[:8]}"
                                                        ".json")):
        try:
            doc = json.loads(plain_file.read_text(path))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("sessionId") == session_id:
            return path
    return None


def parse_stream_json(path: Path, configured_model: str | None = None) -> Parsed:
    """Read ``gemini -o stream-json`` output with the one parser,
    ``andon.context.gemini.stream_json``: ``init {session_id, model}``, ``message``
    (``delta`` chunks of the reply), ``tool_use``, ``tool_result``, ``error``, last ``result
    {status, stats: {total_tokens, input_tokens, output_tokens, cached, input, tool_calls,
    duration_ms}}``. Lines that are not JSON (a shell prompt, CLI notices) are skipped.

    The stats are totals over all models: ``input_tokens`` is the prompt (cached
    included), ``output_tokens`` the candidates only — thoughts are counted in
    ``total_tokens`` alone, so output = ``total_tokens - input_tokens`` (noted). No request
    count, no per-model split: priced on the total, and the ``init`` model may be an alias
    (``auto-gemini-2.5``) no price table knows. Several ``result`` events (a capture of
    several runs) are summed, with a note.
    """
    out = Parsed()
    u = out.usage
    conv = context_gemini.stream_json(path)
    note_problems(u, conv.problems)
    rep = conv.reported
    if rep.get("session_id") is not None:
        out.meta["session_id"] = rep["session_id"]
    out.claim = "".join(p.text for m in conv.main.messages if m.role == "assistant"
                        for p in m.parts if p.kind == "text")
    u.model = configured_model or conv.model
    if not rep.get("results"):
        u.notes.append("no result event with stats: usage unknown")
        return out
    u.input_tokens, u.output_tokens = rep["input_tokens"], rep["output_tokens"]
    u.cache_read_tokens = rep["cache_read_tokens"]
    u.notes.append("output = total_tokens - input_tokens (stream-json's output_tokens leaves "
                   "out the thoughts)")
    if rep["results"] > 1:
        u.notes.append(f"{rep['results']} result events (runs) summed")
    return out


def _find_object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``: the whole text, else the last object that starts at the
    beginning of a line (a CLI may print a notice before it)."""
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, dict) else None
    except ValueError:
        pass
    dec = json.JSONDecoder()
    found = None
    pos = 0
    while (i := text.find("{", pos)) != -1:
        if i == 0 or text[i - 1] == "\n":
            try:
                doc, end = dec.raw_decode(text, i)
            except ValueError:
                pos = i + 1
                continue
            if isinstance(doc, dict):
                found = doc
            pos = end
        else:
            pos = i + 1
    return found
