"""The interview in a terminal: one question at a time with the recommended answer and why;
Enter accepts it, typed text is the person's correction (one line)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

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
        c.print(f"[bold]Question {n}[/bold] ({escape(phase)}, {escape(question.door)} door, "
                f"topic {escape(question.topic)}{escape(about)})")
        c.print(f"  {escape(question.question)}")
        c.print(f"  [green]recommended:[/green] {escape(question.recommended)}")
        c.print(f"  [dim]why:[/dim] {escape(question.why)}")
        typed = c.input("Enter accepts, or type your answer: ").strip()
        if not typed:
            c.print("  [green]accepted[/green]")
            return question.recommended, False
        c.print("  [yellow]your answer recorded[/yellow]")
        return typed, True
