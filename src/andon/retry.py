"""What a retry takes from the failed attempt before it: where it starts, what it is told.

:func:`carry_over` decides which commits a retry keeps; :func:`previous_failure` is the
failure the next stage prompt shows, redacted so that nothing names a hidden test.
"""

from __future__ import annotations

from collections.abc import Callable

from .packet import Packet
from .prompt import PreviousFailure, hidden_names, redacted_failure
from .store import StoreProtocol


def carry_over(store: StoreProtocol, packet: Packet, round_: int,
               echo: Callable[[str], None]) -> dict:
    """Where a retry starts. A failure routed back to ``implement`` keeps the previous
    attempt's atdd tests (its base, plant and atdd commits); a broken reviewer
    (``verifier``) keeps its candidate too, so only the review runs again; anything else
    starts afresh from the integration head. Commits are carried only when the packet
    is byte for byte the one that attempt worked on."""
    prev = next((x for x in reversed(store.attempts(packet.id))
                 if x["state"] == "failed"), None)
    if not prev or prev["round"] != round_:
        return {}
    claimed = next((e for e in store.events(packet.id)
                    if e["kind"] == "claimed" and e["attempt_id"] == prev["id"]), None)
    if not claimed or claimed["data"].get("packet_sha") != packet.content_sha:
        echo(f"{packet.id}: the packet changed since attempt {prev['n']}: starting "
             "afresh")
        return {}
    if prev["route_stage"] == "implement" and prev["atdd_sha"]:
        return {"start_stage": "implement", "base_sha": prev["base_sha"],
                "plant_sha": prev["plant_sha"], "atdd_sha": prev["atdd_sha"]}
    if prev["failure_layer"] == "verifier" and prev["candidate_sha"]:
        return {"start_stage": prev["route_stage"], "base_sha": prev["base_sha"],
                "plant_sha": prev["plant_sha"], "atdd_sha": prev["atdd_sha"],
                "candidate_sha": prev["candidate_sha"]}
    return {"start_stage": prev["route_stage"]} if prev["route_stage"] else {}


def previous_failure(store: StoreProtocol, packet_id: str, packet: Packet | None
                     ) -> PreviousFailure | None:
    """The first failing gate of the packet's last failed attempt, as the next prompt shows
    it (``packet``: the packet as loaded, whose hidden tests are redacted; None if gone)."""
    for x in reversed(store.attempts(packet_id)):
        if x["state"] != "failed":
            continue
        g = next((g for g in store.gate_results(x["id"])
                  if g["status"] in ("fail", "error")), None)
        if g is None:
            return None
        # what the next agent reads: nothing that names a hidden test (prompt.py)
        blobs = {k: v[0] for k, v in packet.hidden_blobs().items()} if packet else {}
        planted = {k: v[0] for k, v in packet.plant_blobs().items()} if packet else {}
        return redacted_failure(x["n"], g["gate"], g["failure_layer"] or "?",
                                g["summary"], g["evidence"], blobs,
                                hidden_names(blobs, planted))
    return None
