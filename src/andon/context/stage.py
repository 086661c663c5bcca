"""A stage's context in one line, for ``andon show ID --context``: the stage's transcript
read with ``andon.context`` (any format it knows), its offline page written beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from andon import plain_file
from andon.context import load
from andon.context.analyse import analyse
from andon.context.html import page
from andon.context.model import TranscriptError


def summarise(transcript: Path, write_page: bool = True) -> dict[str, Any]:
    """``{format, turns, peak, top: [[component, tokens]], duplicates_share, stale, page}``
    for the transcript at ``transcript``, or ``{error}`` when it cannot be read as one.
    The page is ``<transcript>.context.html`` (near-duplicates are left out: this runs for
    every stage ``andon show`` lists)."""
    try:
        conv = load(transcript, follow=False)  # in the evidence: the agent's to replace
    except TranscriptError as e:
        return {"error": str(e.problems[0]) if e.problems else str(e)}
    report = analyse(conv, near=False)
    main = report["threads"][0]
    final = sorted(main["final"].items(), key=lambda kv: -kv[1])[:3]
    out: dict[str, Any] = {"format": report["format"], "turns": len(main["turns"]),
                           "peak": main["peak"], "top": [list(kv) for kv in final],
                           "duplicates_share": report["duplicates"]["share"],
                           "stale": len(report["reads"]["stale"]), "page": None}
    if write_page:
        target = transcript.with_name(transcript.name + ".context.html")
        plain_file.write(target, page(report, conv))  # never through what stands there
        out["page"] = str(target)
    return out


def line(summary: dict[str, Any]) -> str:
    """The one line ``andon show`` prints for ``summary`` (``summarise``)."""
    if "error" in summary:
        return f"not read: {summary['error']}"
    top = ", ".join(f"{c} {t:,}" for c, t in summary["top"])
    text = (f"{summary['format']}, {summary['turns']} turns, peak {summary['peak']:,} tokens; "
            f"final: {top}; repeated {summary['duplicates_share']:.0%}"
            + (f", {summary['stale']} stale read(s)" if summary["stale"] else ""))
    return text + (f"; page {summary['page']}" if summary.get("page") else "")
