"""A fake ``claude`` (Claude Code CLI) for tests: headless mode only.

It checks its flags as the real CLI does (``-p``; ``--output-format stream-json`` needs
``--verbose``; a prompt on stdin or as an argument) and prints the stream-json events the
real one prints: ``system/init``, ``assistant`` and ``user`` messages, a final ``result``.
The assistant messages (ids, content blocks, usage) are taken from a real Claude Code 1.0.98
session log: shared/fixtures/transcripts/claude-code/1af7fc5e.jsonl (d-kimuson/
claude-code-viewer, MIT). Scenario keys (all optional): ``append`` {path: text} edits to make;
``model``; ``mode`` one of ok, no_cost, no_usage, old_version, exit_code, timeout, truncated,
unknown_event, huge, text_output; ``huge_bytes``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import edit, emit, flood, hang, record, scenario

SESSION = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
MSG1 = {"id": "msg_01TqDZoU6FcpxB4u2AmpgWfZ", "usage": {
    "input_tokens": 3, "cache_creation_input_tokens": 10816, "cache_read_input_tokens": 4734,
    "cache_creation": {"ephemeral_5m_input_tokens": 10816, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 322, "service_tier": "standard"}}
MSG2 = {"id": "msg_018mu4atNCkxSiLt7VVQquTL", "usage": {
    "input_tokens": 6, "cache_creation_input_tokens": 304, "cache_read_input_tokens": 15550,
    "cache_creation": {"ephemeral_5m_input_tokens": 304, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 285, "service_tier": "standard"}}
FINAL = "I added `mul` to src/calc/ops.py. All tests pass."
# Sum of the two messages: 9 uncached input, 11120 cache write, 20284 cache read, 607 output.
# At claude-sonnet-4 list prices ($3 / $15 / $3.75 / $0.30 per Mtok) that is $0.0569172.
COST = 0.0569172


def message(model, msg, content, partial_output=None):
    usage = dict(msg["usage"])
    if partial_output is not None:
        usage["output_tokens"] = partial_output
    return {"type": "assistant", "message": {
        "id": msg["id"], "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": None, "stop_sequence": None, "usage": usage},
        "parent_tool_use_id": None, "session_id": SESSION}


def main():
    args = sys.argv[1:]
    if args == ["--version"]:
        print("2.0.37 (Claude Code)")
        return
    if "-p" not in args and "--print" not in args:
        sys.stderr.write("fake claude: only headless mode (-p) is faked\n")
        sys.exit(2)
    fmt = args[args.index("--output-format") + 1] if "--output-format" in args else "text"
    if fmt == "stream-json" and "--verbose" not in args:
        sys.stderr.write("Error: When using --print, --output-format=stream-json requires "
                         "--verbose\n")
        sys.exit(1)
    prompt = sys.stdin.read()
    record(prompt)
    if not prompt.strip():
        sys.stderr.write("Error: Input must be provided either through stdin or as a prompt "
                         "argument when using --print\n")
        sys.exit(1)
    sc = scenario()
    mode = sc.get("mode", "ok")
    model = args[args.index("--model") + 1] if "--model" in args else sc.get(
        "model", "claude-sonnet-4-20250514")
    if mode == "text_output":
        print(FINAL)
        return
    init = {"type": "system", "subtype": "init", "cwd": str(Path.cwd()),
            "session_id": SESSION, "tools": ["Bash", "Edit", "Read"], "mcp_servers": [],
            "model": model, "permissionMode": "bypassPermissions", "apiKeySource": "none"}
    init["version" if mode == "old_version" else "claude_code_version"] = (
        "1.0.98" if mode == "old_version" else "2.0.37")
    emit(init)
    if mode == "timeout":
        hang()
    emit(message(model, MSG1, [{"type": "text", "text": "I'll add the function."}], 8))
    emit(message(model, MSG1, [{"type": "tool_use", "id": "toolu_01FHpVtawG6NqQ943umBMky8",
                                "name": "Edit", "input": {"file_path": "src/calc/ops.py"}}]))
    edit(sc)
    emit({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_01FHpVtawG6NqQ943umBMky8", "type": "tool_result",
         "content": "The file src/calc/ops.py has been updated."}]},
        "parent_tool_use_id": None, "session_id": SESSION})
    if mode == "unknown_event":
        emit({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"},
              "session_id": SESSION})
        emit({"type": "system", "subtype": "compact_boundary", "session_id": SESSION})
    if mode == "truncated":
        sys.stdout.write('{"type": "assistant", "message": {"id": "msg_trunc", "content": [\n')
    if mode == "huge":
        flood(sc.get("huge_bytes", 4_000_000), '{"type": "stream_event", "event": {"type": '
              '"content_block_delta", "delta": {"type": "text_delta", "text": "yes"}}}')
    emit(message(model, MSG2, [{"type": "text", "text": FINAL}]))
    if mode == "exit_code":
        emit({"type": "result", "subtype": "error_during_execution", "is_error": True,
              "duration_ms": 1200, "num_turns": 2, "session_id": SESSION,
              "total_cost_usd": COST, "usage": usage_block()})
        sys.exit(1)
    result = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 5321,
              "duration_api_ms": 4900, "num_turns": 3, "result": FINAL, "session_id": SESSION,
              "total_cost_usd": COST, "usage": usage_block(),
              "modelUsage": {model: {"inputTokens": 9, "outputTokens": 607,
                                     "cacheReadInputTokens": 20284,
                                     "cacheCreationInputTokens": 11120,
                                     "webSearchRequests": 0, "costUSD": COST,
                                     "contextWindow": 200000}},
              "permission_denials": [], "uuid": "5b1f0c84-1b4a-4f0e-9d53-8d9b4a1e2c11"}
    if mode in ("no_cost", "no_usage"):
        del result["total_cost_usd"]
        del result["modelUsage"][model]["costUSD"]
    if mode == "no_usage":
        del result["usage"], result["modelUsage"]
    if mode == "old_version":  # Claude Code 1.0.x: cost_usd, no modelUsage
        result["cost_usd"] = result.pop("total_cost_usd")
        del result["modelUsage"]
    emit(result)


def usage_block():
    return {"input_tokens": 9, "cache_creation_input_tokens": 11120,
            "cache_read_input_tokens": 20284, "output_tokens": 607,
            "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"}


main()
