"""Fake agent CLIs (claude, codex, aider, gemini) for tests: they take the real CLI's flags,
print the real documented output formats, and edit the working directory like an agent."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent


def install(bin_dir: Path, name: str, scenario: dict | None = None) -> Path:
    """Put an executable ``bin_dir/name`` running the fake ``tests/fakes/<name>.py``, copied
    with ``_common.py`` into ``bin_dir/.fakes``: the fake is self-contained, as an installed
    CLI is (inside the agent sandbox the tests folder may be invisible: a clone below /tmp)."""
    code = bin_dir / ".fakes"
    code.mkdir(parents=True, exist_ok=True)
    for module in ("_common.py", f"{name}.py"):
        (code / module).write_text((HERE / module).read_text())
    exe = bin_dir / name
    # runpy.run_path sets sys.argv[0] to the fake's own path: tell _common the launcher's.
    exe.write_text(f"#!{sys.executable}\nimport runpy, sys\nfrom pathlib import Path\n"
                   f"sys.path.insert(0, {str(code)!r})\nimport _common\n"
                   f"_common.LAUNCHER = Path({str(exe)!r})\n"
                   f"runpy.run_path({str(code / (name + '.py'))!r}, run_name='__main__')\n")
    exe.chmod(0o755)
    (bin_dir / f"{name}.scenario.json").write_text(json.dumps(scenario or {}))
    return exe


def calls(bin_dir: Path, name: str) -> list[dict]:
    path = bin_dir / f"{name}.calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def path_with(bin_dir: Path) -> str:
    """PATH with ``bin_dir`` first (the fakes shadow any real agent installed)."""
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
