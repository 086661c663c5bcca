"""A fake ``gemini`` (Gemini CLI) for tests: headless mode with ``--output-format json``.

It takes the real flags (``--prompt``/``-p``, ``--output-format``/``-o``, ``--model``/``-m``,
``--yolo``), adds standard input to the prompt as the real CLI does, prints a notice on
stderr and one pretty-printed JSON object ``{session_id, response, stats}`` on stdout, with
``stats.models.<model>.tokens {input, prompt, candidates, total, cached, thoughts, tool}``;
the numbers are those of a documented example of the format (24,939 prompt tokens of which
21,263 cached, 20 candidates, 154 thoughts). Exit codes as documented: 1 API error, 42
input error. Scenario keys: ``append``; ``mode`` one of ok, exit_code, timeout, truncated,
unknown_field, huge, no_usage, old_stats, text_output; ``model``.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import edit, hang, record, scenario

FINAL = "I added mul(a, b) to src/calc/ops.py."


def opt(args, *names):
    for n in names:
        if n in args:
            return args[args.index(n) + 1]
    return None


def main():
    args = sys.argv[1:]
    if "--version" in args:
        print("0.9.0")
        return
    prompt = opt(args, "--prompt", "-p")
    if prompt is None:
        sys.stderr.write("fake gemini: only headless mode (--prompt) is faked\n")
        sys.exit(42)
    stdin = "" if sys.stdin.isatty() else sys.stdin.read()
    record(f"{stdin}\n\n{prompt}" if stdin else prompt)
    sc = scenario()
    mode = sc.get("mode", "ok")
    model = opt(args, "--model", "-m") or sc.get("model", "gemini-2.5-pro")
    sys.stderr.write("Loaded cached credentials.\n")
    sys.stderr.flush()
    if mode == "timeout":
        hang()
    if opt(args, "--output-format", "-o") != "json" or mode == "text_output":
        edit(sc)
        print(FINAL)
        return
    if mode == "exit_code":
        print(json.dumps({"error": {"type": "ApiError", "message": "[API Error: quota "
                                    "exceeded]", "code": 1}}, indent=2))
        sys.exit(1)
    edit(sc)
    doc = {"session_id": "c6d6a1b4-3c1f-4f0e-8a47-1f3f0e6f2a10", "response": FINAL,
           "stats": {"models": {model: {
               "api": {"totalRequests": 2, "totalErrors": 0, "totalLatencyMs": 5053},
               "tokens": {"input": 3676, "prompt": 24939, "candidates": 20, "total": 25113,
                          "cached": 21263, "thoughts": 154, "tool": 0}}},
               "tools": {"totalCalls": 1, "totalSuccess": 1, "totalFail": 0,
                         "totalDurationMs": 1881,
                         "totalDecisions": {"accept": 0, "reject": 0, "modify": 0,
                                            "auto_accept": 1},
                         "byName": {"replace": {"count": 1, "success": 1, "fail": 0,
                                                "durationMs": 1881}}},
               "files": {"totalLinesAdded": 2, "totalLinesRemoved": 0}}}
    if mode == "unknown_field":
        doc["warnings"] = ["a newer field"]
        doc["stats"]["latency"] = {"p50": 12}
    if mode == "huge":
        doc["response"] = "y" * sc.get("huge_bytes", 4_000_000)
    if mode == "no_usage":
        del doc["stats"]
    if mode == "old_stats":
        doc["stats"] = {"inputTokens": 12, "outputTokens": 8, "totalTokens": 20}
    text = json.dumps(doc, indent=2)
    if mode == "truncated":
        text = text[: len(text) // 2]
    sys.stdout.write(text + "\n")


main()
