"""What a real agent CLI costs andon per stage, against the scripted model server.

    .venv/bin/python benchmarks/agent_clis.py [--runs 5] [--keep]

For each installed CLI of tests/agent-clis.txt (found in ``.tools/node_modules/.bin``, put
there by scripts/test; only Claude Code so far), with the scripted model server
(``andon.demo.modelserver``) answering every request at once with the text "done":

1. **start-up of one stage**: the CLI alone (``claude -p --output-format stream-json
   --verbose`` + andon's permission args, the prompt on stdin) from spawn to exit — one model
   request, so this is almost all start-up — median of ``--runs``;
2. **andon's overhead around it**: the same stage through andon's adapter
   (``ClaudeCodeAgent.run``: clean environment, process group, transcript and stderr to disk,
   parsing, pricing): its wall time minus the agent process's own (``duration_s``, timed by
   andon around the process), median of ``--runs`` — measured within each run, so the CLI's
   own variance (large on a busy machine) does not enter it;
3. **one whole packet**: ``andon run --agent claude-code`` on a small project whose packet the
   CLI fixes with its own Read and Edit tools (4 requests); the wall time, the agent stage's
   share, and the rest (worktree, red, gates, merge).

The closing note prints the figures per CLI. Nothing is left behind unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from andon.agents import ClaudeCodeAgent, StageContext
from andon.agents.claude_code import default_permission_args
from andon.config import DEFAULT_TOML, AgentSettings
from andon.demo.modelserver import ModelServer, Script
from andon.packet import load_packets

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".tools" / "node_modules" / ".bin"
PASS = ["ANTHROPIC_BASE_URL", "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"]
GIT = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@example.com",
       "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "b@example.com"}
OPS = "def add(a, b):\n    return a + b\n"
MUL = "\n\ndef mul(a, b):\n    return a * b\n"
PACKET = ('+++\nid = "P1"\nslug = "mul"\ngoal = "calc.ops.mul multiplies."\n'
          'allowed_paths = ["src/calc/**"]\n+++\n\n## Context\n\nAdd mul.\n')
TEST = "from calc.ops import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
REVIEW = ("printf '%s' '{\"verdicts\": [], \"findings\": [], \"decision\": \"accept\"}' "
          "> \"$ANDON_REVIEW_FILE\"")


def env_for(url: str, home: Path) -> dict[str, str]:
    return {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "LANG": "C.UTF-8", "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-bench",
            "CLAUDE_CODE_MAX_RETRIES": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1"}


def project(root: Path, worktrees: Path) -> Path:
    files = {"src/calc/__init__.py": "", "src/calc/ops.py": OPS,
             "tests/test_ops.py": "from calc.ops import add\n\n\ndef test_add():\n"
                                  "    assert add(1, 2) == 3\n",
             ".gitignore": "__pycache__/\n",
             "packets/P1/packet.md": PACKET, "packets/P1/plant/tests/test_mul.py": TEST,
             "andon.toml": DEFAULT_TOML.replace("[andon]\n", f'[andon]\nworktree_root = '
                                                f'"{worktrees}"\n', 1)
             + f"\n[agents.claude-code]\nenv_passthrough = {json.dumps(PASS)}\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "p"]):
        subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT}, check=True)
    return root


def raw_stage(claude: Path, url: str, tmp: Path) -> float:
    cwd = tmp / "raw"
    cwd.mkdir(exist_ok=True)
    argv = [str(claude), "-p", "--output-format", "stream-json", "--verbose",
            *default_permission_args(os.geteuid())]
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=b"Say done.", cwd=cwd, env=env_for(url, tmp / "home"),
                       capture_output=True, timeout=120, check=False)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"claude exited {p.returncode}: {p.stderr.decode()[-500:]}")
    return took


def adapter_stage(url: str, tmp: Path, root: Path, n: int) -> tuple[float, float]:
    packet = load_packets(root / "packets", root)[0]
    wt, ev = tmp / f"wt{n}", tmp / f"ev{n}"
    wt.mkdir()
    ev.mkdir()
    (ev / "implement.prompt.md").write_text("Say done.")
    agent = ClaudeCodeAgent(AgentSettings(env_passthrough=PASS), None,
                            env_for(url, tmp / "home"))
    ctx = StageContext(packet, "implement", 1, wt, "Say done.", ev / "implement.prompt.md",
                       ev, 120)
    t0 = time.perf_counter()
    run = agent.run(ctx)
    took = time.perf_counter() - t0
    if run.exit_status != 0:
        raise SystemExit(f"the adapter's claude exited {run.exit_status}: {run.claim[-500:]}")
    return took, took - run.duration_s


def whole_packet(url_server: type[ModelServer], tmp: Path) -> dict[str, float]:
    wts = tmp / "worktrees"
    root = project(tmp / "proj", wts)
    ops = str(wts / "P1-1" / "src/calc/ops.py")
    script = Script([{"tool": "Read", "input": {"file_path": ops}},
                     {"tool": "Edit", "input": {"file_path": ops, "old_string": OPS,
                                                "new_string": OPS + MUL}},
                     {"text": "Added mul."}])
    with url_server(script) as s:
        env = {**os.environ, **GIT, **env_for(s.url, tmp / "home"),
               "PATH": f"{BIN}:{os.environ['PATH']}"}
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "andon", "-C", str(root), "run", "--agent",
                            "claude-code", "--reviewer-command", REVIEW], env=env,
                           capture_output=True, text=True, timeout=600, check=False)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"andon run exited {r.returncode}:\n{r.stdout[-2000:]}{r.stderr}")
    show = json.loads(subprocess.run([sys.executable, "-m", "andon", "-C", str(root), "show",
                                      "P1", "--json"], env=env, capture_output=True,
                                     text=True, check=True).stdout)
    stage = next(x for x in show["attempts"][0]["stages"] if x["stage"] == "implement")
    return {"wall": wall, "agent": stage["duration_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    claude = BIN / "claude"
    if not claude.exists():
        print(f"{claude} is not installed: run scripts/test first", file=sys.stderr)
        return 2
    version = subprocess.run([str(claude), "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="andon-bench-clis-"))
    try:
        (tmp / "home").mkdir()
        root = project(tmp / "ctxproj", tmp / "unused")
        raw, adapted, overhead = [], [], []
        with ModelServer(Script([])) as s:
            raw_stage(claude, s.url, tmp)   # warm the file cache; not counted
            for n in range(a.runs):
                raw.append(raw_stage(claude, s.url, tmp))
                took, extra = adapter_stage(s.url, tmp, root, n)
                adapted.append(took)
                overhead.append(extra)
                print(f"run {n + 1}: CLI alone {raw[-1]:.2f} s, through andon's adapter "
                      f"{took:.2f} s of which andon {extra * 1000:.0f} ms", flush=True)
        packet = whole_packet(ModelServer, tmp)
    finally:
        if a.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    r, s_, o = (statistics.median(raw), statistics.median(adapted),
                statistics.median(overhead))
    print(f"\nclaude-code ({version}), {a.runs} runs each, median:")
    print(f"  start-up of one stage (one request, CLI alone): {r:.2f} s "
          f"(min {min(raw):.2f}, max {max(raw):.2f})")
    print(f"  the same stage through andon's adapter:          {s_:.2f} s, of which andon "
          f"(around the process) {o * 1000:.0f} ms")
    print(f"  one whole packet (andon run, 4 requests): {packet['wall']:.1f} s, of which the "
          f"agent stage {packet['agent']:.1f} s and andon (worktree, red, gates, merge, "
          f"review command) {packet['wall'] - packet['agent']:.1f} s")
    print("\nClosing note: Claude Code's start-up dominates a stage that does little "
          f"({r:.1f} s before and around one model request); andon's adapter adds "
          f"{o * 1000:.0f} ms to it (clean environment, transcript on disk, parsing, "
          "pricing). Codex, Gemini CLI and Aider are not measured "
          "yet: their end-to-end set-up is not built.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
