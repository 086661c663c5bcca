"""andon context's analysis on generated transcripts (duplicates with their share, stale
reads, turns reconciled to reported usage) and its command: JSON, terminal, HTML page
(escaped, offline, laid out by headless Chromium with the network cut)."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from andon.cli import main
from andon.context import load
from andon.context.analyse import NOT_IN_TRANSCRIPT, analyse
from andon.context.tokens import count

T = Path(__file__).parent / "fixtures" / "transcripts"
DOC = "\n".join(f"Requirement {i}: the widget shall frobnicate input number {i} within "
                f"{i * 3} milliseconds and log the outcome." for i in range(40))


def call(i, name, args):
    return {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": name,
                                              "input": args}]}


def result(i, text):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                         "content": text}]}


def write(tmp_path, messages, name="t.json"):
    f = tmp_path / name
    f.write_text(json.dumps({"system": "You are a coder.", "messages": messages}))
    return f


def test_a_document_pasted_three_times_is_one_group_with_its_share(tmp_path):
    doc = f"<spec>\n{DOC}\n</spec>\n"
    f = write(tmp_path, [
        {"role": "user", "content": f"Read this.\n{doc}"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": f"Again:\n{doc}"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": f"Once more:\n{doc}Now build it."},
        {"role": "assistant", "content": "done"}])
    r = analyse(load(f))
    exact = [g for g in r["duplicates"]["groups"] if g["kind"] == "exact"]
    assert len(exact) == 1 and exact[0]["copies"] == 3
    assert exact[0]["component"] == "spec"
    assert exact[0]["tokens"] == count(doc)
    assert exact[0]["redundant_tokens"] == 2 * count(doc)
    assert exact[0]["share"] == pytest.approx(2 * count(doc) / r["local_tokens"], abs=1e-4)
    assert len(exact[0]["locations"]) == 3


def test_near_duplicates_are_found_and_distinct_texts_are_not(tmp_path):
    edited = DOC.replace("Requirement 7:", "Requirement seven:")
    other = "\n".join(f"Unrelated line {i} about gardening and {i} tomatoes." for i in range(40))
    f = write(tmp_path, [{"role": "user", "content": DOC}, {"role": "assistant", "content": "a"},
                         {"role": "user", "content": edited},
                         {"role": "assistant", "content": "b"},
                         {"role": "user", "content": other}, {"role": "assistant", "content": "c"}])
    groups = analyse(load(f))["duplicates"]["groups"]
    assert [(g["kind"], g["copies"]) for g in groups] == [("near", 2)]


def test_read_edit_then_use_is_stale_and_read_edit_read_is_not(tmp_path):
    stale = write(tmp_path, [
        {"role": "user", "content": "fix a.py"},
        call(1, "Read", {"file_path": "a.py"}), result(1, "x = 1"),
        call(2, "Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}),
        result(2, "ok"),
        call(3, "Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 3"}),
        result(3, "error: not found")], "stale.json")
    r = analyse(load(stale))["reads"]
    assert len(r["stale"]) == 1
    s = r["stale"][0]
    assert (s["path"], s["read"], s["edit"], s["used"]) == (
        "a.py", "main messages[1]", "main messages[3]", "main messages[5]")
    honest = write(tmp_path, [
        {"role": "user", "content": "fix a.py"},
        call(1, "Read", {"file_path": "a.py"}), result(1, "x = 1"),
        call(2, "Edit", {"file_path": "a.py"}), result(2, "ok"),
        call(3, "Read", {"file_path": "a.py"}), result(3, "x = 2"),
        call(4, "Edit", {"file_path": "a.py"}), result(4, "ok")], "honest.json")
    r = analyse(load(honest))["reads"]
    assert r["stale"] == [] and r["reread"] == [{"path": "a.py", "reads": [
        "main messages[1]", "main messages[5]"]}]


def test_turns_reconcile_to_the_reported_input():
    """Claude Code: the reported context of every turn is its size, the components add up
    to it; what the log does not hold (system prompt, tools) is named as such."""
    r = analyse(load(T / "claude-code/1af7fc5e.jsonl"))
    turns = r["threads"][0]["turns"]
    assert turns and all(t["usage"] for t in turns)
    for t in turns:
        assert sum(t["by_component"].values()) == t["size"] == t["usage"]["input_tokens"]
        assert t["by_component"][NOT_IN_TRANSCRIPT] == t["size"] - t["local_tokens"]
    assert 0 < r["accuracy"]["local_over_reported"] < 1
    assert turns[0]["growth"] == turns[0]["size"]


def test_compaction_restarts_the_context(tmp_path):
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": DOC}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "requestId": "r1", "message": {"id": "m1", "role": "assistant", "content": [
             {"type": "text", "text": "ok"}]}},
        {"type": "system", "subtype": "compact_boundary", "uuid": "b", "parentUuid": "a1",
         "sessionId": "s"},
        {"type": "user", "uuid": "u2", "parentUuid": "b", "sessionId": "s",
         "isCompactSummary": True, "message": {"role": "user", "content": "Summary: a spec."}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "sessionId": "s",
         "requestId": "r2", "message": {"id": "m2", "role": "assistant", "content": [
             {"type": "text", "text": "continuing"}]}}]
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    conv = load(f)
    assert conv.main.messages[2].boundary and conv.main.messages[2].parts[0].kind == \
        "compaction_summary"
    turns = analyse(conv)["threads"][0]["turns"]
    assert turns[0]["local_tokens"] == count(DOC)
    assert turns[1]["by_component"] == {"compaction_summary": count("Summary: a spec.")}


def andon(tmp_path, *args):
    """`andon -C tmp_path context ARGS` in this process (the tokenizer loads once)."""
    r = CliRunner().invoke(main, ["-C", str(tmp_path), "context", *map(str, args)])
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)> [bold red]x[/bold red] </script>"


def test_cli_json_terminal_html_and_hostile_text(tmp_path):
    f = write(tmp_path, [{"role": "user", "content": EVIL + "\n" + DOC},
                         {"role": "assistant", "content": EVIL}])
    r = andon(tmp_path, f, "--json", "--rule", "frobnicate=frob")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["format"] == "anthropic-messages" and "frob" in doc["composition"]
    out = tmp_path / "page.html"
    r = andon(tmp_path, f, "--html", out)
    assert r.returncode == 0, r.stderr
    assert "final context by component" in r.stdout
    page = out.read_text()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", page)
    assert "http://" not in page and "https://" not in page
    bad = tmp_path / "bad.txt"
    bad.write_text("hello")
    r = andon(tmp_path, bad)
    assert r.returncode == 2 and "unknown transcript format" in r.stderr and str(bad) in r.stderr
    r = andon(tmp_path, f, "--rule", "nocomponent")
    assert r.returncode == 2 and "PATTERN=COMPONENT" in r.stderr


MEASURE = """<script>
const poly = [...document.querySelectorAll("svg.chart polygon.area")].filter(p => {
  const b = p.getBBox(); return b.width > 0 && b.height > 0; }).length;
