"""The planner contract: one JSON document per planning round, validated by the harness.

A planning agent (reading the spec and the decisions files, changing nothing) returns::

    {
      "packets": [                          # one per thin vertical slice, at least one
        {"id": "F01",                       # packet id (letters, digits, . _ -)
         "slug": "csv-export",              # short name, same characters
         "title": "optional text",
         "goal": "what a person can observe when it is done",
         "allowed_paths": ["src/app/export.py"],   # repository globs the change may touch
         "requires": ["F00"],               # packet ids that must be done first
         "invariants": [                    # at least one
           {"id": "F01-1", "critical": true,
            "assert": "export(rows) writes one line per row"}],
         "forbidden_shortcuts": ["special-casing the test's inputs"],
         "context": "optional Markdown: background, non-goals",
         "planted_tests": {"tests/test_export.py": "def test_...: ..."}}   # optional
      ],
      "summary": "optional text"
    }

The document goes to the file named by ``$ANDON_REVIEW_FILE`` (the same channel as a
review), or at the end of the agent's reply as a fenced ``json`` block. The harness rejects a
document that is not JSON or breaks the schema (every error goes back to the agent as
evidence for the next round, like every problem the checks find). :data:`SCHEMA` is the JSON
Schema (published in docs/plan.md); :func:`render` writes a draft as a packet file.
"""

from __future__ import annotations

import json
import tomllib
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import json_document
from ..errors import DocumentRejected

NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class DraftInvariant(_Strict):
    id: str = Field(min_length=1)
    critical: bool = False
    assert_: str = Field(alias="assert", min_length=1,
                         description="the claim, as an assert where one can be stated")


class DraftPacket(_Strict):
    id: Annotated[str, Field(pattern=NAME)]
    slug: Annotated[str, Field(pattern=NAME)]
    title: str | None = None
    goal: str = Field(min_length=1, description="an outcome a person can observe")
    allowed_paths: list[str] = Field(default_factory=list)
    requires: list[str] = Field(default_factory=list)
    invariants: list[DraftInvariant] = Field(default_factory=list)
    forbidden_shortcuts: list[str] = Field(default_factory=list)
    context: str = ""
    planted_tests: dict[str, str] = Field(default_factory=dict,
                                          description="repo-relative path → file text")


class PlanDocument(_Strict):
    packets: list[DraftPacket] = Field(min_length=1)
    summary: str = ""


SCHEMA = PlanDocument.model_json_schema(by_alias=True)


class PlanRejected(DocumentRejected):
    """The plan document breaks the contract; ``errors`` says exactly how (one line each)."""


def parse(text: str) -> PlanDocument:
    """The plan document in ``text`` (JSON), validated against :data:`SCHEMA`.

    Raises:
        PlanRejected: empty, not JSON, or not the schema; each error names its place
            (``packets.2.goal``, 1-based entries).
    """
    data = json_document.load(text, PlanRejected, name="plan", empty=(
        "the planner returned no document: nothing in $ANDON_REVIEW_FILE and no JSON at the "
        "end of its reply"))
    try:
        return PlanDocument.model_validate(data)
    except ValidationError as exc:
        raise PlanRejected([f"{json_document.where(e['loc'])}: {e['msg']}"
                            for e in exc.errors()]) from None


def _s(text: str) -> str:
    # a JSON string without ASCII escaping is a TOML basic string (render round-trips it)
    return json.dumps(text, ensure_ascii=False)


def _list(items: list[str]) -> str:
    return "[" + ", ".join(_s(i) for i in items) + "]"


def render(d: DraftPacket) -> str:
    """The packet file (``packet.md``) of draft ``d``: TOML front matter with ``status =
    "draft"``, then the body — context, the forbidden shortcuts as a checklist.

    Raises:
        PlanRejected: a value TOML cannot carry (the front matter does not read back).
    """
    lines = ["+++", f"id = {_s(d.id)}", f"slug = {_s(d.slug)}"]
    if d.title:
        lines.append(f"title = {_s(d.title)}")
    lines += [f"goal = {_s(d.goal)}", 'status = "draft"', f"requires = {_list(d.requires)}",
              f"allowed_paths = {_list(d.allowed_paths)}"]
    if not d.planted_tests:
        lines.append('tests = "none"')
    for inv in d.invariants:
        lines += ["", "[[invariants]]", f"id = {_s(inv.id)}",
                  f"critical = {'true' if inv.critical else 'false'}",
                  f"assert = {_s(inv.assert_)}"]
    lines.append("+++")
    try:
        tomllib.loads("\n".join(lines[1:-1]) + "\n")
    except tomllib.TOMLDecodeError as exc:
        raise PlanRejected([f"packet {d.id}: a value cannot be written as TOML ({exc})"]
                           ) from None
    body = [f"# {d.title or d.slug}", "", d.context.strip() or d.goal, "",
            "## Forbidden shortcuts", ""]
    body += [f"- [ ] {s}" for s in d.forbidden_shortcuts] or ["- [ ] (none named)"]
    return "\n".join(lines) + "\n\n" + "\n".join(body) + "\n"
