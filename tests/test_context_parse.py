"""andon context: every real transcript parses into the normalised model, reported totals
are reproduced exactly, Claude Code usage counts once per response, bad input is named."""

import json
from collections import Counter
from pathlib import Path

import pytest

from andon.context import FORMATS, TranscriptError, detect, load

T = Path(__file__).parent / "fixtures" / "transcripts"
FIXTURES = sorted(p for p in T.rglob("*") if p.is_file() and p.name != "README.md")
EXPECTED = {"aider": "aider", "claude-code": "claude-code",
            "claude-stream-json": "claude-stream-json", "codex-exec-json": "codex-exec-json",
            "codex-rollout": "codex-rollout", "gemini-cli": None,
            "mini-swe-agent": "mini-swe-agent", "openai-responses": "openai-responses",
            "swe-agent": "swe-agent"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_parses_and_its_format_is_detected(path):
    conv = load(path)
    want = EXPECTED[path.parent.name] or ("gemini-session" if path.suffix == ".json"
                                          else "gemini-stream-json")
    assert conv.format == want and detect(path) == want
    assert conv.main.messages and all(p.kind in (
        "text", "tool_call", "tool_result", "reasoning", "image", "compaction_summary")
        for t in conv.threads for m in t.messages for p in m.parts)
    # every tool result whose call is in the transcript has the call's tool name
    calls = {p.call_id: p.tool for t in conv.threads for m in t.messages for p in m.parts
             if p.kind == "tool_call"}
    for t in conv.threads:
        for m in t.messages:
            for p in m.parts:
                if p.kind == "tool_result" and p.call_id in calls:
                    assert p.tool == calls[p.call_id]


def test_claude_code_one_response_on_several_lines_counts_once():
    """5c0375b4: assistant lines share (message.id, requestId) with repeated usage; each
    pair is one request. Sidechain lines are their own threads."""
    path = T / "claude-code/5c0375b4.jsonl"
    pairs = Counter()
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "assistant" and "usage" in r["message"]:
            pairs[(r["message"]["id"], r.get("requestId"))] += 1
    assert any(n > 1 for n in pairs.values())  # the file does repeat usage
    conv = load(path)
    assert len(conv.requests()) == len(pairs)
    assert [t.name for t in conv.threads] == ["main", "sidechain:1", "sidechain:2"]
    # the largest output_tokens of a response's lines is kept
    want = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "assistant" and "usage" in r["message"]:
            k = f"{r['message']['id']}/{r.get('requestId')}"
            want[k] = max(want.get(k, 0), r["message"]["usage"]["output_tokens"])
    assert {u.key: u.output_tokens for u in conv.requests()} == want


@pytest.mark.parametrize("name, reported", [
    ("claude-stream-json/basic_query-2.1.7.ndjson",
     {"cost_usd": 0.1354875, "input_tokens": 21580, "output_tokens": 25,
      "cache_write_tokens": 21570}),
    ("swe-agent/6e44b9.traj", {"cost_usd": 0.019520000000000006, "input_tokens": 7141,
                               "output_tokens": 243, "api_calls": 5}),
    ("swe-agent/test-repo-i1.traj", {"cost_usd": 0.53839, "input_tokens": 52861,
                                     "output_tokens": 326}),
    ("mini-swe-agent/django__django-16255.traj.json", {"cost_usd": 0.0893484, "api_calls": 17}),
    ("codex-rollout/rollout-0.77-codemie.jsonl",
     {"input_tokens": 22474, "output_tokens": 300, "cache_read_tokens": 14848}),
    ("codex-rollout/rollout-0.135-redacted.jsonl",
     {"input_tokens": 22539, "output_tokens": 10, "cache_read_tokens": 20864}),
    ("codex-exec-json/exec-0.46-command.jsonl",
     {"input_tokens": 6040, "output_tokens": 129, "cache_read_tokens": 4992}),
    ("gemini-cli/session-37b7abef.json",
     {"input_tokens": 87418, "output_tokens": 4355, "cache_read_tokens": 62117}),
    ("gemini-cli/stream-json-console.txt",
     {"input_tokens": 45968, "output_tokens": 1385, "cache_read_tokens": 21807}),
    ("aider/metadata-aider.chat.history.md", {"input_tokens": 73600, "output_tokens": 4303,
                                               "cost_usd": 0.01}),
])
def test_reported_totals_are_reproduced_exactly(name, reported):
    conv = load(T / name)
    for k, v in reported.items():
        assert conv.reported[k] == pytest.approx(v, abs=1e-12), k


def test_codex_repeated_token_counts_are_one_request_each():
    conv = load(T / "codex-rollout/rollout-0.77-codemie.jsonl")
    assert [u.input_tokens for u in conv.requests()] == [7266, 7546, 7662]
    assert conv.context_window == 258400


def test_per_request_usage_adds_up_to_the_reported_totals():
    gem = load(T / "gemini-cli/session-37b7abef.json")
    assert sum(u.input_tokens for u in gem.requests()) == 87418
    mini = load(T / "mini-swe-agent/django__django-16255.traj.json")
    assert sum(u.input_tokens for u in mini.requests()) == 61068
    assert sum(u.output_tokens for u in mini.requests()) == 2317


def test_one_bad_line_is_reported_and_skipped(tmp_path):
    lines = (T / "claude-code/1af7fc5e.jsonl").read_text().splitlines()
    bad = tmp_path / "s.jsonl"
    bad.write_text("\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n")
    conv = load(bad)
    assert len(conv.problems) == 1 and conv.problems[0].line == 4
    assert "expected a JSON object" in str(conv.problems[0]) and str(bad) in str(conv.problems[0])
    assert len(conv.requests()) == len(load(T / "claude-code/1af7fc5e.jsonl").requests())


def test_gemini_console_lines_are_skipped_not_fatal():
    conv = load(T / "gemini-cli/stream-json-console.txt")
    assert conv.problems and all(p.line for p in conv.problems)


@pytest.mark.parametrize("text, says", [
    ('{"hello": 1}\n', "unknown transcript format"),
    ("just some words\n", "unknown transcript format"),
    ("", "unknown transcript format"),
])
def test_unknown_input_is_a_clear_error(tmp_path, text, says):
    f = tmp_path / "x.log"
    f.write_text(text)
    with pytest.raises(TranscriptError) as e:
        load(f)
    assert says in str(e.value) and str(f) in str(e.value) and "--format" in str(e.value)


def test_forced_format_that_does_not_fit_is_a_clear_error(tmp_path):
    with pytest.raises(TranscriptError, match="expected JSON"):
        load(T / "codex-exec-json/exec-0.46-command.jsonl", "swe-agent")
    with pytest.raises(TranscriptError, match="unknown format 'nope'"):
        load(T / "codex-exec-json/exec-0.46-command.jsonl", "nope")
    with pytest.raises(TranscriptError, match=r"missing\.jsonl: no such file"):
        load(tmp_path / "missing.jsonl")


def test_provider_formats(tmp_path):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file",
                                                          "arguments": '{"path": "a.py"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"}]}))
    conv = load(chat)
    assert conv.format == "openai-chat"
    assert conv.main.messages[-1].parts[0].tool == "read_file"
    anth = tmp_path / "anth.json"
    anth.write_text(json.dumps({"system": "sys", "model": "claude-x", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"},
                                          {"type": "tool_use", "id": "t1", "name": "Read",
                                           "input": {"file_path": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "x"}]}]}]}))
    conv = load(anth)
    assert conv.format == "anthropic-messages"
    assert [p.kind for p in conv.main.messages[2].parts] == ["reasoning", "tool_call"]
    assert conv.main.messages[3].parts[0].tool == "Read"


