"""Packet files: parse, validate, and report every problem with its file and line.

A packet is Markdown with TOML front matter between ``+++`` lines, stored either as
``packets/<name>/packet.md`` (with optional ``plant/``, ``hidden/`` and ``solution/`` trees
that mirror the repository root) or as a flat ``packets/<name>.md``. See README.md for the modules.
"""

from .files import is_litter, planted_test_files, tests_problem
from .model import (
    GLOB_FLAGS,
    FrontMatter,
    Invariant,
    Packet,
    body_sections,
    glob_problem,
    path_matches,
)
from .parse import check_packets, load_packets, parse_packet_file
from .solution import solution_problems

__all__ = ["Packet", "FrontMatter", "Invariant", "GLOB_FLAGS", "glob_problem", "path_matches",
           "body_sections", "parse_packet_file", "check_packets", "load_packets", "is_litter",
           "planted_test_files", "tests_problem", "solution_problems"]
