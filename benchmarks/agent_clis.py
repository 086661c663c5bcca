"""What a real agent CLI costs andon per stage, against the scripted model server.

    .venv/bin/python benchmarks/agent_clis.py [--runs 5] [--keep]

For each CLI of tests/agent-clis.txt installed in ``.tools/node_modules/.bin`` or, for Aider,
``.tools/aider-venv/bin`` (put there by scripts/test: Claude Code, Codex, Gemini CLI, Aider
on ``openai/gpt-4o`` through the server's Chat Completions), with the scripted model server
(``andon.demo.modelserver``) answering every request at once with the text "done":

1. **start-up of one stage**: the CLI alone — exactly the argv and environment andon's
   adapter would give it, in a fresh git folder — from spawn to exit; one model request (plus
   the side requests the CLI makes for itself), so this is almost all start-up; median of
   ``--runs``;
2. **andon's overhead around it**: the same stage through andon's adapter
   (``<Adapter>.run``: clean environment, process group, transcript and stderr to disk,
   parsing, pricing): its wall time minus the agent process's own (``duration_s``, timed by
   andon around the process), median of ``--runs`` — measured within each run, so the CLI's
   own variance (large on a busy machine) does not enter it;
3. **one whole packet** (Claude Code only): ``andon run --agent claude-code`` on a small
   project whose packet the CLI fixes with its own Read and Edit tools (4 requests); the wall
   time, the agent stage's share, and the rest (worktree, red, gates, merge).

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from andon.agents import AiderAgent, ClaudeCodeAgent, CodexAgent, GeminiAgent, StageContext
from andon.agents.external import RunFiles
from andon.config import DEFAULT_TOML, AgentSettings
from andon.demo.modelserver import ModelServer, Script
from andon.packet import load_packets

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".tools" / "node_modules" / ".bin"
AIDER_BIN = ROOT / ".tools" / "aider-venv" / "bin"   # pip-installed, its own venv
EXES = {"claude-code": BIN / "claude", "codex": BIN / "codex", "gemini": BIN / "gemini",
        "aider": AIDER_BIN / "aider"}
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


def adapters(url: str, home: Path) -> dict[str, Callable[[], tuple[Any, dict[str, str]]]]:
    """Per CLI: how to build its adapter (as andon builds it for a user; an adapter refuses
    to be built when its CLI is not installed) and that user's environment."""
    base = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "LANG": "C.UTF-8"}
    provider = (f'model_providers.scripted={{name="scripted",base_url="{url}/v1",'
                'wire_api="responses",env_key="OPENAI_API_KEY"}')
    claude_env = {k: v for k, v in env_for(url, home).items() if k not in base}
    codex_args = ["-c", 'model_provider="scripted"', "-c", provider]
    return {
        "claude-code": lambda: (ClaudeCodeAgent(AgentSettings(env_passthrough=PASS), None,
                                                {**base, **claude_env}), {}),
        "codex": lambda: (CodexAgent(AgentSettings(extra_args=codex_args), None,
                                     {**base, "OPENAI_API_KEY": "sk-bench"}), {}),
        "gemini": lambda: (GeminiAgent(AgentSettings(env_passthrough=["GOOGLE_GEMINI_BASE_URL"]),
                                       None, {**base, "GEMINI_API_KEY": "bench",
                                              "GOOGLE_GEMINI_BASE_URL": url}), {}),
        "aider": lambda: (AiderAgent(AgentSettings(model="openai/gpt-4o",
                                                   extra_args=["--openai-api-base",
                                                               url + "/v1"]),
                                     None, {**base, "PATH": f"{AIDER_BIN}:{base['PATH']}",
                                            "OPENAI_API_KEY": "sk-bench"}), {}),
    }


def stage_ctx(tmp: Path, root: Path, name: str) -> StageContext:
    packet = load_packets(root / "packets", root)[0]
    wt, ev = tmp / f"wt-{name}", tmp / f"ev-{name}"
    for d in (wt, ev):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=wt, check=True)
    (ev / "implement.prompt.md").write_text("Say done.")
    return StageContext(packet, "implement", 1, wt, "Say done.", ev / "implement.prompt.md",
                        ev, 300)


