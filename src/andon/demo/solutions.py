"""The demo packets' reference solutions (``packets/<folder>/solution/``): each the whole
loader as it stands once the packet and everything it ``requires`` are done, so that
``andon validate`` finds every demo packet valid. Built from the honest agents' functions."""

from __future__ import annotations

import ast

from .agents import (
    LOADER as LOADER_PATH,
)
from .agents import (
    PARSE_DATE,
    PARSE_NUMBER,
    PARSE_NUMBER_NO_TRAILING,
    PARSE_NUMBER_SPACES,
    PARSE_TOTAL,
    PARSE_TOTAL_DASH,
)
from .project import LOADER

PARSE_TOTAL_PARENTHESES = '''\
def parse_total(cell: str):
    """The running-total column; None when empty; a total in parentheses is negative."""
    text = cell.strip()
    if not text:
        return None
    if text.startswith("(") and text.endswith(")"):
        return -parse_number(text[1:-1])
    return parse_number(text)
'''

TRIM = 'def parse_description(cell: str) -> str:\n    return cell.strip()\n'


def loader_with(*functions: str) -> str:
    """The demo's loader with each top-level function named in ``functions`` replaced."""
    text = LOADER
    for source in functions:
        name = source.split("(", 1)[0].removeprefix("def ").strip()
        node = next(n for n in ast.parse(text).body
                    if isinstance(n, ast.FunctionDef) and n.name == name)
        lines = text.splitlines(keepends=True)
        lines[node.lineno - 1:node.end_lineno] = [source.rstrip("\n") + "\n"]
        text = "".join(lines)
    return text


# packet folder -> {repo-relative path: text}
SOLUTIONS = {folder: {LOADER_PATH: loader_with(*functions)} for folder, functions in {
    "B01-thousands": (PARSE_NUMBER_NO_TRAILING,),
    "B02-empty-total": (PARSE_NUMBER_NO_TRAILING, PARSE_TOTAL),
    "B03-trailing-minus": (PARSE_NUMBER,),
    "B04-iso-dates": (PARSE_DATE,),
    "B05-space-thousands": (PARSE_NUMBER_SPACES,),
    "B06-dash-total": (PARSE_NUMBER_NO_TRAILING, PARSE_TOTAL_DASH),
    "B07-parenthesised-negative": (PARSE_NUMBER_NO_TRAILING, PARSE_TOTAL_PARENTHESES),
    "B08-trim-descriptions": (TRIM,),
}.items()}
