"""The interview in a terminal: one question at a time with the recommended answer and why;
Enter accepts it, typed text is the person's correction (one line)."""

from __future__ import annotations

from rich.console import Console

from ..safe_text import markup_safe
from .protocol import Question


class TerminalAnswerer:
    """An ``Answerer`` (see :mod:`andon.grill.interview`) reading from the terminal through
    ``console``. EOFError (stdin closed) goes up, as KeyboardInterrupt does."""

    def __init__(self, console: Console):
        self.console = console

    def __call__(self, question: Question, n: int, phase: str) -> tuple[str, bool]:
        c = self.console
        about = f", re-reads {', '.join(question.about)}" if question.about else ""
        c.print()
        c.print(f"[bold]Question {n}[/bold] ({markup_safe(phase)}, "
                f"{markup_safe(question.door)} door, topic {markup_safe(question.topic)}"
                f"{markup_safe(about)})")
        c.print(f"  {markup_safe(question.question, lines=True)}")
        c.print(f"  [green]recommended:[/green] {markup_safe(question.recommended, lines=True)}")
        c.print(f"  [dim]why:[/dim] {markup_safe(question.why, lines=True)}")
        typed = c.input("Enter accepts, or type your answer: ").strip()
        if not typed:
            c.print("  [green]accepted[/green]")
            return question.recommended, False
        c.print("  [yellow]your answer recorded[/yellow]")
        return typed, True
