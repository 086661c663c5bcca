"""The reviewer contract: one JSON document per review stage, validated by the harness.

A reviewer (another agent, in a fresh context, that may change nothing) returns::

    {
      "verdicts": [                       # exactly one per invariant id of the packet
        {"invariant": "B01-1", "verdict": "held" | "violated" | "unverifiable",
         "evidence": "src/ledger/loader.py:12" | "src/ledger/loader.py:12-20",
         "reason": "short text"}
      ],
      "findings": [                       # may be empty
        {"severity": "blocker" | "major" | "minor", "location": "path:line" | "path:a-b",
         "message": "short text"}
      ],
      "decision": "accept" | "revise",
      "revise_stage": "atdd" | "implement" | null,   # where a revise goes; default implement
      "summary": "optional text"
    }

Paths are repository-relative in the post-change tree; lines are 1-based. The harness rejects
a document that is not JSON, misses or repeats an invariant id, names an unknown one, or cites
a file or line that does not exist (the reviewer is asked again, up to a limit; silence is
never a pass). It then *downgrades* ``accept`` to ``revise`` when any gate is red, a critical
invariant is ``violated`` or ``unverifiable``, or a finding is a ``blocker``; the reasons are
kept as data. :data:`SCHEMA` is the JSON Schema of the document (published in docs/review.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import json_document
from ..errors import DocumentRejected
from ..packet import Packet

LOCATION = re.compile(r"^(?P<path>[^:\s][^:]*):(?P<start>\d+)(?:-(?P<end>\d+))?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Verdict(_Strict):
    invariant: str
    verdict: Literal["held", "violated", "unverifiable"]
    evidence: str = Field(description="path:line or path:start-end in the post-change tree")
    reason: str


class ReviewFinding(_Strict):
    severity: Literal["blocker", "major", "minor"]
    location: str = Field(description="path:line or path:start-end in the post-change tree")
    message: str


class ReviewDocument(_Strict):
    verdicts: list[Verdict]
    findings: list[ReviewFinding] = Field(default_factory=list)
    decision: Literal["accept", "revise"]
    revise_stage: Literal["atdd", "implement"] | None = None
    summary: str = ""


SCHEMA = ReviewDocument.model_json_schema()


@dataclass
class ReviewOutcome:
    """A validated review: the document, the decision after downgrades, and why."""

    document: ReviewDocument
    decision: Literal["accept", "revise"]
    revise_stage: Literal["atdd", "implement"]
    downgraded_because: list[str] = field(default_factory=list)


class ReviewRejected(DocumentRejected):
    """The review document breaks the contract; ``errors`` says exactly how (one line each)."""


NO_DOCUMENT = ("the reviewer returned no document: nothing in $ANDON_REVIEW_FILE and no JSON at "
               "the end of its reply")


def holds_document(reply: str) -> bool:
    """True when a reviewer's final message may carry its document: a fenced block, or text
    that starts as JSON does. Anything else (a shell's "not found", a traceback) is no
    document at all, not a document that is not valid JSON."""
    return bool(re.search(r"```(?:json)?\s*\n", reply)) or reply.lstrip()[:1] in ("{", "[")


def extract_json(text: str) -> str:
    """The review document inside an agent's final message: a ```json fenced block if there
    is one (the last), else the text itself."""
    fences = re.findall(r"```(?:json)?\s*\n(.*?)\n```", text, flags=re.S)
    return fences[-1] if fences else text.strip()


def validate(text: str, packet: Packet, line_count: Callable[[str], int | None],
             stages: Iterable[str] = ("implement",)) -> ReviewDocument:
    """Parse and check a review document against the packet and the post-change tree.

    ``line_count(path)`` returns the number of lines of a file in the post-change tree, or
    None if there is no such file. ``stages`` are the stages a revise may name.

    Raises:
        ReviewRejected: with every problem found, each naming the id or ``path:line``.
    """
    data = json_document.load(text, ReviewRejected, name="review", empty=NO_DOCUMENT)
    try:
        doc = ReviewDocument.model_validate(data)
    except ValidationError as exc:
        raise ReviewRejected([f"{json_document.where(e['loc'])}: "
                              f"{e['msg']}" for e in exc.errors()]) from None
    errors: list[str] = []
    wanted = [inv.id for inv in packet.invariants]
    seen: dict[str, int] = {}
    for v in doc.verdicts:
        seen[v.invariant] = seen.get(v.invariant, 0) + 1
        if v.invariant not in wanted:
            errors.append(f"verdict for unknown invariant {v.invariant!r} (the packet's "
                          f"invariants: {', '.join(wanted) or 'none'})")
        errors += _location_problems(f"verdict {v.invariant}", "evidence", v.evidence,
                                     line_count)
    errors += [f"invariant {i!r} has {n} verdicts; give exactly one" for i, n in seen.items()
               if n > 1]
    errors += [f"no verdict for invariant {i!r}" for i in wanted if i not in seen]
    for k, f in enumerate(doc.findings, start=1):
        errors += _location_problems(f"finding {k}", "location", f.location, line_count)
    if doc.revise_stage and doc.revise_stage not in stages:
        errors.append(f"revise_stage {doc.revise_stage!r} is not a stage of this packet "
                      f"({', '.join(stages)})")
    if errors:
        raise ReviewRejected(errors)
    return doc


def _location_problems(what: str, field: str, location: str,
                       line_count: Callable[[str], int | None]) -> list[str]:
    m = LOCATION.match(location.strip())
    if not m:
        return [f"{what}: {field} must be path:line or path:start-end, got {location!r}"]
    path, start = m["path"], int(m["start"])
    end = int(m["end"]) if m["end"] else start
    count = line_count(path)
    if count is None:
        return [f"{what}: {path} does not exist in the post-change tree"]
    if start > end:
        return [f"{what}: {location} is a reversed range (start after end)"]
    if not 1 <= start <= end <= count:
        return [f"{what}: {location} is outside {path}, which has {count} lines"]
    return []


def decide(doc: ReviewDocument, packet: Packet, red_gates: Iterable[str] = ()) -> ReviewOutcome:
    """Apply the downgrade rules to a valid document (see module docstring)."""
    critical = {inv.id for inv in packet.invariants if inv.critical}
    reasons = [f"gate {g} is red" for g in red_gates]
    reasons += [f"critical invariant {v.invariant} is {v.verdict} ({v.evidence})"
                for v in doc.verdicts if v.invariant in critical and v.verdict != "held"]
    reasons += [f"blocker finding at {f.location}: {f.message}" for f in doc.findings
                if f.severity == "blocker"]
    decision: Literal["accept", "revise"] = (
        "revise" if (reasons or doc.decision == "revise") else "accept")
    downgraded = reasons if doc.decision == "accept" else []
    return ReviewOutcome(doc, decision, doc.revise_stage or "implement", downgraded)