def test_formats_listed_once():
    assert len(set(FORMATS)) == len(FORMATS) == 12


def test_every_format_has_its_parser():
    from andon.context import _parsers

    assert set(_parsers()) == set(FORMATS)


def test_claude_code_2_subagent_logs_beside_the_session_are_their_own_threads(tmp_path):
    """Claude Code 2.x writes a sub-agent's lines to <sessionId>/subagents/agent-*.jsonl."""
    main = tmp_path / "abc.jsonl"
    main.write_text((T / "claude-code/1af7fc5e.jsonl").read_text())
    subs = tmp_path / "abc" / "subagents"
    subs.mkdir(parents=True)
    lines = [x for x in (T / "claude-code/5c0375b4.jsonl").read_text().splitlines()
             if '"isSidechain":true' in x]
    (subs / "agent-1.jsonl").write_text("\n".join(lines) + "\n")
    conv = load(main)
    assert [t.name for t in conv.threads] == ["main", "subagent:agent-1"]
    assert len(conv.threads[1].messages) > 5
    side = [m for t in load(T / "claude-code/5c0375b4.jsonl").threads[1:] for m in t.messages
            if m.usage is not None]
    assert len(conv.requests()) == len(load(T / "claude-code/1af7fc5e.jsonl").requests()) + \
        len(side)


def test_aider_history_counts_cache_writes_once_as_the_adapter_does(tmp_path):
    """aider adds cache writes to ``sent`` a second time (Aider-AI/aider#5516): the chat
    history's reports are read with the adapter's one reader, so both give the true input."""
    from andon.agents.aider import parse_run

    report = "Tokens: 34k sent, 17k cache write, 180 received. Cost: $0.07 message, $0.07 session."
    hist = tmp_path / ".aider.chat.history.md"
    hist.write_text("# aider chat started at 2026-12-01 04:00:00\n\n#### multiply\n\n"
                    "Here is the edit.\n\n> Applied edit to src/calc/ops.py\n"
                    f"> {report}\n")
    out = tmp_path / "aider.out"
    out.write_text(f"Aider v0.86.1\nApplied edit to src/calc/ops.py\n{report}\n")
    conv = load(hist, "aider")
    (req,) = conv.requests()
    adapter = parse_run(tmp_path / "no-analytics.jsonl", out).usage
    assert (req.input_tokens, req.cache_write_tokens) == (17000, 17000)
    assert (adapter.input_tokens, adapter.cache_write_tokens) == (17000, 17000)
