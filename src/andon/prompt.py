"""Build a stage prompt from a packet (and, on a retry, the previous failure's evidence).

The template is Jinja2. The built-in one is ``templates/implement.md.j2``; a project overrides
it with ``[agent] prompt_template = "path/to/file.md.j2"`` in andon.toml (path relative to the
repository root). Variables: ``packet`` (the Packet), ``attempt`` (int), ``planted`` (list of
repo-relative paths), ``packets_dir`` (str), ``sections`` (body sections by lowercased heading),
``previous`` (None, or an object with ``n``, ``gate``, ``layer``, ``reason``, ``details``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2

from .errors import ConfigError
from .packet import Packet

BUILTIN = Path(__file__).parent / "templates" / "implement.md.j2"


@dataclass(frozen=True)
class PreviousFailure:
    n: int
    gate: str
    layer: str
    reason: str
    details: str = ""


def render_prompt(packet: Packet, attempt: int, packets_dir: str,
                  previous: PreviousFailure | None = None,
                  template_path: Path | None = None) -> str:
    """Return the prompt text (Markdown).

    Raises:
        ConfigError: the override template is missing or is not valid Jinja2.
    """
    path = template_path or BUILTIN
    try:
        source = path.read_text(encoding="utf-8")
        template = jinja2.Environment(
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
            autoescape=False,  # Markdown for an agent, not HTML
        ).from_string(source)
        return template.render(
            packet=packet, attempt=attempt, packets_dir=packets_dir,
            planted=sorted(packet.plant_files), sections=packet.body_sections(),
            previous=previous,
        )
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read prompt template: {exc.strerror}") from None
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise ConfigError(f"{path}:{line or 1}: invalid prompt template: {exc}") from None
