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

from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from .errors import ConfigError
from .packet import Packet

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


def render_prompt(packet: Packet, attempt: int, packets_dir: str,
                  previous: PreviousFailure | None = None,
                  template_path: Path | None = None, stage: str = "implement",
                  **extra: object) -> str:
    """Return the prompt text (Markdown).

    Raises:
        ConfigError: the override template is missing, is not valid Jinja2, or reaches for
            something the sandbox forbids (``jinja2.sandbox``).
    """
    path = template_path or BUILTIN
    try:
        source = path.read_text(encoding="utf-8")
        # sandboxed: a template is a file in the checkout, and attribute walks such as
        # ``cycler.__init__.__globals__`` must not reach Python from it
        template = SandboxedEnvironment(
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
            autoescape=False,  # Markdown for an agent, not HTML
        ).from_string(source)
        return template.render(
            packet=packet, attempt=attempt, packets_dir=packets_dir, stage=stage,
            planted=sorted(packet.plant_files), sections=packet.body_sections(),
            previous=previous, **extra,
        )
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read prompt template: {exc.strerror}") from None
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise ConfigError(f"{path}:{line or 1}: invalid prompt template: {exc}") from None
