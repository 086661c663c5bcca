"""`andon grill FEATURE.md`: an interview that settles a feature's one-way doors before any
code, run by an agent adapter through a documented turn protocol (docs/grill.md), ending in
a decisions file and glossary additions committed on a branch of their own.

Public face: :class:`Interview` (the loop, resumable from its log), :func:`accept_all` (the
``--non-interactive`` answerer), :class:`TerminalAnswerer`, :class:`Result`, the protocol's
documents (:class:`Question`, :class:`Done`, :class:`Written`) and errors
(:class:`TurnRejected`, :class:`AgentFailed`).
"""

from .interview import Interview, Result, accept_all, slug_of
from .protocol import SCHEMAS, Done, Question, TurnRejected, Written, parse_turn
from .terminal import TerminalAnswerer
from .turn import AgentFailed

__all__ = ["SCHEMAS", "AgentFailed", "Done", "Interview", "Question", "Result",
           "TerminalAnswerer", "TurnRejected", "Written", "accept_all", "parse_turn",
           "slug_of"]