const chartBox = document.querySelector("svg.chart").getBoundingClientRect();
document.body.setAttribute("data-probe", JSON.stringify({poly, w: Math.round(chartBox.width),
  msgs: document.querySelectorAll("#messages .msg").length,
  comp: document.querySelectorAll("#composition tr").length,
  alerted: window.__alerted || 0}));
</script>"""


def test_page_renders_in_headless_chromium_offline(tmp_path):
    from helpers import chromium_offline_dom
    out = tmp_path / "page.html"
    r = andon(tmp_path, T / "claude-code/5c0375b4.jsonl", "--html", out)
    assert r.returncode == 0, r.stderr
    probe_data = chromium_offline_dom(tmp_path, out.read_text(), MEASURE, "data-probe")
    assert probe_data["poly"] >= 3 and probe_data["w"] > 300
    assert probe_data["msgs"] > 10 and probe_data["comp"] > 3


def test_andon_toml_context_rules(tmp_path):
    """[[context.rules]] name components; --rule comes first; a bad regex is a config error
    naming andon.toml, and nothing is printed as a report."""
    f = write(tmp_path, [{"role": "user", "content": DOC}, {"role": "assistant", "content": "k"}])
    (tmp_path / "andon.toml").write_text(
        '[[context.rules]]\npattern = "frobnicate"\ncomponent = "widget_spec"\n')
    doc = json.loads(andon(tmp_path, f, "--json").stdout)
    assert "widget_spec" in doc["composition"] and "user_instruction" not in doc["composition"]
    doc = json.loads(andon(tmp_path, f, "--json", "--rule", "Requirement=reqs").stdout)
    assert "reqs" in doc["composition"] and "widget_spec" not in doc["composition"]
    (tmp_path / "andon.toml").write_text(
        '[[context.rules]]\npattern = "(unclosed"\ncomponent = "x"\n')
    r = andon(tmp_path, f, "--json")
    assert r.returncode == 2 and "andon.toml" in r.stderr and "regex" in r.stderr
    doc = json.loads(r.stdout)  # no report: the error, as --json promises one document
    assert set(doc) == {"error", "exit_status"} and "regex" in doc["error"], doc


def test_turns_near_the_window_are_flagged(tmp_path):
    """A Codex rollout whose window is 10,000 tokens: the call reporting 9,000 input tokens
    is near it (≥ 80 %), the one reporting 4,000 is not."""
    def rec(kind, payload):
        return json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": kind,
                           "payload": payload})

    def count_event(inp, total):
        return rec("event_msg", {"type": "token_count", "info": {
            "model_context_window": 10000,
            "last_token_usage": {"input_tokens": inp, "cached_input_tokens": 0,
                                 "output_tokens": 5},
            "total_token_usage": {"input_tokens": total, "cached_input_tokens": 0,
                                  "output_tokens": 5}}})

    lines = [rec("turn_context", {"model": "gpt-5"}),
             rec("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": "go"}]}),
             rec("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": "one"}]}),
             count_event(4000, 4000),
             rec("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": "more"}]}),
             rec("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": "two"}]}),
             count_event(9000, 13000)]
    f = tmp_path / "rollout.jsonl"
    f.write_text("\n".join(lines) + "\n")
    r = analyse(load(f))
    assert r["context_window"] == 10000
    assert [(t["size"], t["near_window"]) for t in r["threads"][0]["turns"]] == [
        (4000, False), (9000, True)]
