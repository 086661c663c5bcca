"""A fake ``aider`` for tests: one-message scripting mode only.

It takes the real flags (``--message-file``, ``--yes-always``, ``--no-auto-commits``,
``--no-gitignore``, ``--analytics-log FILE``, ``--chat-history-file`` ...), prints what aider
prints (the version and model lines, the reply, one ``Tokens: ... Cost: ...`` line per LLM
request) and appends to the analytics log the JSON lines of aider/analytics.py
(``{event, properties, user_id, time}``, a ``message_send`` event per request with
``prompt_tokens``, ``completion_tokens``, ``cost``, ``total_cost``). Like aider it makes a
tag cache ``.aider.tags.cache.v4/`` in the repository, and without ``--no-gitignore`` adds
``.aider*`` to ``.gitignore``. The token numbers follow genai-prices' README example
(a 4,740-token prompt of which 4,735 written to the cache, 255 received) at claude-sonnet-4
prices, logged as current aider logs them (aider#5516): ``prompt_tokens`` and the printed
``sent`` are litellm's prompt tokens (both cache classes included) PLUS the cache writes
again; the Tokens: line rounds like aider's ``format_tokens``; with both a cache hit and a
cache write the Cost: goes on the next line.
Scenario keys: ``append``; ``mode`` one of ok, no_analytics, zero_cost, exit_code, timeout,
truncated, huge, no_usage, model_line, api_error (what the real 0.86.2 does when the model API
fails: it prints litellm's error and exits 0), error_after_answer (an answer, then a failed
request, exit 0).
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import edit, flood, hang, record, scenario

MODEL = "anthropic/claude-sonnet-4-20250514"
REQUESTS = [  # litellm prompt_tokens (cache included), cache write, cache hit, completion, cost
    (4740, 4735, 0, 255, 0.02159625),
    (5120, 0, 4735, 80, 0.0037755),
]


def format_tokens(n):
    """aider's format_tokens."""
    return f"{n}" if n < 1000 else f"{n / 1000:.1f}k" if n < 10000 else f"{round(n / 1000)}k"


def opt(args, name):
    return args[args.index(name) + 1] if name in args else None


def main():
    args = sys.argv[1:]
    if "--version" in args:
        print("aider 0.86.1")
        return
    message_file = opt(args, "--message-file")
    if message_file is None:
        sys.stderr.write("fake aider: only --message-file is faked\n")
        sys.exit(2)
    prompt = Path(message_file).read_text()
    record(prompt)
    sc = scenario()
    mode = sc.get("mode", "ok")
    model = opt(args, "--model") or MODEL
    log = opt(args, "--analytics-log") if mode != "no_analytics" else None
    if "--no-gitignore" not in args:
        with open(".gitignore", "a") as f:
            f.write(".aider*\n")
    Path(".aider.tags.cache.v4").mkdir(exist_ok=True)
    (Path(".aider.tags.cache.v4") / "cache.db").write_bytes(b"SQLite format 3\0")
    print("Aider v0.86.1")
    if mode == "model_line":
        print(f"Model: {model} with diff edit format, infinite output")
    else:
        print(f"Main model: {model} with diff edit format, infinite output")
    print("Git repo: .git with 5 files\nRepo-map: using 4096 tokens, auto refresh\n")
    event(log, "launched", {})
    event(log, "cli session", {"main_model": model, "edit_format": "diff"})
    if mode == "timeout":
        hang()
    if mode == "exit_code":
        print("litellm.AuthenticationError: AnthropicException - invalid x-api-key")
        sys.exit(1)
    if mode == "api_error":
        print("litellm.AuthenticationError: OpenAIException - invalid x-api-key")
        print("The API provider is not able to authenticate you. Check your API key.")
        return
    total = 0.0
    for i, (prompt_tokens, write, hit, got, cost) in enumerate(REQUESTS):
        sent = prompt_tokens + write          # aider adds the cache writes again
        body = f"{format_tokens(sent)} sent"
        body += f", {format_tokens(write)} cache write" if write else ""
        body += f", {format_tokens(hit)} cache hit" if hit else ""
        body += f", {format_tokens(got)} received"
        print("src/calc/ops.py\n<<<<<<< SEARCH\n=======\ndef mul(a, b):\n    return a * b\n"
              ">>>>>>> REPLACE\n")
        if mode == "no_usage":
            continue
        if mode == "zero_cost":
            cost = 0.0
        total += cost
        price = "" if mode == "zero_cost" else (
            f" Cost: ${cost:.2f} message, ${total:.2f} session.")
        print(f"Tokens: {body}.{price}")
        history = opt(args, "--chat-history-file")
        if history and mode != "no_analytics":   # aider quotes its reports there
            with open(history, "a") as f:
                f.write(f"> Tokens: {body}.{price}  \n")
        if mode == "truncated" and i == 1:
            with open(log, "a") as f:
                f.write('{"event": "message_send", "properties": {"main_model": "anth\n')
            continue
        event(log, "message_send", {"main_model": model, "edit_format": "diff",
                                    "prompt_tokens": sent, "completion_tokens": got,
                                    "total_tokens": sent + got, "cost": cost,
                                    "total_cost": total})
    edit(sc)
    print("Applied edit to src/calc/ops.py")
    if mode == "error_after_answer":
        print("litellm.InternalServerError: OpenAIException - Internal server error")
    if mode == "huge":
        flood(sc.get("huge_bytes", 4_000_000), "Tokens: 1 sent, 1 received.  " + "x" * 60)
    event(log, "exit", {"reason": "Completed --message"})


def event(log, name, properties):
    if not log:
        return
    with open(log, "a") as f:
        f.write(json.dumps({"event": name, "properties": properties,
                            "user_id": "0b6f1d4e-6f3e-4d43-9a55-0f6f52c1b111",
                            "time": int(time.time())}) + "\n")


main()
