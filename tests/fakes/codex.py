"""A fake ``codex`` (OpenAI Codex CLI) for tests: ``codex exec`` only.

It takes the real flags (``exec``, ``--json``, ``--output-last-message FILE``, ``--model``,
``--full-auto``, a prompt argument or ``-`` for stdin) and prints the JSONL events of
``codex exec --json``; the events and numbers are those of the sample output in
openai/codex docs/exec.md. Like the real CLI it writes a rollout file under
``$CODEX_HOME`` (default ``$HOME/.codex``) ``/sessions/YYYY/MM/DD/`` whose ``turn_context``
names the model. Scenario keys: ``append`` {path: text}; ``mode`` one of ok, exit_code,
timeout, truncated, unknown_event, huge, no_usage, legacy, text_output, no_rollout;
``model`` (when no --model is given).
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import edit, emit, flood, hang, record, scenario

THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"
FINAL = "Added `mul` to src/calc/ops.py; the tests pass."


def main():
    args = sys.argv[1:]
    if args == ["--version"]:
        print("codex-cli 0.46.0")
        return
    if not args or args[0] != "exec":
        sys.stderr.write("fake codex: only `codex exec` is faked\n")
        sys.exit(2)
    prompt = sys.stdin.read() if args[-1] == "-" else args[-1]
    record(prompt)
    sc = scenario()
    mode = sc.get("mode", "ok")
    model = args[args.index("--model") + 1] if "--model" in args else sc.get(
        "model", "gpt-5-codex")
    if mode != "no_rollout":
        home = Path(os.environ.get("CODEX_HOME") or Path(os.environ["HOME"]) / ".codex")
        day = home / "sessions" / "2025" / "10" / "06"
        day.mkdir(parents=True, exist_ok=True)
        with open(day / f"rollout-2025-10-06T10-00-00-{THREAD}.jsonl", "w") as f:
            f.write(json.dumps({"timestamp": "2025-10-06T10:00:00.000Z", "type": "session_meta",
                                "payload": {"id": THREAD, "cwd": os.getcwd()}}) + "\n")
            f.write(json.dumps({"timestamp": "2025-10-06T10:00:00.100Z", "type": "turn_context",
                                "payload": {"cwd": os.getcwd(), "model": model,
                                            "approval_policy": "never"}}) + "\n")
    if "--json" not in args or mode == "text_output":
        sys.stderr.write("[2025-10-06T10:00:00] OpenAI Codex v0.46.0 (research preview)\n")
        edit(sc)
        print(FINAL)
        return
    if mode == "legacy":
        emit({"id": "0", "msg": {"type": "task_started"}})
        emit({"id": "0", "msg": {"type": "token_count", "input_tokens": 24763,
                                 "cached_input_tokens": 24448, "output_tokens": 122}})
        emit({"id": "0", "msg": {"type": "task_complete", "last_agent_message": FINAL}})
        return
    emit({"type": "thread.started", "thread_id": THREAD})
    emit({"type": "turn.started"})
    if mode == "timeout":
        hang()
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "reasoning",
                                             "text": "**Adding mul to calc.ops**"}})
    emit({"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                                           "command": "bash -lc ls", "aggregated_output": "",
                                           "status": "in_progress"}})
    emit({"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                             "command": "bash -lc ls",
                                             "aggregated_output": "src\ntests\n",
                                             "exit_code": 0, "status": "completed"}})
    edit(sc)
    emit({"type": "item.completed", "item": {"id": "item_2", "type": "file_change",
                                             "changes": [{"path": "src/calc/ops.py",
                                                          "kind": "update"}],
                                             "status": "completed"}})
    if mode == "unknown_event":
        emit({"type": "item.completed", "item": {"id": "item_3", "type": "collab_tool_call"}})
        emit({"type": "thread.compacted", "thread_id": THREAD})
    if mode == "truncated":
        sys.stdout.write('{"type":"item.completed","item":{"id":"item_9","type":"agent_mes\n')
    if mode == "huge":
        flood(sc.get("huge_bytes", 4_000_000), json.dumps(
            {"type": "item.updated", "item": {"id": "item_4", "type": "command_execution",
                                              "command": "yes", "aggregated_output": "y",
                                              "status": "in_progress"}}))
    if mode == "exit_code":
        emit({"type": "turn.failed", "error": {"message": "stream disconnected before "
                                                          "completion"}})
        emit({"type": "error", "message": "stream disconnected before completion"})
        sys.exit(1)
    emit({"type": "item.completed", "item": {"id": "item_5", "type": "agent_message",
                                             "text": FINAL}})
    if "--output-last-message" in args:
        Path(args[args.index("--output-last-message") + 1]).write_text(FINAL)
    if mode == "no_usage":
        emit({"type": "turn.completed"})
    else:
        emit({"type": "turn.completed", "usage": {"input_tokens": 24763,
                                                  "cached_input_tokens": 24448,
                                                  "output_tokens": 122}})


main()
