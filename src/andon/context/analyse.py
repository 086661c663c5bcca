"""The context of a conversation turn by turn: size, split by component, duplicates, reads.

A turn is one model request: it starts at an assistant message that follows a non-assistant
message (or a previous request with its own usage). The turn's context is every message of
the thread before it, back to the last compaction boundary. Local counts (``tokens``) are
exact for the tokenizer's encoding; where the provider reported the request's input, that is
the size, and the split is reconciled to it: a shortfall (system prompt and tool definitions
the transcript does not hold) is the component ``not_in_transcript``; an excess scales every
component down. ``accuracy`` says how far local counts were from the reported ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from andon.context import dupes, reads, tokens
from andon.context.components import Rules, part_component, segment_component
from andon.context.model import Conversation, Part, Thread
from andon.context.segment import split

NOT_IN_TRANSCRIPT = "not_in_transcript"
_SPLIT_CHARS = 256  # shorter parts are one segment (a few dozen tokens: nothing to cut)
NEAR_WINDOW = 0.8
#: context windows (tokens) by model-name prefix, when the transcript does not say
WINDOWS = (("claude", 200_000), ("gpt-5", 400_000), ("gpt-4.1", 1_047_576), ("gpt-4o", 128_000),
           ("o3", 200_000), ("o4", 200_000), ("gemini", 1_048_576),
           ("google/gemini", 1_048_576))


def window_of(conv: Conversation) -> int | None:
    if conv.context_window:
        return conv.context_window
    name = (conv.model or "").lower()
    return next((w for prefix, w in WINDOWS if name.startswith(prefix)), None)


def segments(conv: Conversation, rules: Rules = ()) -> list[list[list[dupes.Seg]]]:
    """Every message's segments, per thread: ``[thread][message] -> [Seg]``, counted.

    The text is encoded once, segment by segment, and a part's ``tokens`` is the sum of its
    segments' (a cut can move a count by about one token against encoding the part whole).
    """
    texts: list[str] = []
    where: list[tuple[int, int, Part, str, str | None]] = []
    for ti, t in enumerate(conv.threads):
        for mi, m in enumerate(t.messages):
            for p in m.parts:
                p.tokens = 0
                base = part_component(m, p)
                spans = split(p.text) if len(p.text) > _SPLIT_CHARS else [(0, len(p.text), None)]
                for a, b, label in spans:
                    piece = p.text[a:b]
                    texts.append(piece)
                    where.append((ti, mi, p, segment_component(base, label, piece, rules), label))
    counts = tokens.count_many(texts)
    out: list[list[list[dupes.Seg]]] = [[[] for _ in t.messages] for t in conv.threads]
    for text, (ti, mi, part, comp, label), n in zip(texts, where, counts, strict=True):
        t = conv.threads[ti]
        part.tokens += n
        out[ti][mi].append(dupes.Seg(t.name, mi, t.messages[mi].source, comp, n, text, label))
    return out


def _turns(thread: Thread, segs: list[list[dupes.Seg]], window: int | None) -> list[dict]:
    turns: list[dict[str, Any]] = []
    running: Counter[str] = Counter()
    prev_role, prev_usage = None, False
    for mi, m in enumerate(thread.messages):
        if m.boundary:
            running = Counter()
        if m.role == "assistant":
            if prev_role != "assistant" or prev_usage:
                turns.append(_turn(len(turns) + 1, m, mi, running, window))
            if m.usage and turns[-1]["usage"] is None:
                turns[-1]["usage"] = m.usage.as_dict()
                _reconcile(turns[-1], m.usage.input_tokens, window)
        for s in segs[mi]:
            running[s.component] += s.tokens
        prev_role, prev_usage = m.role, m.usage is not None
    for prev, cur in zip([None, *turns], turns, strict=False):
        cur["growth"] = cur["size"] - (prev["size"] if prev else 0)
    return turns


def _turn(n: int, m: Any, mi: int, running: Counter[str], window: int | None) -> dict:
    local = sum(running.values())
    return {"turn": n, "message": mi, "source": m.source, "timestamp": m.timestamp,
            "local_tokens": local, "size": local, "by_component": dict(running),
            "usage": None, "near_window": bool(window and local >= NEAR_WINDOW * window)}


def _reconcile(turn: dict[str, Any], reported: int, window: int | None) -> None:
    local = turn["local_tokens"]
    split_ = dict(turn["by_component"])
    if reported >= local:
        if reported > local:
            split_[NOT_IN_TRANSCRIPT] = reported - local
    elif local:
        split_ = {k: round(v * reported / local) for k, v in split_.items()}
    turn["local_by_component"] = turn["by_component"]
    turn["size"] = reported
    turn["by_component"] = split_
    turn["near_window"] = bool(window and reported >= NEAR_WINDOW * window)


def analyse(conv: Conversation, rules: Rules = (), near: bool = True,
            top: int = 10) -> dict[str, Any]:
    """The whole report as plain data (what ``--json`` prints); see the module docstring."""
    segs = segments(conv, rules)
    window = window_of(conv)
    flat = [s for thread in segs for msg in thread for s in msg]
    total = sum(s.tokens for s in flat)
    threads = []
    for t, tsegs in zip(conv.threads, segs, strict=True):
        turns = _turns(t, tsegs, window)
        threads.append({"name": t.name, "messages": len(t.messages), "turns": turns,
                        "final": turns[-1]["by_component"] if turns else {},
                        "peak": max((x["size"] for x in turns), default=0)})
    groups = dupes.find(flat, near=near)
    redundant = sum(g.as_dict(total)["redundant_tokens"] for g in groups)
    return {
        "path": str(conv.path), "format": conv.format, "model": conv.model,
        "encoding": tokens.ENCODING_LABEL, "context_window": window,
        "local_tokens": total, "reported": conv.reported,
        "requests": len(conv.requests()), "accuracy": accuracy(threads),
        "composition": _sum_by(flat),
        "threads": threads,
        "duplicates": {"groups": [g.as_dict(total) for g in groups],
                       "redundant_tokens": redundant,
                       "share": round(redundant / total, 4) if total else 0.0},
        "reads": reads.analyse(conv.threads),
        "largest": [{"tokens": s.tokens, "component": s.component, "label": s.label,
                     "where": f"{s.thread} {s.source}", "excerpt": s.text[:160]}
                    for s in sorted(flat, key=lambda s: -s.tokens)[:top]],
        "problems": [str(p) for p in conv.problems],
    }


def _sum_by(segs: Sequence[dupes.Seg]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for s in segs:
        out[s.component] += s.tokens
    return dict(out.most_common())


def accuracy(threads: list[dict[str, Any]]) -> dict[str, Any]:
    """Local counts against reported input, over the turns that have both."""
    pairs = [(t["local_tokens"], t["usage"]["input_tokens"]) for th in threads
             for t in th["turns"] if t["usage"] and t["usage"]["input_tokens"]]
    if not pairs:
        return {"turns_compared": 0}
    local, reported = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    return {"turns_compared": len(pairs), "local_tokens": local, "reported_tokens": reported,
            "local_over_reported": round(local / reported, 4),
            "note": "local counts leave out what the transcript does not hold (system prompt, "
                    "tool definitions) and use another model's tokenizer"}
