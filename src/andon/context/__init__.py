"""See the context: what filled an agent's context window, turn by turn (issue 10).

``load(path, format=None)`` reads any supported transcript into the normalised
``Conversation`` (``model``); ``analyse.analyse`` cuts it into segments, counts their tokens
(``tokens``, filling in ``Part.tokens``) and computes the per-turn report; ``render`` and
``html`` show it. See README.md here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from andon import plain_file
from andon.context.model import Conversation, TranscriptError
from andon.context.read import FORMATS, detect
from andon.errors import Problem


def _parsers() -> dict[str, Callable[[Path], Conversation]]:
    """Each format of ``FORMATS`` → its parser. Imported when a transcript is read, not with
    the package: `andon context --help` lists FORMATS without loading every parser."""
    from andon.context import aider, api, claude, codex, gemini, swe

    return {
        "claude-code": claude.session,
        "claude-stream-json": claude.stream_json,
        "codex-rollout": codex.rollout,
        "codex-exec-json": codex.exec_json,
        "gemini-session": lambda p: gemini.session(p),
        "gemini-stream-json": gemini.stream_json,
        "aider": aider.history,
        "swe-agent": lambda p: swe.swe_agent(p),
        "mini-swe-agent": lambda p: swe.mini_swe_agent(p),
        "openai-chat": lambda p: api.openai_chat(p, None),
        "openai-responses": lambda p: api.openai_responses(p, None),
        "anthropic-messages": lambda p: api.anthropic_messages(p, None),
    }


def load(path: Path, format: str | None = None, follow: bool = True) -> Conversation:
    """The transcript at ``path`` as a ``Conversation``; ``format`` forces a parser.
    ``follow``: a link at ``path`` is read (a path a person named); False for a transcript
    found in an attempt's evidence, which the agent could have replaced by a link to a file
    of the user's. A FIFO or a device is never read (plain_file.py).

    Unreadable lines are skipped and listed in ``Conversation.problems``.

    Raises:
        TranscriptError: the file is missing, is not a regular file (or, without
            ``follow``, is a link), its format is unknown or not the one forced, or no
            message could be read from it.
    """
    path = Path(path)
    if not (plain_file.is_file(path) or (follow and path.is_file())):
        what = ("is a folder, not a transcript file" if path.is_dir() and not path.is_symlink()
                else "is a link, not read here" if path.is_symlink() and path.exists()
                else "is not a regular file" if path.exists() else "no such file")
        raise TranscriptError([Problem(path, None, what)])
    if format is not None and format not in FORMATS:
        raise TranscriptError([Problem(path, None, f"unknown format {format!r}: expected one "
                                       f"of {', '.join(FORMATS)}")])
    try:
        fmt = format or detect(path)
        conv = _parsers()[fmt](path)
    except plain_file.NotPlain as e:  # replaced since the look
        raise TranscriptError([Problem(path, None, f"is {e.what}, not read")]) from e
    except (AttributeError, TypeError, KeyError) as e:
        # a document of another shape than the forced or detected format
        raise TranscriptError([Problem(path, None, f"not a {fmt} transcript: {e}")]) from e
    if not any(t.messages for t in conv.threads):
        why = "; ".join(str(p) for p in conv.problems[:3])
        raise TranscriptError([Problem(path, None, f"no message read as {fmt}"
                                       + (f" ({why})" if why else ""))])
    return conv


__all__ = ["FORMATS", "Conversation", "TranscriptError", "detect", "load"]
