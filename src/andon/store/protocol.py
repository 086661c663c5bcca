"""The store's interface: what the rest of andon may call, whichever backend is behind it.

Two backends implement it: :class:`andon.store.sqlite.Store` (the embedded default, one file)
and :class:`andon.store.postgres.PgStore` (several workers, one server). Callers type against
:class:`StoreProtocol`; :func:`andon.store.connect` picks the backend. Rows come back as
dicts (JSON columns already decoded); times are ISO-8601 UTC strings; durations are float
seconds. Each method's full contract is the docstring of the same method in ``sqlite.py``
(or ``claims.py`` for the lease methods).
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..usage import Usage


class StoreProtocol(Protocol):
    def close(self) -> None: ...

    def tx(self) -> AbstractContextManager[Any]:
        """One write transaction; nested use joins the outer one."""
        ...

    # events and transitions
    def event(self, kind: str, packet_id: str | None = None, attempt_id: int | None = None,
              data: dict[str, Any] | None = None, from_state: str | None = None,
              to_state: str | None = None) -> None: ...

    def transition(self, packet_id: str, to_state: str, kind: str,
                   attempt_id: int | None = None, data: dict[str, Any] | None = None
                   ) -> str: ...

    def events(self, packet_id: str | None = None, kind: str | None = None
               ) -> list[dict[str, Any]]: ...

    # packets and attempts
    def upsert_packet(self, packet_id: str, slug: str, source: str, content_sha: str,
                      definition: dict[str, Any]) -> bool: ...

    def packet(self, packet_id: str) -> dict[str, Any] | None: ...

    def packets(self) -> list[dict[str, Any]]: ...

    def new_attempt(self, packet_id: str, agent: str, round_: int) -> dict[str, Any]: ...

    def update_attempt(self, attempt_id: int, **fields: Any) -> None: ...

    def attempt(self, attempt_id: int) -> dict[str, Any]: ...

    def attempts(self, packet_id: str) -> list[dict[str, Any]]: ...

    # gate results, stage runs, reviews, the results cache
    def add_gate_result(self, attempt_id: int | None, gate: str, status: str,
                        failure_layer: str | None, summary: str, evidence: dict[str, Any],
                        started_at: str, duration_s: float) -> None: ...

    def gate_results(self, attempt_id: int) -> list[dict[str, Any]]: ...

    def add_stage_run(self, attempt_id: int, stage: str, agent: str, exit_status: int | None,
                      timed_out: bool, duration_s: float, transcript_path: str, claim: str,
                      usage: Usage | None, started_at: str) -> None: ...

    def stage_runs(self, attempt_id: int) -> list[dict[str, Any]]: ...

    def add_review(self, attempt_id: int, stage: str, ask: int, raw: str, errors: list[str],
                   document: dict[str, Any] | None = None, decision: str | None = None,
                   effective_decision: str | None = None, revise_stage: str | None = None,
                   downgraded_because: list[str] | None = None) -> None: ...

    def reviews(self, attempt_id: int) -> list[dict[str, Any]]: ...

    def cached(self, key: str) -> dict[str, Any] | None: ...

    def set_cached(self, key: str, kind: str, data: dict[str, Any],
                   evidence: dict[str, Any]) -> None: ...

    def drop_cached(self, prefix: str, before: str | None = None) -> None: ...

    def set_baseline(self, key: str, passed_ids: set[str], evidence: dict[str, Any]
                     ) -> None: ...

    # claims with a lease (several workers; claims.py)
    def claim(self, worker_id: str, lease_s: float,
              among: Collection[str] | None = None) -> dict[str, Any] | None: ...

    def renew(self, worker_id: str, packet_id: str, lease_s: float) -> bool: ...

    def release(self, worker_id: str, packet_id: str) -> None: ...

    def leases(self) -> list[dict[str, Any]]: ...

    def reclaim_expired(self) -> list[str]: ...

    # experiments (store/experiment_rows.py)
    def upsert_experiment(self, name: str, source: str, spec: dict[str, Any]) -> None: ...

    def experiment(self, name: str) -> dict[str, Any] | None: ...

    def experiments(self) -> list[dict[str, Any]]: ...

    def add_experiment_run(self, experiment: str, task: str, condition: str, repeat: int,
                           outcome: str, data: dict[str, Any], started_at: str,
                           supersedes: int | None = None) -> int: ...

    def experiment_runs(self, experiment: str, superseded: bool = False
                        ) -> list[dict[str, Any]]: ...

    # the hash chain (chain.py)
    def chain_rows(self, last: int | None = None) -> list[dict[str, Any]]: ...
