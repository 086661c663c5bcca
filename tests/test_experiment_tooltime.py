"""`tool_s`: seconds in tool calls from a transcript's timestamps, through the `andon context`
parsers; parallel calls counted once; None (never 0) where the format cannot say."""

from __future__ import annotations

import json
from pathlib import Path

from andon.experiments.tooltime import tool_seconds

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"


def _claude_session(path: Path, events: list[tuple[str, str, list[dict] | str]]) -> Path:
    """A Claude Code session log: (time, role, content) per record."""
    lines = []
    for i, (at, role, content) in enumerate(events):
        message: dict = {"role": role, "content": content}
        if role == "assistant":
            message.update(id=f"msg{i}", model="claude-sonnet-4-20250514", usage={
                "input_tokens": 10, "output_tokens": 5})
        lines.append(json.dumps({"uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None,
                                 "sessionId": "s1", "type": role, "requestId": f"r{i}",
                                 "timestamp": f"2026-01-01T00:00:{at}Z", "message": message}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _use(call: str) -> dict:
    return {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": "ls"}}


def _result(call: str) -> dict:
    return {"type": "tool_result", "tool_use_id": call, "content": "ok"}


def test_claude_session_parallel_calls_count_once(tmp_path):
    log = _claude_session(tmp_path / "s.jsonl", [
        ("00.000", "user", "go"),
        ("01.000", "assistant", [_use("t1"), _use("t2")]),  # two calls at once
        ("04.000", "user", [_result("t1")]),
        ("06.000", "user", [_result("t2")]),
        ("07.000", "assistant", [_use("t3")]),
        ("07.500", "user", [_result("t3")]),
        ("09.000", "assistant", [{"type": "text", "text": "done"}]),
    ])
    # [1, 4] and [1, 6] overlap: 5 s, not 8; then 0.5 s
    assert tool_seconds([log]) == 5.5
    assert tool_seconds([log, log]) == 11.0  # stages add up


def test_no_tool_call_is_zero_and_a_missing_timestamp_is_unknown(tmp_path):
    quiet = _claude_session(tmp_path / "q.jsonl", [
        ("00.000", "user", "go"), ("02.000", "assistant", [{"type": "text", "text": "hi"}])])
    assert tool_seconds([quiet]) == 0.0
    log = _claude_session(tmp_path / "s.jsonl", [
        ("00.000", "user", "go"), ("01.000", "assistant", [_use("t1")]),
        ("04.000", "user", [_result("t1")])])
    text = log.read_text().replace('"timestamp": "2026-01-01T00:00:04.000Z", ', "")
    log.write_text(text)
    assert tool_seconds([log]) is None
    # one stage that cannot say makes the run's figure unknown, not a partial sum
    assert tool_seconds([quiet, log]) is None


def test_formats_without_timestamps_are_unknown(tmp_path):
    assert tool_seconds([]) is None
    plain = tmp_path / "implement.transcript.log"
    plain.write_text("Done! All tests pass.\n")
    assert tool_seconds([plain]) is None
    for name in ("claude-stream-json/basic_query-2.1.7.ndjson",
                 "codex-exec-json/exec-0.46-command.jsonl",
                 "aider/metadata-aider.chat.history.md"):
        assert tool_seconds([FIXTURES / name]) is None, name


def test_codex_rollout_fixture_against_its_own_timestamps():
    path = FIXTURES / "codex-rollout" / "rollout-0.77-codemie.jsonl"
    # independently: function_call → function_call_output by call_id, union of the spans
    from datetime import datetime
    calls, spans = {}, []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        p = rec.get("payload") or {}
        at = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00"))
        if p.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
            calls[p.get("call_id")] = at
        elif p.get("type") in ("function_call_output", "custom_tool_call_output") \
                and p.get("call_id") in calls:
            spans.append((calls.pop(p["call_id"]), at))
    total, end = 0.0, None
    for a, b in sorted(spans):
        a = max(a, end) if end else a
        if b > a:
            total += (b - a).total_seconds()
            end = max(b, end) if end else b
    assert spans and tool_seconds([path]) == round(total, 3)
