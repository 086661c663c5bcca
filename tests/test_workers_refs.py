"""The ref tamper check of one worker in a pool (pool_refs.PoolRepo), on a real repository.

The honest case: while P1's agent works, P2's worker makes its attempt branch and merges
onto the integration branch (recording the merge in the ledger, as merge.py does): nothing of
that is P1's agent's doing, and nothing is put back. The cheating case: P1's agent moves the
integration branch (even right after a merge), or makes a branch of its own packet: put back
to the merge's value, never to the older snapshot, and reported.
"""

from __future__ import annotations

from pathlib import Path

from andon.merge import merge_lock, record_merge
from andon.pool_refs import PoolRepo

from helpers import git, make_project

INTEGRATION = "refs/heads/andon/integration"


def repo_with_integration(tmp_path: Path) -> tuple[PoolRepo, str]:
    root = make_project(tmp_path / "repo")
    head = git(root, "rev-parse", "HEAD").strip()
    git(root, "update-ref", INTEGRATION, head)
    repo = PoolRepo(root, "P1")
    with merge_lock(repo) as lock:  # as the pool does when it starts
        record_merge(lock, head)
    return repo, head


def commit_on(repo: PoolRepo, parent: str, message: str) -> str:
    tree = git(repo.root, "rev-parse", f"{parent}^{{tree}}").strip()
    return git(repo.root, "commit-tree", tree, "-p", parent, "-m", message).strip()


def other_worker_merges(repo: PoolRepo, onto: str) -> str:
    """P2's worker: its attempt branch, its merge check ref, and a merge (under the lock,
    recorded in the ledger)."""
    squash = commit_on(repo, onto, "P2 squash")
    git(repo.root, "update-ref", "refs/heads/andon/P2/1", squash)
    git(repo.root, "update-ref", "refs/andon/merge-check/P2", squash)
    with merge_lock(repo) as lock:
        git(repo.root, "update-ref", INTEGRATION, squash, onto)
        record_merge(lock, squash)
    return squash


def test_other_workers_refs_and_merges_are_not_the_agents(tmp_path):
    repo, head = repo_with_integration(tmp_path)
    before = repo.refs_snapshot()
    merged = other_worker_merges(repo, head)
    assert repo.restore_refs(before, (INTEGRATION,)) == []
    assert repo.rev_parse(INTEGRATION) == merged  # the other worker's merge stands
    assert repo.rev_parse("refs/heads/andon/P2/1") == merged


def test_an_agent_moving_the_integration_branch_is_put_back_to_the_last_merge(tmp_path):
    repo, head = repo_with_integration(tmp_path)
    before = repo.refs_snapshot()
    merged = other_worker_merges(repo, head)
    evil = commit_on(repo, merged, "smuggled")
    git(repo.root, "update-ref", INTEGRATION, evil)  # P1's agent, by absolute path
    git(repo.root, "update-ref", "refs/heads/andon/P1/7", evil)  # a branch of its own packet
    moved = repo.restore_refs(before, (INTEGRATION,))
    assert sorted(moved) == sorted([INTEGRATION, "refs/heads/andon/P1/7"])
    assert repo.rev_parse(INTEGRATION) == merged  # not `head`: the merge is not undone
    assert repo.rev_parse("refs/heads/andon/P1/7") is None


def test_an_agent_moving_the_branch_with_no_merge_meanwhile_is_put_back(tmp_path):
    repo, head = repo_with_integration(tmp_path)
    before = repo.refs_snapshot()
    git(repo.root, "update-ref", INTEGRATION, commit_on(repo, head, "smuggled"))
    assert repo.restore_refs(before, (INTEGRATION,)) == [INTEGRATION]
    assert repo.rev_parse(INTEGRATION) == head
