"""The packet lifecycle of DESIGN.md, in one place.

    ready ─claim─▶ running ─▶ gating ─green─▶ reviewing ─accept─▶ merging ─▶ done
      ▲               │          │  red            │ revise            │ (gate = human)
      └── needs_work ◀┴──────────┴─────────────────┘                   ▼
            │ attempts exhausted, or same fingerprint twice      awaiting_human ─approve─▶ merging
            ▼                                                           └─reject─▶ needs_work
         blocked ── halts the queue until a person acts (`andon unblock`)
      stale: spec_commit no longer matches spec_path — refused, never run
      draft ─accept (a person, `andon plan --accept`)─▶ ready: written by the plan stage,
      never claimed; a packet whose file says ``status = "draft"`` again goes back to draft

Two edges are the harness's own, not the agent's: an attempt interrupted by a crash goes back
to ``ready`` (``running``/``gating``/``reviewing`` → ``ready``) without counting as a failure,
and a packet with no review stage goes straight from ``gating`` to ``merging``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .errors import IllegalTransition

if TYPE_CHECKING:
    from .packet import Packet

State = Literal[
    "ready", "running", "gating", "reviewing", "merging", "done",
    "needs_work", "blocked", "awaiting_human", "stale", "draft",
]

STATES: tuple[str, ...] = State.__args__  # type: ignore[attr-defined]

TRANSITIONS: dict[str, frozenset[str]] = {
    "ready": frozenset({"running", "stale", "draft"}),
    "needs_work": frozenset({"running", "stale", "blocked", "draft"}),
    "running": frozenset({"gating", "needs_work", "blocked", "ready"}),
    "gating": frozenset({"reviewing", "merging", "awaiting_human", "needs_work", "blocked",
                         "ready"}),
    "reviewing": frozenset({"merging", "awaiting_human", "needs_work", "blocked", "ready"}),
    "awaiting_human": frozenset({"merging", "needs_work"}),
    "merging": frozenset({"done", "needs_work", "blocked"}),
    "blocked": frozenset({"ready"}),
    "stale": frozenset({"ready", "draft"}),
    "draft": frozenset({"ready"}),
    "done": frozenset(),
}

# States a runner may pick a packet up from.
CLAIMABLE = frozenset({"ready", "needs_work"})
# States that mean an attempt was in flight; after a crash they are recovered.
IN_FLIGHT = frozenset({"running", "gating", "reviewing"})


def check(from_state: str, to_state: str) -> None:
    """Raise IllegalTransition unless ``from_state → to_state`` is an edge above.

    Raises:
        IllegalTransition: unknown state or an edge DESIGN.md does not draw.
    """
    if from_state not in TRANSITIONS:
        raise IllegalTransition(f"unknown state {from_state!r}; states are {', '.join(STATES)}")
    if to_state not in TRANSITIONS[from_state]:
        allowed = ", ".join(sorted(TRANSITIONS[from_state])) or "nothing (terminal)"
        raise IllegalTransition(
            f"illegal transition {from_state} -> {to_state}; from {from_state} only: {allowed}"
        )


def may_claim(rows: list[dict], packets: list[Packet], only: list[str] | None) -> bool:
    """Whether a run could claim one of ``packets`` (those of ``only`` when given): one that
    is not a draft and whose store row (of ``rows``, ``Store.packets()``) is claimable, in
    flight (recovered before the loop) or not made yet (a packet new here). Requirements
    are not looked at."""
    state = {r["id"]: r["state"] for r in rows}
    return any(p.status != "draft" and state.get(p.id, "ready") in CLAIMABLE | IN_FLIGHT
               for p in packets if not only or p.id in only)
