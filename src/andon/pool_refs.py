"""The tamper check on andon's git refs when several workers share one repository.

After every agent stage the attempt compares andon's refs with a snapshot taken before the
stage and puts back what moved (``Repo.restore_refs``): with one worker, only the agent can
have moved them. In a pool (``andon run --workers N``) the other workers move refs too while
a stage runs: their attempts' branches (``refs/heads/andon/<id>/<n>``), their merge checks
(``refs/andon/merge-check/<id>``) and, by merging, the integration branch. Put back, those
would undo another worker's merge. :class:`PoolRepo` judges instead:

- another packet's branches and merge-check refs are that packet's worker's, not judged here
  (merges read the candidate from the store, never from those refs);
- the integration branch is judged against the last value a merge gave it (the ledger kept
  in the merge lock file by merge.py, written at the start of the pool), read while holding
  the merge lock, so no merge is half done: a move to anything else is put back to that
  value, never to the older snapshot;
- everything else andon owns is judged as with one worker.
"""

from __future__ import annotations

from pathlib import Path

from .git.repo import Repo
from .merge import ledger_value, merge_lock

_OURS = ("refs/heads/andon/", "refs/andon/")


class PoolRepo(Repo):
    """The repository at ``root`` as the worker of ``packet_id`` sees it (see the module
    docstring); everything but :meth:`restore_refs` is :class:`Repo`'s."""

    def __init__(self, root: Path, packet_id: str):
        super().__init__(root)
        self.packet_id = packet_id

    def _another_packets(self, ref: str) -> bool:
        for prefix in ("refs/heads/andon/", "refs/andon/merge-check/"):
            if ref.startswith(prefix):
                owner = ref[len(prefix):].split("/")[0]
                return owner != self.packet_id
        return False

    def restore_refs(self, before: dict[str, str], owned: tuple[str, ...] = ()) -> list[str]:
        """As :meth:`Repo.restore_refs`, for one worker of a pool: refs in ``owned`` (the
        integration branch) are judged against the merges' ledger under the merge lock;
        other packets' refs are left to their workers. Returns the refs put right."""
        def judged(ref: str) -> bool:
            return ref in owned or (ref.startswith(_OURS) and not self._another_packets(ref))

        with merge_lock(self) as lock:
            merged = ledger_value(lock)
            expected = {r: s for r, s in before.items() if judged(r)}
            if merged:
                expected.update({r: merged for r in owned})
            after = self.refs_snapshot()
            made = [r for r in after if judged(r) and r not in expected]
            for r in made:
                self.git("update-ref", "-d", r, check=False)
            moved = [r for r, sha in expected.items() if after.get(r) != sha]
            for r in moved:
                self.git("update-ref", "-m", "andon: restore a ref the agent moved", r,
                         expected[r], check=False)
        return moved + made
