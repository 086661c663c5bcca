"""A unified diff as rows a page can show: per file its lines with old and new numbers, each
new-side line with a stable anchor (``path:line`` findings link to it), highlighted by
Pygments from the file's name.

Everything here is text from an agent: Pygments' HTML formatter escapes it, and anchors are
hashes of the path, never the path itself.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from dataclasses import dataclass, field
from itertools import zip_longest

from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from ..safe_text import visible

HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
# "src/x.py:12" or "src/x.py:12:3" inside free text (findings, review evidence)
PATH_LINE = re.compile(r"^(?P<path>[^\s:][^:]*):(?P<line>\d+)(?::\d+)?$")


def anchor(attempt_n: int, path: str, line: int) -> str:
    """The element id of new-side ``line`` of ``path`` in attempt ``attempt_n``'s diff."""
    return f"a{attempt_n}-{hashlib.sha1(path.encode()).hexdigest()[:12]}-L{line}"


@dataclass
class DiffLine:
    kind: str  # "add", "del", "ctx", "hunk", "meta"
    old: int | None
    new: int | None
    html: Markup
    anchor: str | None = None


@dataclass
class DiffFile:
    path: str
    lines: list[DiffLine] = field(default_factory=list)


def git_path(text: str) -> str:
    """A path as git prints it in a diff header: C-quoted (``"a/x\\"y \\303\\251"``) when
    it holds a quote, a backslash, a control or non-ASCII byte; a tab after it when it holds
    a space. Returns the path itself (with its ``a/``/``b/`` prefix)."""
    text = text.rstrip("\t")
    if not (len(text) >= 2 and text[0] == text[-1] == '"'):
        return text
    raw = text[1:-1].encode("latin-1", "backslashreplace")
    return codecs.escape_decode(raw)[0].decode("utf-8", "replace")


def _lexer(path: str):
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


_FMT = HtmlFormatter(nowrap=True)


def _code(lexer, text: str) -> Markup:
    # Pygments escapes the source; nowrap leaves only <span class=..> around tokens. Bidi
    # and zero-width characters are shown, not obeyed: reordered code reads as other code
    return Markup(highlight(visible(text, lines=True), lexer, _FMT).rstrip("\n"))


def _meta(raw: str) -> Markup:
    return Markup(escape(visible(raw, lines=True)))


def parse(diff: str, attempt_n: int) -> list[DiffFile]:
    """``git diff`` text → files with numbered, highlighted lines. Lines git prints outside a
    hunk (``diff --git``, ``index``, ``---``/``+++``) are ``meta``, shown escaped as they are."""
    files: list[DiffFile] = []
    cur: DiffFile | None = None
    old = new = 0
    lexer = TextLexer()
    for raw in diff.splitlines():
        if raw.startswith("diff --git "):
            path = raw.split(" b/", 1)[-1] if " b/" in raw else raw[11:]
            cur = DiffFile(path)
            files.append(cur)
            lexer = _lexer(path)
            cur.lines.append(DiffLine("meta", None, None, _meta(raw)))
            continue
        if cur is None:
            continue
        m = HUNK.match(raw)
        if m:
            old, new = int(m.group(1)), int(m.group(2))
            cur.lines.append(DiffLine("hunk", None, None, _meta(raw)))
        elif raw.startswith(("+++ ", "--- ", "index ", "new file", "deleted file",
                             "similarity", "rename ", "old mode", "new mode", "Binary")):
            if raw.startswith(("+++ b/", '+++ "b/')):
                cur.path = git_path(raw[4:])[2:]
            cur.lines.append(DiffLine("meta", None, None, _meta(raw)))
        elif raw.startswith("+"):
            cur.lines.append(DiffLine("add", None, new, _code(lexer, raw[1:]),
                                      anchor(attempt_n, cur.path, new)))
            new += 1
        elif raw.startswith("-"):
            cur.lines.append(DiffLine("del", old, None, _code(lexer, raw[1:])))
            old += 1
        elif raw.startswith("\\"):
            cur.lines.append(DiffLine("meta", None, None, _meta(raw)))
        else:
            text = raw[1:] if raw.startswith(" ") else raw
            cur.lines.append(DiffLine("ctx", old, new, _code(lexer, text),
                                      anchor(attempt_n, cur.path, new)))
            old += 1
            new += 1
    return files


@dataclass
class SplitRow:
    """One row of the side-by-side view: ``left`` (old side) and ``right`` (new side), either
    None where that side has no line; or ``whole`` for a hunk or meta line across both."""

    left: DiffLine | None = None
    right: DiffLine | None = None
    whole: DiffLine | None = None


def side_by_side(f: DiffFile) -> list[SplitRow]:
    """``f``'s lines for a two-column view: context on both sides, each run of removed
    lines beside the run of added lines that follows it (paired in order, the longer run
    against blanks). The lines are ``parse``'s, already escaped and highlighted."""
    rows: list[SplitRow] = []
    dels: list[DiffLine] = []
    adds: list[DiffLine] = []

    def flush() -> None:
        rows.extend(SplitRow(old, new) for old, new in zip_longest(dels, adds))
        dels.clear()
        adds.clear()

    for ln in f.lines:
        if ln.kind == "del":
            if adds:  # a removal after additions starts a new change
                flush()
            dels.append(ln)
        elif ln.kind == "add":
            adds.append(ln)
        else:
            flush()
            rows.append(SplitRow(ln, ln) if ln.kind == "ctx" else SplitRow(whole=ln))
    flush()
    return rows


def style_css() -> str:
    """The highlighting colours as a style sheet (served as /static/pygments.css)."""
    return HtmlFormatter(style="default").get_style_defs(".code")


def path_line(text: str | None) -> tuple[str, int] | None:
    """``("src/x.py", 12)`` from ``"src/x.py:12"`` (a finding's place), else None."""
    m = PATH_LINE.match((text or "").strip())
    return (m.group("path"), int(m.group("line"))) if m else None
