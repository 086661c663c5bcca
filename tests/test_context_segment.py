"""Segmentation never alters a character, and every segment lands in exactly one component."""

from hypothesis import given, settings
from hypothesis import strategies as st

from andon.context.components import compile_rules, part_component, segment_component
from andon.context.model import Message, Part
from andon.context.segment import split

PIECES = st.sampled_from(["<doc>\n", "</doc>\n", "<a b='1'>", "</a>", "# Head\n", "## x\n",
                          "```py\n", "```\n", "~~~\n", "{", "}", '"k": ', ",", "[", "]",
                          "\n", "text ", "é", "\\", '"', "<", ">", "#"])
TEXTS = st.one_of(st.text(max_size=300), st.lists(PIECES | st.text(max_size=8), max_size=60)
                  .map("".join))


@settings(max_examples=150, deadline=None)
@given(TEXTS)
def test_spans_cover_the_text_exactly(text):
    spans = split(text)
    assert "".join(text[a:b] for a, b, _ in spans) == text
    assert all(a < b for a, b, _ in spans)
    assert [a for a, _, _ in spans[1:]] == [b for _, b, _ in spans[:-1]]


@settings(max_examples=100, deadline=None)
@given(TEXTS, st.sampled_from(["system", "user", "assistant", "tool"]),
       st.sampled_from(["text", "tool_call", "tool_result", "reasoning", "image"]))
def test_every_segment_gets_exactly_one_component(text, role, kind):
    part = Part(kind, text, tool="Read" if kind.startswith("tool") else None)
    base = part_component(Message(role, [part], "x"), part)
    rules = compile_rules([("SECRET", "secrets")])
    comps = [segment_component(base, label, text[a:b], rules) for a, b, label in split(text)]
    assert all(isinstance(c, str) and c for c in comps)


def test_natural_boundaries_and_labels():
    text = ("Given the <prd>, do it.\n<prd>\n# Goals\nfast\n</prd>\n# Plan\nsteps\n"
            "```py\n# not a heading\n```\nend")
    labels = [(label, text[a:b]) for a, b, label in split(text)]
    assert labels == [(None, "Given the <prd>, do it.\n"),
                      ("prd", "<prd>\n# Goals\nfast\n</prd>\n"),
                      ("Plan", "# Plan\nsteps\n"), ("code", "```py\n# not a heading\n```\n"),
                      (None, "end")]


def test_top_level_json_keys():
    text = '{"a": {"b": "x,\\"y"}, "c": [1, {"d": 2}]}'
    assert [label for *_, label in split(text)] == [None, "a", "c"]


def test_document_named_by_its_tag_and_user_rules():
    text = "<product_requirements_document>\nthe PRD\n</product_requirements_document>\n"
    (a, b, label), = split(text)
    assert segment_component("user_instruction", label, text[a:b], ()) == \
        "product_requirements_document"
    # an assistant quoting a tag is still assistant text
    assert segment_component("assistant_text", label, text[a:b], ()) == "assistant_text"
    assert segment_component("user_instruction", label, text[a:b],
                             compile_rules([("PRD", "spec")])) == "spec"


def test_tool_kinds():
    def comp(tool, args, kind="tool_call"):
        p = Part(kind, "", tool=tool, args=args)
        return part_component(Message("assistant", [p], "x"), p)
    assert comp("Read", {"file_path": "a"}) == "tool_call:file_read"
    assert comp("Bash", {"command": "python -m pytest -q"}) == "tool_call:test_run"
    assert comp("shell", {"command": ["bash", "-lc", "sed -n '1,10p' a.py"]}) == \
        "tool_call:file_read"
    assert comp("Grep", {"pattern": "x"}) == "tool_call:search"
    assert comp("Edit", {"file_path": "a"}) == "tool_call:edit"
    assert comp("Bash", {"command": "make"}) == "tool_call:shell"
    assert comp("Read", None, "tool_result") == "tool_result:file_read"
