"""What the harness's own test runs leave in a worktree is not the agent's change.

A test run may write into its working directory: pytest-cov's ``.coverage`` at the end of
every session, hypothesis' ``.hypothesis/`` database, a project's own report files. red runs
the planted tests in the attempt's worktree before the agent starts, so such a file was there
when the agent's change was taken (``git add --all``): scope blamed it on the agent
(``outside allowed_paths``) or, with no allowed_paths, it was merged. Around each gate that
runs tests, the files git shows as untracked (and not ignored) that the gate's runs added
are removed again; what was there before — the agent's own untracked files included — is
left as it was. Ignored files are never part of a change and are not looked at.
"""

from __future__ import annotations

from pathlib import Path

from .git.repo import Repo


def untracked(repo: Repo, worktree: Path) -> set[str]:
    """Paths ("/"-separated, relative to ``worktree``) that git shows as untracked and not
    ignored there (``git ls-files --others --exclude-standard``). Raises GitError."""
    out = repo.git("ls-files", "--others", "--exclude-standard", "-z", cwd=worktree)
    return {p for p in out.split("\0") if p}


def remove_added(repo: Repo, worktree: Path, before: set[str]) -> list[str]:
    """Remove each untracked path in ``worktree`` that is not in ``before``, and the folders
    that leaves empty; returns the removed paths, sorted. A path that cannot be removed stays
    (and is then part of the change, as before). Raises GitError."""
    added = sorted(untracked(repo, worktree) - before)
    removed = []
    for rel in added:
        path = worktree / rel
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(rel)
        parent = path.parent
        while parent != worktree:
            try:
                parent.rmdir()  # only when empty
            except OSError:
                break
            parent = parent.parent
    return removed

