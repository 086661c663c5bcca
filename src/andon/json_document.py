"""The one JSON document an agent stage answers with: a review, a plan, an interview turn.

Each contract reads the document the same way before its own schema: an empty answer and text
that is not JSON are refused with a message the agent gets back as evidence for its next ask,
and pydantic's error locations are printed with 1-based entry numbers (``verdicts.2.verdict``),
as people count.
"""

from __future__ import annotations

import json

from .errors import DocumentRejected


def load(text: str, rejected: type[DocumentRejected], *, empty: str, name: str,
         expected: str = "") -> object:
    """The JSON value of ``text``.

    ``empty`` is the whole message for a blank document; ``name`` starts the message for text
    that is not JSON ("review" → "review is not valid JSON: … at line L column C");
    ``expected``, when given, ends both ("; expected one JSON object").

    Raises:
        rejected: with one message, for a blank document or text that is not JSON.
    """
    tail = f"; {expected}" if expected else ""
    if not text.strip():
        raise rejected([empty + tail])
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise rejected([f"{name} is not valid JSON: {exc.msg} at line {exc.lineno} column "
                        f"{exc.colno}{tail}"]) from None


def where(loc: tuple[int | str, ...]) -> str:
    """pydantic's error location with 1-based entry numbers (``packets.2.goal``); ``document``
    for the document itself."""
    return ".".join(str(p + 1) if isinstance(p, int) else p for p in loc) or "document"
