"""A changed Python file's text as the interpreter reads it (PEP 263), and what its encoding says.

Python decodes a source file by its UTF-8 byte-order mark or its coding cookie (``# coding:
…`` on line 1 or 2), UTF-8 without either; ``ast.parse`` of a str ignores the cookie. So the
gate decodes the bytes itself, the same way (``tokenize.detect_encoding``), and scans the text
Python will run. Two rule ids come from here, both ``block`` by default:

- ``source-encoding``: a cookie naming a codec that is not ASCII-transparent (see
  :func:`transparent`): UTF-7, UTF-16/32, the escape codecs, EBCDIC, the multi-byte East Asian
  codecs. In those, bytes a diff, a reviewer (and git's added lines) read as a comment can
  decode to code: ``+AAo-`` is a newline in UTF-7. On the cookie's line.
- ``syntax-error``: the file cannot be decoded (no such codec, not valid in its encoding) or
  parsed, so no rule checked it. Python cannot import such a file either, so an honest agent
  meets this only with syntax newer than the Python andon runs under, or a deliberately broken
  ``.py`` kept as test data; set the rule to ``warn`` there (docs/gates.md).
"""

from __future__ import annotations

import codecs
import io
import re
import sys
import tokenize

from .production import Hit

# the UTF-8 family and ASCII; latin-1's codec is C code, the other single-byte ones charmaps
SAFE = frozenset({"utf-8", "utf-8-sig", "ascii", "iso8859-1"})
COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]")


def transparent(encoding: str) -> bool:
    """``encoding`` decodes each byte on its own, every ASCII byte as itself and no other byte
    as ASCII (UTF-8, ASCII, latin-1, the ``iso8859-*`` / ``cp125x`` / ``koi8`` charmaps): what
    a UTF-8 reader sees of the code is what runs. False for an unknown name."""
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return False
    if name in SAFE:
        return True
    owner = getattr(codecs.lookup(name).decode, "__self__", None)
    table = getattr(sys.modules.get(type(owner).__module__), "decoding_table", None)
    return isinstance(table, str) and len(table) == 256 \
        and table[:128] == "".join(map(chr, range(128))) \
        and all(ord(c) >= 128 for c in table[128:])


def python_source(path: str, data: bytes) -> tuple[str | None, list[Hit]]:
    """(the text Python runs from ``data``, or None when it cannot be decoded; the
    ``source-encoding`` / ``syntax-error`` hits) for the file at ``path``."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:  # no such codec; a BOM and another cookie
        return None, [_unread(path, 1, str(e))]
    hits = []
    if not transparent(encoding):
        first = data.split(b"\n", 2)
        line = 1 if COOKIE.match(first[0]) or len(first) < 2 else 2
        hits.append(Hit("source-encoding", path, line, f"source encoding {encoding!r}: bytes "
                        "that read as a comment in a diff can decode to code; use UTF-8"))
    try:
        return data.decode(encoding), hits
    except UnicodeDecodeError as e:
        return None, [*hits, _unread(path, data[:e.start].count(b"\n") + 1, str(e))]
    except (LookupError, UnicodeError, ValueError, TypeError) as e:
        # a codec that is not a text encoding (rot13, zlib), or that fails in its own way
        # (punycode raises a plain UnicodeError)
        return None, [*hits, _unread(path, 1, str(e))]


def _unread(path: str, line: int, why: str) -> Hit:
    return unparsed(path, line, f"cannot be decoded as Python source ({why})")


def unparsed(path: str, line: int, why: str) -> Hit:
    """The ``syntax-error`` hit: ``why`` the file was not read, so that no rule checked it."""
    return Hit("syntax-error", path, line, f"{why}, so no rule checked this file")
