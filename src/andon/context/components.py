"""Which component each segment of the context belongs to, by deterministic rules.

A part's component comes from its role and kind: ``system_prompt``, ``user_instruction``,
``assistant_text``, ``reasoning``, ``image``, ``compaction_summary``, and for tools
``tool_call:<kind>`` / ``tool_result:<kind>`` with kind ``file_read``, ``search``,
``shell``, ``test_run``, ``edit`` or ``other``. A segment that is a tagged element in a
system, user or tool-result text is the document its tag names
(``<product_requirements_document>`` → ``product_requirements_document``). User rules
(``[context] rules`` in andon.toml: a regular expression searched in the segment's text →
a component) come first, in order.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from andon.context.model import Message, Part

READ = {"read", "read_file", "readfile", "view", "open", "cat", "read_many_files",
        "notebookread", "goto", "scroll_up", "scroll_down"}
SEARCH = {"grep", "glob", "search", "search_file_content", "find_file", "search_dir",
          "search_file", "ls", "list_directory", "websearch", "web_search", "webfetch",
          "codebase_search", "find", "rg"}
EDIT = {"edit", "multiedit", "write", "write_file", "replace", "apply_patch", "create",
        "edit_file", "notebookedit", "file_change", "insert", "str_replace"}
SHELL = {"bash", "shell", "run_shell_command", "exec_command", "command", "local_shell",
         "shell_command", "python", "python3", "sh"}
_TEST = re.compile(r"\b(pytest|py\.test|unittest|tox|nox|(npm|yarn|pnpm)( run)? test|go test|"
                   r"cargo test|jest|vitest|mocha|rspec|mvn test|gradle test|make test)\b")
_READ_CMD = {"cat", "head", "tail", "less", "nl", "bat"}
_SEARCH_CMD = {"grep", "rg", "find", "ls", "fd", "ag", "tree"}
_PATH_KEYS = ("file_path", "path", "filename", "absolute_path", "notebook_path", "target_file",
              "file")

Rules = Sequence[tuple[re.Pattern[str], str]]


def command_of(part: Part) -> str:
    """The shell command of a call (its ``command`` argument, a list joined), or ''."""
    cmd: Any = (part.args or {}).get("command", (part.args or {}).get("cmd"))
    if isinstance(cmd, list):
        cmd = cmd[-1] if len(cmd) >= 3 and cmd[1] in ("-lc", "-c") else " ".join(map(str, cmd))
    return cmd if isinstance(cmd, str) else ""


def tool_kind(part: Part) -> str:
    """``file_read``, ``search``, ``shell``, ``test_run``, ``edit`` or ``other``."""
    name = (part.tool or "").lower().rsplit("__", 1)[-1]
    if name == "str_replace_editor":
        return "file_read" if (part.args or {}).get("command") == "view" else "edit"
    cmd = command_of(part)
    if cmd or name in SHELL:
        cmd = cmd or part.text
        if _TEST.search(cmd):
            return "test_run"
        first = cmd.strip().split(maxsplit=1)[0] if cmd.strip() else ""
        if first in _READ_CMD or (first == "sed" and " -n" in cmd):
            return "file_read"
        if (first == "sed" and " -i" in cmd) or "apply_patch" in cmd:
            return "edit"
        if first in _SEARCH_CMD:
            return "search"
        if name in SHELL or cmd:
            return "shell"
    for kind, names in (("file_read", READ), ("search", SEARCH), ("edit", EDIT)):
        if name in names:
            return kind
    return "other"


def paths_of(part: Part) -> list[str]:
    """The files a read or edit call names (arguments, or the command's last word)."""
    args = part.args or {}
    for k in _PATH_KEYS:
        if isinstance(args.get(k), str):
            return [args[k]]
    if isinstance(args.get("paths"), list):
        return [str(p) for p in args["paths"]]
    cmd = command_of(part)
    if cmd:
        try:
            words = shlex.split(cmd)
        except ValueError:
            words = cmd.split()
        if len(words) >= 2 and not words[-1].startswith("-"):
            return [words[-1]]
    return []


def part_component(message: Message, part: Part) -> str:
    """The component of a whole part (see the module docstring)."""
    if part.kind in ("tool_call", "tool_result"):
        return f"{part.kind}:{tool_kind(part)}"
    if part.kind != "text":
        return part.kind
    return {"system": "system_prompt", "user": "user_instruction",
            "assistant": "assistant_text"}.get(message.role, "tool_result:other")


def segment_component(base: str, label: str | None, text: str, rules: Rules) -> str:
    """The component of one segment of a part whose component is ``base``."""
    for pattern, component in rules:
        if pattern.search(text):
            return component
    if (label and label not in ("code",) and text.startswith("<") and base in (
            "system_prompt", "user_instruction")) or (label and text.startswith("<")
                                                     and base.startswith("tool_result")):
        return label  # a document named by its tag
    return base


def compile_rules(rules: Sequence[dict[str, str]] | Sequence[tuple[str, str]]) -> Rules:
    """``[{pattern, component}]`` (andon.toml) or pairs as compiled rules."""
    out = []
    for r in rules:
        pattern, component = (r["pattern"], r["component"]) if isinstance(r, dict) else r
        out.append((re.compile(pattern), component))
    return out
