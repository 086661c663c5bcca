"""What the end of an attempt does to its packet: merged, needs work, blocked, or rejected.

The retry policy is :func:`fail`: a failure in the ``specification`` or ``environment``
layer, of the ``budget`` or ``harness`` gate, or with an ``outside-worktree`` finding blocks
the packet at once; so does the same failure fingerprint as the last counted attempt of the
round (no new evidence) and the last of ``max_attempts``; anything else is ``needs_work``.
:func:`merge` squashes a passed attempt onto the integration branch exactly once and keeps
the merged tree's passing tests as the next baseline. :func:`reject` is a person's "no" to a
packet awaiting them. Every function writes the store only; the runner holds the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Config
from .errors import UsageError
from .gates.base import GateResult
from .git.repo import Repo
from .merge import merge_attempt
from .packet import Packet
from .store import StoreProtocol, no_such_packet, now

if TYPE_CHECKING:
    from .baseline import Baseline


def reject(store: StoreProtocol, packet_id: str, who: str, why: str) -> str:
    """A person rejects a packet in ``awaiting_human``: back to ``needs_work`` with the
    reason as evidence for the next attempt's prompt.

    Raises:
        UsageError: no such packet, or it is not awaiting a person.
    """
    a = awaiting(store, packet_id)
    store.add_gate_result(a["id"], "human", "fail", "code", f"rejected by {who}: "
                          f"{why}", {"findings": [{"kind": "rejected", "message":
                          why, "path": None, "test_id": None}], "by": who},
                          now(), 0.0)
    store.update_attempt(a["id"], state="failed", reason=f"rejected by {who}: {why}",
                         route_stage="implement", ended_at=now())
    store.transition(packet_id, "needs_work", "rejected", a["id"],
                     {"by": who, "why": why})
    return "needs_work"


def awaiting(store: StoreProtocol, packet_id: str) -> dict:
    """The last attempt of a packet in ``awaiting_human``.

    Raises:
        UsageError: no such packet, or it is not awaiting a person.
    """
    row = store.packet(packet_id)
    if row is None:
        raise UsageError(no_such_packet(store, packet_id))
    if row["state"] != "awaiting_human":
        raise UsageError(f"packet {packet_id} is {row['state']}, not awaiting_human")
    return store.attempts(packet_id)[-1]


def red_ids(store: StoreProtocol, attempt_id: int) -> set[str]:
    """The test ids the attempt's ``red`` gate saw fail before the agent ran."""
    red: set[str] = set()
    for g in store.gate_results(attempt_id):
        if g["gate"] == "red":
            red |= set(g["evidence"].get("red_ids", []))
    return red


def merge(repo: Repo, config: Config, store: StoreProtocol, packet: Packet, a: dict, red: set[str],
          baseline: Baseline, echo: Callable[[str], None]) -> str:
    """Merge the passed attempt ``a`` (its ``merge`` check recorded); the packet's new state:
    ``done``, or what :func:`fail` decides when the merge check fails. ``baseline``: what
    passes on a tree (the runner's preflight cache), told what passes on the merged one."""
    ev = Path(a["evidence_dir"])
    passed = list(dict.fromkeys(g["gate"] for g in store.gate_results(a["id"])
                                if g["status"] == "pass"))
    out = merge_attempt(repo, config, packet, a, red, baseline.passing, ev, passed)
    if out.check is not None:
        store.add_gate_result(a["id"], "merge", out.check.status, out.check.layer,
                              out.check.summary, out.check.evidence(), now(), 0.0)
    if out.merged_sha is None:
        assert out.check is not None  # merge_attempt: no merge comes with its failing check
        return fail(store, packet, a, out.check, echo)
    tree = repo.resolve(f"{out.merged_sha}^{{tree}}")
    if out.passed_ids:  # a merge check ran now, in this process's environment
        baseline.remember(tree, out.passed_ids, {"from": "merge", "attempt": a["id"]})
    else:  # the attempt's hermetic runs: kept only for the environment they ran in
        ids, env = hermetic_passed(store, a["id"])
        baseline.remember(tree, ids, {"from": "merge", "attempt": a["id"]}, env)
    store.update_attempt(a["id"], state="merged", merge_sha=out.merged_sha,
                         ended_at=now())
    store.transition(packet.id, "done", "merged", a["id"], {"sha": out.merged_sha})
    # a check ran only because the branch moved (merge.py): the line says so, or the board's
    # extra gate for this packet has no explanation in the run's output
    moved = (f" (it had moved since the attempt started: {out.check.summary})"
             if out.check is not None else "")
    echo(f"{packet.id}: merged as {out.merged_sha[:10]} onto "
         f"{config.andon.integration_branch}{moved}")
    return "done"


def hermetic_passed(store: StoreProtocol, attempt_id: int) -> tuple[set[str], str | None]:
    """The test ids the attempt's passing ``hermetic`` gate saw pass (empty if none), and the
    digest of the tests' environment they ran in (None: not recorded)."""
    # The squash of an unmoved branch has exactly the candidate's tree, which the
    # hermetic gate just ran: its passed ids are the next attempts' baseline.
    for g in store.gate_results(attempt_id):
        if g["gate"] == "hermetic" and g["status"] == "pass":
            return set(g["evidence"].get("passed_ids", [])), g["evidence"].get("env_digest")
    return set(), None


def fail(store: StoreProtocol, packet: Packet, a: dict, failure: GateResult,
         echo: Callable[[str], None]) -> str:
    """Record ``failure`` as the end of attempt ``a``; the packet's new state, ``needs_work``
    or ``blocked`` (the retry policy in the module docstring)."""
    fp = failure.fingerprint()
    counted = [x for x in store.attempts(packet.id)
               if x["round"] == a["round"] and x["counted"] and x["id"] != a["id"]
               and x["state"] == "failed"]
    store.update_attempt(a["id"], state="failed", fingerprint=fp,
                         failure_layer=failure.layer, reason=failure.summary,
                         ended_at=now())
    data = {"gate": failure.gate, "layer": failure.layer, "fingerprint": fp,
            "reason": failure.summary}
    if failure.layer in ("specification", "environment") \
            or failure.gate in ("budget", "harness") \
            or any(f.kind == "outside-worktree" for f in failure.findings):
        why = f"{failure.gate} gate ({failure.layer}): {failure.summary}"
    elif counted and counted[-1]["fingerprint"] == fp:
        why = (f"same failure as attempt {counted[-1]['n']} (fingerprint {fp}): no new "
               f"evidence — {failure.summary}")
    elif len(counted) + 1 >= packet.max_attempts:
        why = f"attempts exhausted ({packet.max_attempts}): {failure.summary}"
    else:
        store.transition(packet.id, "needs_work", "gate-failed", a["id"], data)
        echo(f"{packet.id}: needs work: {failure.gate}: {failure.summary}")
        return "needs_work"
    store.update_attempt(a["id"], reason=why)
    store.transition(packet.id, "blocked", "blocked", a["id"], {**data, "why": why})
    echo(f"{packet.id}: BLOCKED: {why}")
    return "blocked"
