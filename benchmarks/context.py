"""andon context on a generated large transcript: tokens per second and peak memory.

Writes a Claude Code session log of about ``--tokens`` tokens (default one million; user
turns with documents, tool calls reading files, shell output, repeated pastes) to a temporary
directory, then times ``load`` (parse), ``analyse`` (count, segment, duplicates, reads) and
``html.page``. Peak memory is the process's maximum resident set (``ru_maxrss``) and the
Python allocations' peak (``tracemalloc``, which slows the run: ``--no-tracemalloc``).

    .venv/bin/python benchmarks/context.py [--tokens 1000000] [--no-near]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

from andon.context import load
from andon.context.analyse import analyse
from andon.context.html import page
from andon.context.tokens import count_many


def _vocabulary(rng: random.Random, n: int = 5000) -> list[str]:
    """Pseudo-words, so that unrelated texts share few 5-word runs (as real ones do)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(n)]


def _text(rng: random.Random, n_words: int, words: list[str]) -> str:
    drawn = rng.choices(words, k=max(12, n_words))
    return "\n".join(" ".join(drawn[i:i + 12]) for i in range(0, len(drawn), 12))


def generate(path: Path, tokens: int, seed: int = 1) -> int:
    """Write the session log; the number of records written."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    doc = f"<spec>\n{_text(rng, 3000, words)}\n</spec>\n"
    recs, n, parent, i = [], 0, None, 0
    budget = tokens * 2  # characters: the pseudo-words take about two per token
    while n < budget:
        i += 1
        user = f"Step {i}.\n" + (doc if i % 10 == 0 else f"# Notes\n{_text(rng, 200, words)}\n")
        call = {"type": "tool_use", "id": f"t{i}", "name": "Read" if i % 3 else "Bash",
                "input": {"file_path": f"src/m{i % 40}.py"} if i % 3 else
                {"command": "python -m pytest -q"}}
        result = "```\n" + _text(rng, 1500, words) + "\n```\n"
        for rec in (
            {"type": "user", "message": {"role": "user", "content": user}},
            {"type": "assistant", "requestId": f"r{i}", "message": {
                "id": f"m{i}", "role": "assistant", "model": "claude-sonnet-4-20250514",
                "content": [call], "usage": {"input_tokens": 10, "output_tokens": 50,
                                             "cache_read_input_tokens": n // 4}}},
            {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": result}]}},
        ):
            uuid = f"u{len(recs)}"
            recs.append(json.dumps({**rec, "uuid": uuid, "parentUuid": parent,
                                    "sessionId": "bench", "isSidechain": False}))
            parent = uuid
            n += len(recs[-1])
    path.write_text("\n".join(recs) + "\n")
    return len(recs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--no-near", action="store_true")
    ap.add_argument("--no-tracemalloc", action="store_true")
    args = ap.parse_args()
    t = time.perf_counter()
    count_many(["warm the tokenizer up"])  # loading the BPE file is not per-transcript work
    import datasketch  # noqa: F401 - imported once per process (it imports scipy)
    print(f"loading the tokenizer and datasketch: {time.perf_counter() - t:.2f} s (once)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        records = generate(path, args.tokens)
        if not args.no_tracemalloc:
            tracemalloc.start()
        t0 = time.perf_counter()
        conv = load(path)
        t1 = time.perf_counter()
        report = analyse(conv, near=not args.no_near)
        t2 = time.perf_counter()
        page(report, conv)
        t3 = time.perf_counter()
        peak = tracemalloc.get_traced_memory()[1] if not args.no_tracemalloc else None
        tokens = report["local_tokens"]
        print(f"{path.stat().st_size / 1e6:.1f} MB, {records} records, {tokens:,} tokens "
              f"(cl100k_base), {len(report['threads'][0]['turns'])} turns")
        print(f"parse {t1 - t0:.2f} s, analyse {t2 - t1:.2f} s, html {t3 - t2:.2f} s; "
              f"{tokens / (t2 - t0):,.0f} tokens/s (parse + analyse)")
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
              + (f", Python allocations peak {peak / 1e6:.0f} MB" if peak else ""))


if __name__ == "__main__":
    main()
