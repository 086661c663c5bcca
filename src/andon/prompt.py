"""Build a stage prompt from a packet (and, on a retry, the previous failure's evidence).

Templates are Jinja2, one per stage kind: ``templates/implement.md.j2``, ``atdd.md.j2`` and
``review.md.j2`` (all review stages). A project overrides the implement prompt with
``[agent] prompt_template = "path.md.j2"``, or any stage with a file ``<stage>.md.j2`` (or
``review.md.j2``) in ``[agent] prompt_dir`` (paths relative to the repository root).
Variables: ``packet`` (the Packet), ``attempt`` (int), ``stage`` (str), ``planted`` (list of
repo-relative paths), ``packets_dir`` (str), ``sections`` (body sections by lowercased heading),
``previous`` (None, or an object with ``n``, ``gate``, ``layer``, ``reason``, ``details``);
review stages also get ``diff``, ``schema`` (JSON Schema text), ``review_file``,
``revise_stages`` and ``retry_errors``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .packet import Packet

if TYPE_CHECKING:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

TEMPLATES = Path(__file__).parent / "templates"
BUILTIN = TEMPLATES / "implement.md.j2"


def template_for(stage: str, prompt_dir: Path | None, implement_override: Path | None) -> Path:
    """The template file a stage's prompt is rendered from (override first, then built-in)."""
    kind = "review" if stage.startswith("review") else stage
    if stage == "implement" and implement_override:
        return implement_override
    for name in (f"{stage}.md.j2", f"{kind}.md.j2"):
        if prompt_dir and (prompt_dir / name).is_file():
            return prompt_dir / name
    return TEMPLATES / f"{kind}.md.j2"


@dataclass(frozen=True)
class PreviousFailure:
    n: int
    gate: str
    layer: str
    reason: str
    details: str = ""


WITHHELD = "(withheld: it names a hidden test)"
HIDDEN_GATES = ("hermetic",)   # the gates whose test runs include the packet's hidden files


def _test_words(path: str, data: bytes) -> set[str]:
    """The file name, module stem, and ``test_*`` functions and ``Test*`` classes of one
    test file (``path`` repo-relative)."""
    name = path.rsplit("/", 1)[-1]
    text = data.decode("utf-8", errors="replace")
    return ({name, name.rsplit(".", 1)[0]}
            | set(re.findall(r"^\s*(?:async\s+)?def\s+(test\w*)", text, re.MULTILINE))
            | set(re.findall(r"^\s*class\s+(Test\w*)", text, re.MULTILINE)))


def hidden_names(hidden: Mapping[str, bytes], visible: Mapping[str, bytes] | None = None
                 ) -> set[str]:
    """Every word that would give a hidden test away: its repo-relative path and dotted
    module, and its file name, module stem and ``test_*`` / ``Test*`` names unless a
    ``visible`` file (the planted tests: the agent reads them) has the same word: withholding
    a line about a visible test of the same name told the agent a hidden one exists. Both
    map path → content, as :meth:`Packet.hidden_blobs` gives."""
    seen = set().union(*(_test_words(p, d) for p, d in (visible or {}).items()))
    out: set[str] = set()
    for path, data in hidden.items():
        out |= {path, path.rsplit(".", 1)[0].replace("/", ".")} | (_test_words(path, data) - seen)
    return {w for w in out if len(w) > 2}


# a test id qualified by its file or module: ``tests/t.py::test_a[1]``, ``tests.t::T::test_a``
_QUALIFIED = re.compile(r"(?<![\w./-])([\w./-]+?)(?:\.py)?((?:::[\w\[\]-]+)+)")


def redacted_failure(n: int, gate: str, layer: str, summary: str, evidence: dict[str, Any],
                     hidden: Iterable[str], names: Iterable[str] = ()) -> PreviousFailure:
    """The evidence of a failed gate as the next attempt's agent may see it.

    Hidden tests stay hidden: a finding about a hidden file (kind ``hidden`` or
    ``hidden-visible``, or its path or test id in ``hidden``) is replaced by one sentence,
    "N hidden test(s) failed in <gate>"; the test output of a gate that ran hidden files
    (:data:`HIDDEN_GATES`) is withheld, since it prints their ids, inputs and expected
    values; any line left that still holds one of ``names`` (see :func:`hidden_names`) is
    withheld too. The person sees all of it in ``andon show``. Without hidden files the
    evidence is passed on whole: up to 20 finding messages and the last run's output tail
    (3000 characters)."""
    hidden = set(hidden)
    modules = {h.rsplit(".", 1)[0].replace("/", ".") for h in hidden}
    words = set(names) | hidden | modules

    def is_hidden(f: dict) -> bool:
        tid = f.get("test_id") or ""
        return f.get("kind") in ("hidden", "hidden-visible") or f.get("path") in hidden \
            or any(tid == m or tid.startswith(m + "::") for m in modules)

    findings = evidence.get("findings", [])
    secret = [f for f in findings if is_hidden(f)]
    lines = [f["message"] for f in findings if not is_hidden(f)][:20]
    said = f"{len(secret)} hidden test{'s' if len(secret) != 1 else ''} failed in {gate}"
    if secret:
        reason = said + (f"; {len(lines)} other finding(s) below" if lines else "")
        lines.insert(0, said + " (which, and why, is not shown: hidden tests stay hidden)")
    else:
        reason = summary
    runs = evidence.get("runs", [])
    if runs and runs[-1].get("output_tail"):
        if hidden and gate in HIDDEN_GATES:
            lines += ["", "test output: withheld (this gate also ran hidden tests)"]
        else:
            canaries = (runs[-1].get("integrity") or {}).get("canaries") or {}
            tail = without_canaries(runs[-1]["output_tail"], canaries)
            lines += ["", "test output (tail):", tail[-3000:]]

    pattern = re.compile("|".join(rf"(?<!\w){re.escape(w)}(?!\w)"
                                  for w in sorted(words, key=len, reverse=True)) or r"(?!)")

    def about_visible(m: re.Match[str]) -> str:
        # ids may be relative to a rootdir below the repository: a suffix of a hidden module
        f = m[1].replace("/", ".")
        hid = any(mod == f or mod.endswith("." + f) for mod in modules) or pattern.search(m[1])
        return m[0] if hid else ""

    def scrub(text: str) -> str:
        # an id qualified by a visible file names that file's test, whatever its last part
        return "\n".join(WITHHELD if pattern.search(_QUALIFIED.sub(about_visible, line))
                         else line for line in text.split("\n"))
    return PreviousFailure(n, gate, layer, scrub(reason), scrub("\n".join(lines)))


