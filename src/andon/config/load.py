"""Reading ``andon.toml``: the default file ``andon init`` writes, loading and validating it
into a :class:`~andon.config.model.Config`, and every problem as ``file:line: what`` with the
closest known name for a typo.

Raises ConfigError (missing file, invalid TOML, unknown key, wrong value).
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .. import plain_file
from ..errors import ConfigError, Problem, toml_problem
from ..suggest import closest, hint
from .model import CONFIG_NAME, Andon, Config

DEFAULT_TOML = """\
# andon configuration; every key is explained in docs/configuration.md

[andon]
packets_dir = "packets"
integration_branch = "andon/integration"
# base_branch = "main"        # where the integration branch starts; default: current branch
keep_worktrees = false
agent_history = "full"        # or "shallow"; the worktree never holds other branches or tags
temp_dir = "auto"             # gate clones: a tmpfs when the temp dir is on disk; or "system"

[test]
# The harness adds its own flags (JUnit XML report, no addopts, no cache) to this command.
command = ["python", "-m", "pytest"]   # "python" = the interpreter running andon
pythonpath = ["src"]                   # the attempt's code comes first on sys.path
timeout_s = 900
network = "off"                        # test runs get loopback only, where the machine allows
# jobs = 2                             # runs at the same time (hermetic, flaky); default: cores
# fork_server = false                  # start every run fresh (default: fork them from a
#                                      # process that imported pytest once; docs/gates.md)

[gates]
red_runs = 3                # planted tests must fail on the base this many times out of as many
hermetic_runs = 3           # full-suite runs in a fresh clone of the candidate
hermetic_random_order = true
# max_suite_runs_per_attempt = 5   # refused at load when the settings above need more
# Optional gates (docs/gates.md), each recorded as skipped until turned on:
# [gates.static]   commands = [["ruff", "check", "--output-format=json"]]
# [gates.flaky]    enabled = true      # nearby tests in random orders
# [gates.mutation] enabled = true      # pip install 'andon[mutation]'; or tiers = ["critical"]

[agent]
default = "command"
# command = "claude -p --dangerously-skip-permissions < \\"$ANDON_PROMPT_FILE\\""
# env_passthrough = ["ANTHROPIC_API_KEY"]  # the command gets only PATH, HOME, LANG, LC_*,
#                                          # TERM, TMPDIR, USER and these
# reviewer = "command"        # adapter of the review stages; default: the same as above
# reviewer_command = "..."    # its shell command; it writes JSON to $ANDON_REVIEW_FILE
timeout_s = 1800
network = "allow"           # agents reach only their model API (and allow_hosts) through
#                             # andon's proxy, where the sandbox reaches fs+net; "off": no
#                             # network; "on": the host's network (docs/sandbox.md)
# allow_hosts = ["pypi.org", "files.pythonhosted.org", "127.0.0.1:11434"]
# sandbox = "auto"            # the default: agent stages see only their worktree, the tools on
#                             # PATH and a private HOME, where bubblewrap works (docs/sandbox.md)
# sandbox_paths = ["ro:/opt/models"]   # more paths agent stages see ("rw:" to write there)

