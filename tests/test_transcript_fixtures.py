"""Every adapter's token and cost reading against real transcripts (tests/fixtures/transcripts,
copied from ../shared/fixtures; sources and licences in its README).

The expected figures are worked out by hand from each file (the comments say how) and the
price table's base-tier rates, USD per million tokens, as genai-prices 0.2.3 has them:
claude-opus-4-5 5 / cache write 6.25 / cache read 0.5 / output 25; gpt-5 and gpt-5.1-codex
1.25 / cached 0.125 / output 10; gpt-5.5 5 / cached 0.5 / output 30; gpt-4o-mini (OpenRouter)
0.15 / output 0.6; gemini-3-pro-preview 2 / cached 0.2 / output 12. Token convention of the
store: input includes cache reads and writes, output includes reasoning.
"""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from andon.agents import CodexAgent, GeminiAgent
from andon.agents.aider import parse_run
from andon.agents.claude_code import parse_stream
from andon.agents.codex import parse_events, parse_rollout
from andon.agents.command import read_usage_file, usage_from_mini_swe_agent
from andon.agents.external import RunFiles
from andon.agents.gemini import parse_json, parse_session, parse_stream_json
from andon.config import AgentSettings
from andon.usage import Usage, library_version, price

import fakes
from agent_ctx import make

T = Path(__file__).parent / "fixtures" / "transcripts"
LIB = f"genai-prices {library_version()}"


def tokens(u):
    return (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)


# -- Claude Code: `claude -p --output-format stream-json --verbose` ---------------------------

def test_claude_stream_json_2_1_7():
    """result.usage: input 10 + cache write 21,570 + cache read 0 = 21,580, output 25;
    total_cost_usd 0.1354875 — which is also andon's price: 10·5 + 21570·6.25 + 25·25 =
    135,487.5 µ$ (the worked example of FORMATS.md)."""
    u = parse_stream(T / "claude-stream-json/basic_query-2.1.7.ndjson").usage
    price(u)
    assert tokens(u) == (21580, 25, 0, 21570)
    assert (u.cost_usd, u.cost_source) == (0.1354875, "reported")
    assert u.model == "claude-opus-4-5-20251101" and u.turns == 1
    own = price(Usage(model=u.model, input_tokens=21580, output_tokens=25,
                      cache_read_tokens=0, cache_write_tokens=21570))
    assert own.cost_usd == pytest.approx(0.1354875, abs=1e-12)


def test_claude_stream_json_cut_before_its_result_is_priced_per_message(tmp_path):
    """Without the result line only the assistant message is left, whose usage says output
    5 (the result said 25: the message's count is partial): 10·5 + 21570·6.25 + 5·25 =
    134,987.5 µ$, priced per message (one request)."""
    lines = (T / "claude-stream-json/basic_query-2.1.7.ndjson").read_text().splitlines()
    cut = tmp_path / "cut.ndjson"
    cut.write_text("\n".join(x for x in lines if '"type":"result"' not in x) + "\n")
    u = price(parse_stream(cut).usage)
    assert tokens(u) == (21580, 5, 0, 21570)
    assert u.cost_source == "priced" and u.pricing == "per_request" and u.priced_requests == 1
    assert u.cost_usd == pytest.approx(0.1349875, abs=1e-12)


# -- Codex CLI: `codex exec --json` and rollouts ----------------------------------------------

@pytest.mark.parametrize("name, counts, cost", [
    # turn.completed: input 6,040 (4,992 cached), output 129:
    # (6040-4992)·1.25 + 4992·0.125 + 129·10 = 1310 + 624 + 1290 = 3,224 µ$
    ("exec-0.46-command.jsonl", (6040, 129, 4992, None), 0.003224),
    # input 6,008 (4,096 cached), output 51: 1912·1.25 + 4096·0.125 + 51·10 = 3,412 µ$
    ("exec-0.46-file-change.jsonl", (6008, 51, 4096, None), 0.003412),
])
def test_codex_exec_json_0_46(name, counts, cost):
    """The stream names no model (priced here as gpt-5, as if configured) and no
    requests: one turn's totals, priced as a total."""
    u = parse_events(T / "codex-exec-json" / name).usage
    assert tokens(u) == counts and u.turns == 1
    u.model = "gpt-5"
    price(u)
    assert u.cost_usd == pytest.approx(cost, abs=1e-12) and u.pricing == "total"


