"""Cutting a part's text at natural boundaries, without changing a character.

``split(text)`` returns spans ``(start, end, label)`` that cover ``text`` exactly, in order:
a top-level XML-like element (``<name …>…</name>`` opening at a line start; label the tag
name), a fenced code block (label ``code``), a Markdown section (from a heading line to the
next boundary; label the heading), or, when the whole text is a JSON object, one span per
top-level key (label the key). Text between those is one span with no label. Concatenating
``text[start:end]`` over the spans gives back ``text`` (tests/test_context_segment.py, a
hypothesis property).
"""

from __future__ import annotations

import json
import re

_START = re.compile(r"^(?:(?P<fence>```|~~~)|<(?P<tag>[A-Za-z][\w.\-:]*)(?=[\s>/])|"
                    r"(?P<head>#{1,6}[ \t]))", re.M)
_MAX_SPANS = 2000  # a pathological text (every line a heading) stays one pass, fewer cuts

Span = tuple[int, int, str | None]


def split(text: str) -> list[Span]:
    """The spans of ``text`` (see the module docstring); ``[(0, len(text), None)]`` at least."""
    if not text:
        return []
    stripped = text.lstrip()
    if stripped.startswith("{"):
        spans = _json_spans(text)
        if spans:
            return spans
    cuts: list[tuple[int, str | None]] = [(0, None)]
    pos = 0
    while len(cuts) < _MAX_SPANS:
        m = _START.search(text, pos)
        if m is None:
            break
        start = m.start()
        if m.group("fence"):
            close = re.compile(r"^" + re.escape(m.group("fence")) + r"[ \t]*$", re.M)
            end_m = close.search(text, text.find("\n", start) + 1 if "\n" in text[start:]
                                 else len(text))
            end = _line_end(text, end_m.end()) if end_m else len(text)
            cuts += [(start, "code"), (end, None)]
        elif m.group("tag"):
            name = m.group("tag")
            close_at = text.find(f"</{name}>", m.end())
            if close_at < 0:
                pos = m.end()
                continue
            end = _line_end(text, close_at + len(name) + 3)
            cuts += [(start, name), (end, None)]
        else:
            end = text.find("\n", start)
            heading = text[start:end if end >= 0 else len(text)].lstrip("#").strip()
            cuts.append((start, heading or None))
            end = m.end()
        pos = max(end, m.end())
    return _spans(cuts, len(text))


def _line_end(text: str, at: int) -> int:
    """``at`` moved past the newline that ends its line, if the rest of the line is blank."""
    nl = text.find("\n", at)
    if nl >= 0 and not text[at:nl].strip():
        return nl + 1
    return at if nl >= 0 else (len(text) if not text[at:].strip() else at)


def _spans(cuts: list[tuple[int, str | None]], n: int) -> list[Span]:
    out: list[Span] = []
    cuts = sorted({c[0]: c for c in cuts}.values())  # a later label at the same offset wins
    for (a, label), nxt in zip(cuts, [*cuts[1:], (n, None)], strict=True):
        if nxt[0] > a:
            out.append((a, nxt[0], label))
    return out


def _json_spans(text: str) -> list[Span] | None:
    """One span per top-level key of a JSON object (None when ``text`` is not one)."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict) or len(doc) < 2:
        return None
    cuts: list[tuple[int, str | None]] = [(0, None)]
    depth, in_str, esc = 0, False, False
    keys = iter(doc)
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            if depth == 1 and _key_starts(text, i):
                cuts.append((i, next(keys, None)))
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return _spans(cuts, len(text))


def _key_starts(text: str, i: int) -> bool:
    """Whether the string opening at ``i`` (depth 1) is a key: after ``{`` or ``,``."""
    j = i - 1
    while j >= 0 and text[j] in " \t\r\n":
        j -= 1
    return j >= 0 and text[j] in "{,"