[stages]
default = ["implement", "review"]   # for packets that name neither stages nor a tier
review_max_asks = 2                 # a reviewer's invalid document is asked for again
# [stages.tiers]
# critical = ["atdd", "implement", "review-tests", "review-correctness"]
"""


# Written into the packets folder by `andon init`: a plain `pytest` run of the repository (a
# developer's, or CI's) must not collect planted tests of work that is not done yet.
PACKETS_CONFTEST = """\
# Written by `andon init`. The planted tests in this folder belong to packets that are not
# done yet: a plain `pytest` run of the repository must not collect them.
collect_ignore_glob = ["*"]
"""


def load_config(repo_root: Path) -> Config:
    """Read ``<repo_root>/andon.toml``.

    Raises:
        ConfigError: the file is missing (suggests ``andon init``), is not valid TOML, or has
            an unknown key or a wrong value; the message gives ``file:line``.
    """
    path = repo_root / CONFIG_NAME
    text, data = _read(path)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        found = []
        for err in exc.errors():
            loc = [p for p in err["loc"] if p != "[key]"]  # a dict key's own error
            found.append((_line_of(text, [str(p) for p in loc]), _describe(err, loc)))
        found.sort(key=lambda item: item[0])  # stable: same-line errors keep pydantic's order
        _raise([Problem(path, line, what) for line, what in found])


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    """The text of andon.toml and its TOML data; ConfigError if missing or not TOML."""
    try:  # a FIFO or a device here is named, never waited on or read without end
        text = plain_file.read(path, follow=True).decode("utf-8")
    except FileNotFoundError:
        _raise([Problem(path, None, "not found; run `andon init` first")])
    except plain_file.NotPlain as exc:
        _raise([Problem(path, None, f"is {exc.what}, not a file andon can read")])
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _raise([toml_problem(path, text, exc, "invalid TOML")])
        raise  # unreachable


def _raise(problems: list[Problem]) -> NoReturn:
    raise ConfigError("\n".join(str(p) for p in problems), problems) from None


def packets_dir_despite_errors(repo_root: Path) -> str | None:
    """``[andon] packets_dir`` of an andon.toml that fails validation but is TOML (the
    default when it does not set one), so packets can still be checked; None when the file
    is missing or not TOML."""
    try:
        _, data = _read(repo_root / CONFIG_NAME)
    except (ConfigError, OSError, UnicodeDecodeError):
        return None
    given = data.get("andon", {}).get("packets_dir") if isinstance(data.get("andon"),
                                                                   dict) else None
    return given if isinstance(given, str) and given else Andon().packets_dir


def _describe(err: Mapping[str, Any], loc: list[str | int]) -> str:
    """One validation error as ``where: what``, with the closest known name for a typo."""
    where = "".join(f" entry {p + 1}" if isinstance(p, int) else f".{p}" for p in loc)[1:]
    given = err["input"]
    if err["type"] == "extra_forbidden":
        name, parent = str(loc[-1]), ".".join(str(p) for p in loc[:-1])
        known = _known_keys(loc[:-1])
        listing = f"known keys of [{parent}]" if parent else "known tables"
        if isinstance(given, dict):  # a whole misspelt table
            table = "[" + (parent + "." if parent else "") + "{}]"
            return f"[{where}]: unknown table; {hint(name, known, listing, table.format)}"
        return f"{where}: unknown key; {hint(name, known, listing)}"
    if err["type"] == "literal_error" and isinstance(given, str):
        expected = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
        near = closest(given, expected)
        if "[key]" in err["loc"]:  # a table named after a stage, e.g. [agents.codex.stages.x]
            suggestion = f"did you mean {near!r}?" if near else "stages: " + ", ".join(expected)
            return f"[{where}]: unknown stage; {suggestion}"
        suggestion = f"did you mean {near!r}?" if near else "expected one of: " + ", ".join(
            repr(e) for e in expected)
        return f"{where}: unknown value {given!r}; {suggestion}"
    if isinstance(given, str) and "://" in given:
        from ..store.postgres import redact  # here: only a message about a URL needs it

        given = redact(given)  # a URL's password ([store] url) never goes into a message
    got = f", got {given!r}" if isinstance(given, (str, int, float, bool)) else ""
    if err["type"] == "list_type" and isinstance(given, str):
        # the usual slip: a command written as one string, as a shell would take it
        words = json.dumps(shlex.split(given)) if _splits(given) else '["…", "…"]'
        return (f"{where}: expected a list (a TOML array), got the string {given!r}; "
                f"write it as {loc[-1]} = {words}")
    return f"{where}: {err['msg']}{got}"


def _splits(text: str) -> bool:
    try:
        return bool(shlex.split(text))
    except ValueError:
        return False


def _known_keys(loc: list[str | int]) -> list[str]:
    """The keys the table at ``loc`` may hold (those of the model found by following the
    field types from Config; dict keys and list indexes are stepped over)."""
    tp: Any = Config
    for part in loc:
        while get_origin(tp) in (Union, types.UnionType):
            tp = next(a for a in get_args(tp) if a is not type(None))
        if get_origin(tp) in (dict, list):
            tp = get_args(tp)[-1]
        elif isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            tp = tp.model_fields[str(part)].annotation
        else:
            return []
    while get_origin(tp) in (Union, types.UnionType):
        tp = next(a for a in get_args(tp) if a is not type(None))
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def _line_of(text: str, loc: list[str]) -> int:
    """1-based line of the dotted ``loc`` (e.g. ``gates.mutation.min_score``) in a TOML text:
    the line of its key, else of its table header, else of the nearest enclosing table's
    header (best effort; 1 if none is found)."""
    want = ".".join(loc)
    current, best = "", 1
    for i, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if s.startswith("["):
            current = s.split("#", 1)[0].strip().strip("[] ").replace('"', "")
            if want == current:
                return i
            if want.startswith(current + "."):
                best = i
        elif m := re.match(r'"?([^"=\s]+)"?\s*=', s):
            full = f"{current}.{m.group(1)}" if current else m.group(1)
            if want == full or want.startswith(full + "."):
                return i
    return best
