"""``andon demo --agent claude-code``: the demo's packets through the real Claude Code, against
the scripted model server, with no account.

The demo's scripted behaviours (:data:`andon.demo.agents.BEHAVIOURS`) decide what each stage
does; here they decide what the *model* tells Claude Code to do. When a conversation starts,
the server finds its worktree (the working directory Claude Code names in its system prompt:
``<worktree_root>/<packet>-<attempt>``), runs the packet's behaviour on a copy of it with the
prompt the CLI was given, and answers with one ``Write`` tool call per file the behaviour
changed, then the behaviour's claim as text. Claude Code's own Write tool makes the change in
andon's worktree; andon gates it as it would any agent's. The reviewer stays the demo's
scripted one.

The CLI is found on PATH or in ``.tools/node_modules/.bin`` of andon's checkout (where
scripts/test installs the pinned version). Its environment: HOME in the demo's folder (your
login is not used), ``ANTHROPIC_BASE_URL`` = the server, a dummy ``ANTHROPIC_API_KEY``, one
retry, no non-essential traffic; andon's default permission args (as root: the allowlist).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..agents import ClaudeCodeAgent, StageContext
from ..config import AgentSettings
from ..packet import load_packets
from .agents import BEHAVIOURS
from .modelserver import ModelServer, Script

PASSTHROUGH = ["ANTHROPIC_BASE_URL", "CLAUDE_CODE_MAX_RETRIES",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]
TOOLS_BIN = Path(__file__).resolve().parents[3] / ".tools" / "node_modules" / ".bin"
_CWD = re.compile(r"[Ww]orking directory: (/[^\s\\\"]+)")


def find_claude(environ: dict[str, str]) -> str | None:
    """The ``claude`` executable: on PATH, else in andon's ``.tools``."""
    found = shutil.which("claude", path=environ.get("PATH", os.defpath))
    if found:
        return found
    local = TOOLS_BIN / "claude"
    return str(local) if local.exists() else None


class DemoModel:
    """The chooser of the demo's model server: a conversation's turns, made once per
    worktree from the packet's scripted behaviour."""

    def __init__(self, root: Path, worktree_root: Path):
        self.root, self.worktree_root = root, worktree_root
        self.packets = {p.id: p for p in load_packets(root / "packets", root)}
        self.cache: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        text = json.dumps(body.get("system")) + json.dumps(body.get("messages"))
        m = _CWD.search(text)
        where = Path(m.group(1)) if m else None
        if where is None or where.parent != self.worktree_root:
            return [{"text": "I do not know this folder."}]
        with self.lock:
            if str(where) not in self.cache:
                self.cache[str(where)] = self._turns(where, _first_user_text(body))
            return self.cache[str(where)]

    def _turns(self, worktree: Path, prompt: str) -> list[dict[str, Any]]:
        pid, _, n = worktree.name.rpartition("-")
        behaviour, packet = BEHAVIOURS.get(pid), self.packets.get(pid)
        if behaviour is None or packet is None:
            return [{"text": f"No script for {worktree.name}."}]
        with tempfile.TemporaryDirectory(prefix="andon-demo-model-") as tmp:
            copy = Path(tmp) / "wt"
            shutil.copytree(worktree, copy, ignore=shutil.ignore_patterns(".git"))
            ev = Path(tmp) / "ev"
            ev.mkdir()
            (ev / "implement.prompt.md").write_text(prompt)
            claim = behaviour(StageContext(packet, "implement", int(n or 1), copy, prompt,
                                           ev / "implement.prompt.md", ev, 60)) or "Done."
            turns = [{"tool": "Write", "input": {"file_path": str(worktree / rel),
                                                 "content": text}}
                     for rel, text in _changed(worktree, copy)]
        return [*turns, {"text": claim}]


def _first_user_text(body: dict[str, Any]) -> str:
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    return ""


def _changed(before: Path, after: Path) -> list[tuple[str, str]]:
    out = []
    for path in sorted(after.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(after).as_posix()
        old = before / rel
        text = path.read_text(encoding="utf-8")
        if not old.is_file() or old.read_text(encoding="utf-8") != text:
            out.append((rel, text))
    return out


def start(root: Path, worktree_root: Path) -> ModelServer:
    """The scripted server for the demo at ``root`` (caller stops it)."""
    return ModelServer(Script(chooser=DemoModel(root, worktree_root))).start()


def claude_agent(claude: str, server_url: str, home: Path, settings: AgentSettings | None,
                 prices: dict) -> ClaudeCodeAgent:
    """andon's claude-code adapter as a user would have it, pointed at the server."""
    s = settings or AgentSettings()
    s = s.model_copy(update={"env_passthrough": [*(s.env_passthrough or []), *PASSTHROUGH]})
    home.mkdir(parents=True, exist_ok=True)
    environ = {"PATH": f"{Path(claude).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               "HOME": str(home), "LANG": os.environ.get("LANG", "C.UTF-8"),
               "ANTHROPIC_BASE_URL": server_url, "ANTHROPIC_API_KEY": "sk-ant-demo",
               "CLAUDE_CODE_MAX_RETRIES": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1"}
    return ClaudeCodeAgent(s, prices, environ)