def test_codex_rollout_0_77_repeated_token_counts_are_one_request_each():
    """Five token_count events with info: lines 13 and 19 repeat lines 10 and 16 (same
    total_token_usage), so three requests: 7,266/0 cached/115 out, 7,546/7,296/60,
    7,662/7,552/125; they add up to the last total 22,474 / 14,848 / 300 (summing every
    last_token_usage would say 37,286 input). Model gpt-5-1-codex-2025-11-13, priced as
    gpt-5-1-codex: 7626·1.25 + 14848·0.125 + 300·10 = 9532.5 + 1856 + 3000 µ$."""
    u = parse_rollout(T / "codex-rollout/rollout-0.77-codemie.jsonl").usage
    assert tokens(u) == (22474, 300, 14848, None) and u.turns == 3
    assert [r["input_tokens"] for r in u.requests] == [7266, 7546, 7662]
    assert u.model == "gpt-5-1-codex-2025-11-13"
    price(u)
    assert u.cost_usd == pytest.approx(0.0143885, abs=1e-12)
    assert u.pricing == "per_request" and "(as gpt-5-1-codex)" in u.price_source


def test_codex_rollout_0_135():
    """One token_count: 22,539 input (20,864 cached), 10 output, gpt-5.5:
    1675·5 + 20864·0.5 + 10·30 = 8375 + 10432 + 300 = 19,107 µ$."""
    u = parse_rollout(T / "codex-rollout/rollout-0.135-redacted.jsonl").usage
    assert tokens(u) == (22539, 10, 20864, None) and u.model == "gpt-5.5"
    assert price(u).cost_usd == pytest.approx(0.019107, abs=1e-12)


def test_codex_adapter_prices_the_requests_of_the_sessions_rollout(tmp_path):
    """The exec stream of the 0.77 session (derived: its thread id, one turn.completed
    with the rollout's totals) priced through the adapter: the model and the three
    requests come from $CODEX_HOME/sessions/.../rollout-*-<thread>.jsonl."""
    thread = "019b7f94-51b4-7593-922e-ba12b5b73b52"
    home = tmp_path / "codex"
    day = home / "sessions/2026/01/02"
    day.mkdir(parents=True)
    shutil.copy(T / "codex-rollout/rollout-0.77-codemie.jsonl",
                day / f"rollout-2026-01-02T18-39-45-{thread}.jsonl")
    stream = tmp_path / "implement.transcript.log"
    stream.write_text("\n".join(json.dumps(e) for e in [
        {"type": "thread.started", "thread_id": thread}, {"type": "turn.started"},
        {"type": "turn.completed", "usage": {"input_tokens": 22474,
                                             "cached_input_tokens": 14848,
                                             "output_tokens": 300}}]) + "\n")
    bin_dir = tmp_path / "bin"
    fakes.install(bin_dir, "codex")
    agent = make(CodexAgent, bin_dir, environ={"CODEX_HOME": str(home)})
    files = RunFiles(stream, tmp_path / "err.log", tmp_path / "implement")
    u = price(agent.parse(None, AgentSettings(), files).usage)
    assert u.model == "gpt-5-1-codex-2025-11-13" and len(u.requests) == 3
    assert u.pricing == "per_request" and u.cost_usd == pytest.approx(0.0143885, abs=1e-12)


# -- Gemini CLI: chat recording and stream-json ------------------------------------------------

# the nine `gemini` messages of session-37b7abef.json: input (prompt, cached included) +
# tool (all 0) = 4749 + 5054 + 10271 + 11066 + 11122 + 11143 + 11270 + 11292 + 11451 = 87,418;
# output + thoughts = 532 + 1896 + 1222 + 101 + 14 + 225 + 15 + 332 + 18 = 4,355;
# cached = 0 + 2745 + 7961 + 3261 + 9712 + 9770 + 9487 + 9751 + 9430 = 62,117.
SESSION = (87418, 4355, 62117, None)
# at gemini-3-pro-preview's base rates: (87418-62117)·2 + 62117·0.2 + 4355·12
#   = 50602 + 12423.4 + 52260 = 115,285.4 µ$
SESSION_COST = 0.1152854
PREVIEW_RATES = {"gemini-3-pro": SimpleNamespace(input_per_mtok=2, output_per_mtok=12,
                                                 cache_read_per_mtok=0.2,
                                                 cache_write_per_mtok=None)}


def test_gemini_chat_recording_per_request():
    """The recording names the model `gemini-3-pro`, which genai-prices 0.2.3 does not
    know: cost unknown (not 0) unless andon.toml prices it."""
    u = parse_session(T / "gemini-cli/session-37b7abef.json").usage
    assert tokens(u) == SESSION and u.turns == 9 and u.model == "gemini-3-pro"
    assert price(u).cost_usd is None and u.cost_source == "unknown"
    u = parse_session(T / "gemini-cli/session-37b7abef.json").usage
    price(u, PREVIEW_RATES)
    assert u.pricing == "per_request" and u.cost_usd == pytest.approx(SESSION_COST)


