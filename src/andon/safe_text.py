"""Text from agents and from the code under test, made safe to show on a terminal.

Everything an agent wrote is hostile input, wherever it is shown: a claim, a transcript, a
test's failure message, a file name, a branch or a review note may carry terminal escapes
(``ESC [2J`` clears the screen, ``ESC [1A`` moves up over the verdict line, ``ESC ]8;;``
opens a hyperlink), C1 controls (U+009B is a CSI by itself), a carriage return that
overwrites a line, or Unicode bidi overrides and zero-width characters that make the shown
text read otherwise than it is ("Trojan Source"). :func:`visible` shows each as an escape;
:func:`markup_safe` also escapes rich markup, for text printed with ``markup=True``.
"""

from __future__ import annotations

import re
import unicodedata

# categories that act instead of print: controls (C0, DEL, C1), format characters (bidi
# embeddings, overrides and isolates, zero-width ones, BOM), line and paragraph separators
# (a line break to some terminals) and surrogates (cannot be encoded, so cannot be printed)
_ACTIVE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# the candidates: everything but printable ASCII (and, for multi-line text, \n and \t)
_ONE_LINE = re.compile(r"[^\x20-\x7e]")
_LINES = re.compile(r"[^\x20-\x7e\n\t]")


def _shown(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _SHORT:
        return _SHORT[ch]
    if unicodedata.category(ch) not in _ACTIVE:
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: object, *, lines: bool = False) -> str:
    """``str(text)`` with every character that would act on a terminal or reorder what is
    shown replaced by its Python-style escape: ``\\n``, ``\\t``, ``\\r``, else ``\\xNN``
    (up to U+00FF: C0, DEL, C1, soft hyphen), ``\\uNNNN`` or ``\\UNNNNNNNN``. Replaced are
    the Unicode categories Cc (controls), Cf (format: bidi controls U+202A–U+202E,
    U+2066–U+2069, zero-width U+200B–U+200F, U+FEFF …), Zl, Zp and Cs (lone surrogates).
    Everything else, non-ASCII letters and emoji included, is kept as it is.

    ``lines``: text shown on several lines (a diff, a log tail) keeps ``\\n`` and ``\\t``;
    by default (one-line fields: names, paths, ids, a message on one line) they are escaped
    too, so a value cannot start a line of its own. A backslash is kept as it is: the
    literal text ``\\x1b`` and an escaped ESC look alike, and neither acts."""
    text = str(text)
    return (_LINES if lines else _ONE_LINE).sub(_shown, text)


def markup_safe(text: object, *, lines: bool = False) -> str:
    """:func:`visible` text with rich markup escaped (``[red]`` is shown, not read): what
    goes into a string printed with ``markup=True``. ``lines`` as for :func:`visible`."""
    from rich.markup import escape  # here: `andon --help` imports this module, not rich

    return escape(visible(text, lines=lines))