_BLOCK_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_SECTION = re.compile(r"^={3,}( .* ={3,})?$")
_PROGRESS = re.compile(r"^(\S+ )?[.FEsxXp]+\s+\[\s*\d+%\]$")  # "..F.  [100%]"
_TOTALS = re.compile(r"^=*\s*\d+ (failed|passed|errors?|skipped|xfailed|xpassed)\b.* in "
                     r"[\d.]+s")


def without_canaries(tail: str, canary_ids: Iterable[str]) -> str:
    """A test run's output tail without the harness's canary tests (contain/canary.py):
    they exist only in the harness's run and some fail on purpose, so they are not the
    agent's to fix (a retry prompt showed them as failures). ``canary_ids``: their JUnit ids
    (``tests.test_<hex>::test_<hex>``, the run's ``integrity.canaries``). Dropped: every line
    naming a canary file or test, the failure block under a canary's ``___ name ___``
    header, and pytest's progress and totals lines, which count the canaries. With no
    canary ids, ``tail`` unchanged."""
    ids = list(canary_ids)
    if not ids:
        return tail
    words = {tid.rsplit("::", 1)[-1] for tid in ids} | {
        tid.split("::", 1)[0].rsplit(".", 1)[-1] for tid in ids}
    named = re.compile("|".join(rf"(?<![\w.]){re.escape(w)}(?!\w)" for w in sorted(words)))
    out, skipping = [], False
    for line in tail.split("\n"):
        if header := _BLOCK_HEADER.match(line):
            skipping = bool(named.search(header[1]))
        elif _SECTION.match(line):
            skipping = False
        if skipping or named.search(line) or _PROGRESS.match(line) or _TOTALS.match(line):
            continue
        out.append(line)
    return "\n".join(out)


def visible(text: str) -> str:
    """``text`` with every byte that was not UTF-8 shown as ``\\xNN``: the diff of a binary
    or latin-1 file, or a test's output, reaches a prompt as str holding surrogate escapes
    (git output is decoded with ``surrogateescape``), which no UTF-8 file, pipe or agent
    CLI accepts. Valid text is returned unchanged."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that stands for no byte (from JSON)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


@functools.lru_cache(maxsize=1)
def _environment() -> SandboxedEnvironment:
    # Jinja2 imported here, with the first prompt: a run that renders none (nothing ready, a
    # halted line, a failed preflight; `andon unblock`) does without its ~15 ms
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    # sandboxed: a template is a file in the checkout, and attribute walks such as
    # ``cycler.__init__.__globals__`` must not reach Python from it
    return SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                autoescape=False)  # Markdown for an agent, not HTML


@functools.lru_cache(maxsize=32)
def _compiled(source: str) -> jinja2.Template:
    """The template whose text is ``source``, compiled once per process and rendered as often
    as asked (a compiled template keeps no state between renders): Jinja2's parser, its code
    generator and Python's ``compile`` took about 5 ms a prompt, every stage of every attempt
    (an attempt renders two or more). Keyed by the text, so an edited template is compiled
    again; a template that does not compile raises each time (errors are not cached)."""
    return _environment().from_string(source)


def render_prompt(packet: Packet, attempt: int, packets_dir: str,
                  previous: PreviousFailure | None = None,
                  template_path: Path | None = None, stage: str = "implement",
                  **extra: object) -> str:
    """Return the prompt text (Markdown).

    Raises:
        ConfigError: the override template is missing, is not valid Jinja2, or reaches for
            something the sandbox forbids (``jinja2.sandbox``).
    """
    import jinja2

    path = template_path or BUILTIN
    try:
        template = _compiled(path.read_text(encoding="utf-8"))
        return visible(template.render(
            packet=packet, attempt=attempt, packets_dir=packets_dir, stage=stage,
            planted=sorted(packet.plant_files), sections=packet.body_sections(),
            previous=previous, **extra,
        ))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read prompt template: {exc.strerror}") from None
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise ConfigError(f"{path}:{line or 1}: invalid prompt template: {exc}") from None