def test_gemini_adapter_reads_the_requests_from_the_chat_recording(tmp_path):
    """`-o json` output of that session (derived: its session id, the per-model totals
    the CLI would print) → the adapter finds ~/.gemini/tmp/<hash>/chats/session-*-37b7abef.json
    and prices its nine requests."""
    home = tmp_path / "home"
    chats = home / ".gemini/tmp/0123abcd/chats"
    chats.mkdir(parents=True)
    shutil.copy(T / "gemini-cli/session-37b7abef.json",
                chats / "session-2026-01-16T11-01-37b7abef.json")
    out = tmp_path / "implement.transcript.log"
    out.write_text(json.dumps({
        "session_id": "37b7abef-713d-4522-85f0-8ff15a4e6d17", "response": "done",
        "stats": {"models": {"gemini-3-pro": {
            "api": {"totalRequests": 9},
            "tokens": {"prompt": 87418, "candidates": 1326, "thoughts": 3029,
                       "cached": 62117, "tool": 0, "input": 87418 - 62117,
                       "total": 87418 + 4355}}}}}))
    bin_dir = tmp_path / "bin"
    fakes.install(bin_dir, "gemini")
    agent = make(GeminiAgent, bin_dir, environ={"HOME": str(home)}, prices=PREVIEW_RATES)
    u = agent.parse(None, AgentSettings(), RunFiles(out, tmp_path / "e", tmp_path / "i")).usage
    price(u, PREVIEW_RATES)
    assert tokens(u) == SESSION and len(u.requests) == 9
    assert u.pricing == "per_request" and u.cost_usd == pytest.approx(SESSION_COST)


def test_gemini_stream_json_console_capture():
    """Two runs in one console capture (shell prompts and notices are not JSON). Each
    result's output_tokens (360, 119) leaves out the thoughts that total_tokens counts:
    output = total - input = 28566 - 27696 = 870 and 18787 - 18272 = 515. Sums: input
    27,696 + 18,272 = 45,968, output 1,385, cached 18,660 + 3,147 = 21,807. The init model
    `auto-gemini-2.5` is an alias no price table knows: cost unknown."""
    u = price(parse_stream_json(T / "gemini-cli/stream-json-console.txt").usage)
    assert tokens(u) == (45968, 1385, 21807, None)
    # the adapter's reader hands stream-json (`-o stream-json` in extra_args) over
    assert tokens(parse_json(T / "gemini-cli/stream-json-console.txt").usage) == tokens(u)
    assert u.model == "auto-gemini-2.5" and u.cost_usd is None
    assert any("2 result events" in n for n in u.notes)


# -- Aider: chat history ---------------------------------------------------------------------

def test_aider_chat_history_0_86_1():
    """Twelve `> Tokens:` lines (no cache), sent 2.4k + 2.7k + 3.2k + 3.9k + 4.5k + 5.6k +
    6.4k + 8.0k + 8.5k + 9.0k + 9.4k + 10k = 73,600 (rounded by aider), received 104 + 195
    + 338 + 293 + 510 + 338 + 812 + 342 + 233 + 489 + 237 + 412 = 4,303. Cost: the last
    session figure says $0.01; the message figures add up to $0.01346 (0.00042 + 0.00053 +
    0.00068 + 0.00075 + 0.00098 + 0.0010 + 3 × 0.0014 + 0.0016 + 0.0015 + 0.0018), the more
    precise; andon's price 73600·0.15 + 4303·0.6 = 13,621.8 µ$ is within 10 %: kept."""
    u = parse_run(T / "none.jsonl", T / "none.log",
                  chat_history=T / "aider/metadata-aider.chat.history.md").usage
    assert tokens(u) == (73600, 4303, 0, 0) and u.turns == 12
    assert u.model == "openrouter/openai/gpt-4o-mini"
    assert (u.cost_usd, u.cost_source) == (pytest.approx(0.01346), "reported")
    assert u.reported_cost_usd is None


# -- mini-swe-agent (through the command adapter's usage file) ---------------------------------

def test_mini_swe_agent_trajectory_1_15(tmp_path):
    """17 responses with usage; sums: prompt 61,068 (cached 33,662), completion 2,317
    (reasoning included). instance_cost 0.0893484 (OpenRouter's per-call costs) is what
    andon's per-request price gives too: (61068-33662)·2 + 33662·0.2 + 2317·12 = 54812 +
    6732.4 + 27804 = 89,348.4 µ$."""
    doc = usage_from_mini_swe_agent(T / "mini-swe-agent/django__django-16255.traj.json")
    assert doc["model"] == "google/gemini-3-pro-preview" and doc["turns"] == 17
    f = tmp_path / "usage.json"
    f.write_text(json.dumps(doc))
    u = price(read_usage_file(f))
    assert tokens(u) == (61068, 2317, 33662, None)
    assert (u.cost_usd, u.cost_source) == (pytest.approx(0.0893484), "reported")
    doc.pop("cost_usd")
    f.write_text(json.dumps(doc))
    own = price(read_usage_file(f))
    assert own.pricing == "per_request" and own.price_source == LIB
    assert own.cost_usd == pytest.approx(0.0893484, abs=1e-12)
