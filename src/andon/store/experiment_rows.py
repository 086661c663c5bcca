"""Experiment rows (issue 17): the experiments run here and their finished runs; mixed into
the backend's ``Store``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .rows import now
from .rows import row_dict as _row

if TYPE_CHECKING:
    from contextlib import AbstractContextManager


class ExperimentRows:
    """Experiments and their runs, over the backend's ``db`` and ``tx``."""

    if TYPE_CHECKING:  # provided by the backend's Store
        db: Any

        def tx(self) -> AbstractContextManager[Any]: ...

    def upsert_experiment(self, name: str, source: str, spec: dict[str, Any]) -> None:
        """Record the experiment ``name`` as last read from ``source`` (its settings, JSON)."""
        with self.tx() as db:
            db.execute("INSERT INTO experiments VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO "
                       "UPDATE SET source = excluded.source, spec = excluded.spec, "
                       "updated_at = excluded.updated_at",
                       (name, source, json.dumps(spec), now(), now()))

    def experiment(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM experiments WHERE name = ?", (name,)).fetchone()
        return _row(row) if row else None

    def experiments(self) -> list[dict[str, Any]]:
        return [_row(r) for r in self.db.execute("SELECT * FROM experiments ORDER BY name")]

    def add_experiment_run(self, experiment: str, task: str, condition: str, repeat: int,
                           outcome: str, data: dict[str, Any], started_at: str,
                           supersedes: int | None = None) -> int:
        """Record one finished run in one transaction (with the error run it replaces, if
        any, marked superseded); its id."""
        with self.tx() as db:
            if supersedes is not None:
                db.execute("UPDATE experiment_runs SET superseded = 1 WHERE id = ?",
                           (supersedes,))
            row = db.execute(
                "INSERT INTO experiment_runs (experiment, task, condition, repeat, outcome, "
                "data, started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (experiment, task, condition, repeat, outcome, json.dumps(data), started_at,
                 now())).fetchone()
            return int(row[0])

    def experiment_runs(self, experiment: str, superseded: bool = False
                        ) -> list[dict[str, Any]]:
        """The runs of ``experiment`` in the order they finished (``data`` as a dict);
        superseded error runs only when asked."""
        where = "" if superseded else " AND superseded = 0"
        return [_row(r) for r in self.db.execute(
            f"SELECT * FROM experiment_runs WHERE experiment = ?{where} ORDER BY id",
            (experiment,))]