def raw_stage(agent: Any, ctx: StageContext) -> float:
    """The CLI alone: the adapter's argv and environment, nothing of andon around it."""
    s = agent.settings.for_stage(ctx.stage)
    files = RunFiles(ctx.evidence_dir / "raw.out", ctx.evidence_dir / "raw.err",
                     ctx.evidence_dir / "raw")
    argv, env = agent.argv(ctx, s, files), agent.env(ctx, s)
    argv[0] = str(EXES[agent.name])
    with open(agent.stdin(ctx), "rb") as stdin:
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdin=stdin, cwd=ctx.worktree, env=env,
                           capture_output=True, timeout=300, check=False)
        took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {p.returncode}: {p.stderr.decode()[-500:]}"
                         f"{p.stdout.decode()[-500:]}")
    return took


def adapter_stage(agent: Any, ctx: StageContext) -> tuple[float, float]:
    t0 = time.perf_counter()
    run = agent.run(ctx)
    took = time.perf_counter() - t0
    if run.exit_status != 0:
        raise SystemExit(f"the {agent.name} adapter's CLI exited {run.exit_status}: "
                         f"{run.claim[-500:]}")
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
    installed = [n for n, exe in EXES.items() if exe.exists()]
    if not installed:
        print(f"no agent CLI in {BIN} or {AIDER_BIN}: run scripts/test first",
              file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="andon-bench-clis-"))
    results: dict[str, dict[str, Any]] = {}
    try:
        home = tmp / "home"
        (home / ".gemini").mkdir(parents=True)
        (home / ".gemini" / "settings.json").write_text(    # the user's own Gemini set-up
            json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
        root = project(tmp / "ctxproj", tmp / "unused")
        with ModelServer(Script([])) as s:
            table = adapters(s.url, home)
            for name in installed:
                agent, _ = table[name]()
                version = subprocess.run([str(EXES[name]), "--version"],
                                         capture_output=True, text=True,
                                         check=True).stdout.strip()
                raw_stage(agent, stage_ctx(tmp, root, name))   # warm the caches; not counted
                raw, adapted, overhead = [], [], []
                for n in range(a.runs):
                    raw.append(raw_stage(agent, stage_ctx(tmp, root, name)))
                    took, extra = adapter_stage(agent, stage_ctx(tmp, root, name))
                    adapted.append(took)
                    overhead.append(extra)
                    print(f"{name} run {n + 1}: CLI alone {raw[-1]:.2f} s, through andon's "
                          f"adapter {took:.2f} s of which andon {extra * 1000:.0f} ms",
                          flush=True)
                results[name] = {"version": version, "raw": raw, "adapted": adapted,
                                 "overhead": overhead}
        packet = whole_packet(ModelServer, tmp) if "claude-code" in installed else None
    finally:
        if a.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    for name, r in results.items():
        raw, o = statistics.median(r["raw"]), statistics.median(r["overhead"])
        print(f"{name} ({r['version']}), {a.runs} runs each, median: one stage {raw:.2f} s "
              f"(min {min(r['raw']):.2f}, max {max(r['raw']):.2f}); through the adapter "
              f"{statistics.median(r['adapted']):.2f} s, of which andon around the process "
              f"{o * 1000:.0f} ms")
    if packet:
        print(f"claude-code, one whole packet (andon run, 4 requests): {packet['wall']:.1f} s, "
              f"of which the agent stage {packet['agent']:.1f} s and andon (worktree, red, "
              f"gates, merge, review command) {packet['wall'] - packet['agent']:.1f} s")
    notes = "; ".join(f"{n} {statistics.median(r['raw']):.1f} s per stage, andon "
                      f"{statistics.median(r['overhead']) * 1000:.0f} ms around it"
                      for n, r in results.items())
    missing = [n for n in EXES if n not in installed]
    print(f"\nClosing note: start-up dominates a stage that does little — {notes}. "
          "andon's share is its clean environment, transcript on disk, parsing and pricing."
          + (f" Not installed, not measured: {', '.join(missing)}." if missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
