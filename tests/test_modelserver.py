"""The scripted model server (andon.demo.modelserver) speaks the Anthropic Messages API: the
turns of its script in order, streamed (SSE events as the API sends them) or not, with the
usage the script gives; failure scripts; every request logged without credentials."""

import json
import urllib.error
import urllib.request

import pytest

from andon.demo.modelserver import ModelServer, Script

TOOLS = [{"name": "Write", "input_schema": {"type": "object"}}]
USAGE = {"input_tokens": 321, "output_tokens": 45, "cache_read_input_tokens": 6,
         "cache_creation_input_tokens": 7}


def post(url, body, key="sk-secret"):
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", "x-api-key": key})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def sse(text):
    events = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_turns_in_order_streamed_and_not_with_the_scripts_usage():
    script = Script([{"tool": "Write", "input": {"file_path": "a.py", "content": "x"},
                      "usage": USAGE},
                     {"text": "all done", "model": "claude-other"}])
    with ModelServer(script) as s:
        status, headers, text = post(s.url + "/v1/messages",
                                     {"model": "claude-x", "stream": True, "tools": TOOLS,
                                      "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        events = sse(text)
        assert [e for e, _ in events] == ["message_start", "content_block_start", "ping",
                                          "content_block_delta", "content_block_stop",
                                          "message_delta", "message_stop"]
        assert all(d["type"] == e for e, d in events)
        start = events[0][1]["message"]
        assert start["model"] == "claude-x" and start["usage"]["input_tokens"] == 321
        assert start["usage"]["output_tokens"] == 1        # partial, as the API sends it
        assert events[1][1]["content_block"]["name"] == "Write"
        assert json.loads(events[3][1]["delta"]["partial_json"]) == {"file_path": "a.py",
                                                                     "content": "x"}
        assert events[5][1]["delta"]["stop_reason"] == "tool_use"
        assert events[5][1]["usage"] == USAGE

        status, _, text = post(s.url + "/v1/messages", {"model": "claude-x", "tools": TOOLS,
                                                        "messages": []})
        msg = json.loads(text)
        assert status == 200 and msg["content"] == [{"type": "text", "text": "all done"}]
        assert msg["model"] == "claude-other" and msg["stop_reason"] == "end_turn"
        # after the script: "done"
        _, _, text = post(s.url + "/v1/messages", {"model": "m", "tools": TOOLS})
        assert json.loads(text)["content"][0]["text"] == "done"
        sent = s.sent_usage()
    assert sent["claude-x"] == USAGE
    assert sent["claude-other"]["input_tokens"] == 100   # the default usage of a turn


def test_side_requests_take_no_turn_and_are_logged_without_credentials():
    with ModelServer(Script([{"text": "the turn"}])) as s:
        _, _, side = post(s.url + "/v1/messages", {"model": "claude-haiku", "max_tokens": 1})
        _, _, turn = post(s.url + "/v1/messages", {"model": "claude-x", "tools": TOOLS})
        status, _, count = post(s.url + "/v1/messages/count_tokens", {"messages": []})
        missing, _, err = post(s.url + "/api/whatever", {})
    assert json.loads(side)["content"][0]["text"] == "ok"
    assert json.loads(turn)["content"][0]["text"] == "the turn"
    assert status == 200 and json.loads(count)["input_tokens"] >= 1
    assert missing == 404 and json.loads(err)["error"]["type"] == "not_found_error"
    assert [r["path"] for r in s.log] == ["/v1/messages"] * 2 + ["/v1/messages/count_tokens",
                                                                  "/api/whatever"]
    assert all("x-api-key" not in r["headers"] for r in s.log)
    assert "sk-secret" not in json.dumps(s.log)


@pytest.mark.parametrize("fail,statuses,kind", [
    ("401", [401, 401], "authentication_error"),
    ("500", [500, 500], "api_error"),
    ("429-then-200", [429, 200], "rate_limit_error"),
])
def test_failure_scripts(fail, statuses, kind):
    with ModelServer(Script([{"text": "fine"}], fail=fail)) as s:
        got = [post(s.url + "/v1/messages", {"model": "m", "tools": TOOLS}) for _ in statuses]
    assert [g[0] for g in got] == statuses
    assert json.loads(got[0][2])["error"]["type"] == kind
    if fail == "429-then-200":
        assert got[0][1]["retry-after"] == "0"
        assert json.loads(got[1][2])["content"][0]["text"] == "fine"


def test_hang_never_answers_and_the_server_still_stops():
    with ModelServer(Script([], fail="hang")) as s:
        req = urllib.request.Request(s.url + "/v1/messages", b'{"model": "m"}', method="POST")
        with pytest.raises(OSError):    # a socket timeout: the server answered nothing
            urllib.request.urlopen(req, timeout=1.5)
    assert s.log[0]["status"] == "hang"


@pytest.mark.parametrize("turns,fail,message", [
    ([{"tool": "Write", "text": "x"}], None, "turn 1: expected exactly one of `tool` or `text`"),
    ([{"text": "x"}, {"text": "y", "usage": {"input_tokens": -1}}], None,
     "turn 2: usage input_tokens=-1"),
    ([{"text": "x", "usage": {"tokens": 3}}], None, "turn 1: usage tokens=3"),
    ([], "503", "fail: expected one of 401, 500, 429-then-200, hang, got '503'"),
])
def test_bad_scripts_are_refused_naming_the_turn(turns, fail, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("`", "`")):
        Script(turns, fail)


def test_openai_responses_streamed_and_not_with_usage_in_openais_terms():
    script = Script([{"tool": "exec", "input": "text('x');", "usage": USAGE},
                     {"tool": "shell", "input": {"cmd": "ls"}}, {"text": "bye"}])
    with ModelServer(script) as s:
        status, headers, text = post(s.url + "/v1/responses", {"model": "gpt-x",
                                                               "stream": True})
        events = sse(text)
        _, _, plain = post(s.url + "/v1/responses", {"model": "gpt-x"})
        _, _, last = post(s.url + "/v1/responses", {"model": "gpt-x", "stream": True})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert [e for e, _ in events] == ["response.created", "response.in_progress",
                                      "response.output_item.added",
                                      "response.output_item.done", "response.completed"]
    item = events[3][1]["item"]
    assert (item["type"], item["name"], item["input"]) == ("custom_tool_call", "exec",
                                                           "text('x');")
    usage = events[4][1]["response"]["usage"]
    assert usage["input_tokens"] == 321 + 6 + 7 and usage["output_tokens"] == 45
    assert usage["input_tokens_details"]["cached_tokens"] == 6
    call = json.loads(plain)["output"][0]
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"cmd": "ls"}
    msg = sse(last)[3][1]["item"]
    assert msg["type"] == "message" and msg["content"][0]["text"] == "bye"
    assert s.sent_usage()["gpt-x"]["input_tokens"] == 321 + 100 + 100


def test_openai_responses_errors_carry_openais_error_body():
    with ModelServer(Script([], fail="401")) as s:
        status, _, text = post(s.url + "/v1/responses", {"model": "m"})
    assert status == 401 and json.loads(text)["error"]["code"] == "invalid_api_key"


def test_gemini_generate_content_streamed_and_not_and_side_requests_get_schema_json():
    script = Script([{"tool": "write_file", "input": {"file_path": "a"}, "usage": USAGE},
                     {"text": "bye"}])
    with ModelServer(script) as s:
        url = s.url + "/v1beta/models/gemini-x:"
        status, _, text = post(url + "streamGenerateContent?alt=sse",
                               {"contents": [], "tools": [{"functionDeclarations": []}]})
        chunk = json.loads(text.strip().removeprefix("data: "))
        _, _, plain = post(url + "generateContent", {"tools": [{}], "contents": []})
        schema = {"type": "OBJECT", "properties": {"score": {"type": "INTEGER"},
                                                   "why": {"type": "STRING"}}}
        _, _, side = post(url + "generateContent",
                          {"contents": [], "generationConfig": {"responseJsonSchema": schema}})
        missing, _, _ = post(url + "embedContent", {})
    assert status == 200
    call = chunk["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call == {"name": "write_file", "args": {"file_path": "a"}}
    meta = chunk["usageMetadata"]
    assert meta["promptTokenCount"] == 321 + 6 + 7 and meta["cachedContentTokenCount"] == 6
    assert meta["candidatesTokenCount"] == 45 and chunk["modelVersion"] == "gemini-x"
    assert json.loads(plain)["candidates"][0]["content"]["parts"] == [{"text": "bye"}]
    side_text = json.loads(side)["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(side_text) == {"score": 1, "why": "scripted"}
    assert missing == 404


def chat_sse(text):
    """The `data:` payloads of a Chat Completions stream, up to `[DONE]` (kept as a str)."""
    out = []
    for chunk in text.strip().split("\n\n"):
        assert chunk.startswith("data: "), chunk
        data = chunk.removeprefix("data: ")
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_chat_completions_not_streamed_text_and_tool_call_with_usage_in_openais_terms():
    script = Script([{"text": "ops.py\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n",
                      "usage": USAGE},
                     {"tool": "shell", "input": {"cmd": "ls"}, "model": "gpt-other"}])
    with ModelServer(script) as s:
        status, _, text = post(s.url + "/v1/chat/completions",
                               {"model": "gpt-x", "messages": [{"role": "user",
                                                                "content": "hi"}]})
        _, _, call = post(s.url + "/v1/chat/completions", {"model": "gpt-x", "messages": []})
        _, _, after = post(s.url + "/v1/chat/completions", {"model": "gpt-x", "messages": []})
        sent = s.sent_usage()
    body = json.loads(text)
    assert status == 200 and body["object"] == "chat.completion" and body["model"] == "gpt-x"
    choice, = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": script.turns[0]["text"]}
    assert choice["finish_reason"] == "stop"
    assert body["usage"]["prompt_tokens"] == 321 + 6 + 7      # cached tokens included
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 6}
    assert body["usage"]["completion_tokens"] == 45
    assert body["usage"]["total_tokens"] == 321 + 6 + 7 + 45
    assert body["usage"]["cache_creation_input_tokens"] == 7   # no standard field for writes
    tool = json.loads(call)
    assert tool["model"] == "gpt-other" and tool["choices"][0]["finish_reason"] == "tool_calls"
    fn = tool["choices"][0]["message"]["tool_calls"][0]
    assert fn["type"] == "function" and fn["function"]["name"] == "shell"
    assert json.loads(fn["function"]["arguments"]) == {"cmd": "ls"}
    assert "cache_creation_input_tokens" not in tool["usage"]   # only when there are some
    assert json.loads(after)["choices"][0]["message"]["content"] == "done"
    assert sent["gpt-x"] == {k: USAGE[k] + (100 if k == "input_tokens" else
                                            20 if k == "output_tokens" else 0) for k in USAGE}


def test_chat_completions_streamed_with_and_without_the_final_usage_chunk():
    script = Script([{"text": "hello", "usage": USAGE}, {"text": "again"},
                     {"tool": "Write", "input": {"path": "a"}}])
    with ModelServer(script) as s:
        status, headers, text = post(s.url + "/v1/chat/completions",
                                     {"model": "gpt-x", "stream": True,
                                      "stream_options": {"include_usage": True}})
        _, _, bare = post(s.url + "/v1/chat/completions", {"model": "gpt-x", "stream": True})
        _, _, tool = post(s.url + "/v1/chat/completions",
                          {"model": "gpt-x", "stream": True,
                           "stream_options": {"include_usage": True}})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    chunks = chat_sse(text)
    assert chunks[-1] == "[DONE]"
    *parts, last = chunks[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["usage"] is None for c in parts)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in parts) == "hello"
    assert parts[0]["choices"][0]["delta"]["role"] == "assistant"
    assert parts[-1]["choices"][0]["finish_reason"] == "stop"
    assert last["choices"] == [] and last["usage"]["prompt_tokens"] == 334
    assert last["usage"]["completion_tokens"] == 45
    assert last["usage"]["prompt_tokens_details"]["cached_tokens"] == 6
    plain = chat_sse(bare)
    assert plain[-1] == "[DONE]" and all("usage" not in c for c in plain[:-1])
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in plain[:-1]) == "again"
    calls = [c["choices"][0]["delta"].get("tool_calls") for c in chat_sse(tool)[:-2]]
    assert calls[0][0]["function"] == {"name": "Write", "arguments": ""}
    assert json.loads(calls[1][0]["function"]["arguments"]) == {"path": "a"}
    assert chat_sse(tool)[-3]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("fail,status,code", [("401", 401, "invalid_api_key"),
                                              ("500", 500, None)])
def test_chat_completions_errors_carry_openais_error_body(fail, status, code):
    with ModelServer(Script([], fail=fail)) as s:
        got, _, text = post(s.url + "/v1/chat/completions", {"model": "m", "messages": []})
    assert got == status and json.loads(text)["error"]["code"] == code
    assert s.log[0]["status"] == status
