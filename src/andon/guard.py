"""What an agent must not change outside its worktree: andon's own inputs in the user's
checkout (andon.toml, the packets folder: a new packet would be work the agent queued for
itself) and git's executable configuration (.git/config, .git/hooks). The agent process is not sandboxed and can reach the checkout by absolute path,
so the runner fingerprints these before and after every agent stage and before every
attempt; a difference is evidence, never silently planted or obeyed.

Other writes to the checkout (source files, untracked files) are not watched: a person may
be editing there while the queue runs. Containing the agent is the sandbox's job.
"""

from __future__ import annotations

from pathlib import Path

from .workspace import Repo, file_marker, manifest


def fingerprint(repo: Repo, config_file: Path, dirs: list[Path]) -> dict[str, str]:
    """Repo-relative path → content marker (see :func:`workspace.file_marker`) of
    ``config_file``, ``.git/config`` and every file under ``dirs`` and ``.git/hooks``. A
    watched file or folder that does not exist contributes nothing."""
    out: dict[str, str] = {}
    for f in (config_file, repo.git_dir / "config"):
        marker = file_marker(f)
        if marker is not None:
            out[_rel(repo, f)] = marker
    for d in (*dirs, repo.git_dir / "hooks"):
        if d.is_dir():
            out.update({_rel(repo, d / rel): marker for rel, marker in manifest(d).items()})
    return out


def changes(before: dict[str, str], after: dict[str, str]) -> list[tuple[str, str]]:
    """(path, "modified" | "added" | "deleted") for every difference, sorted by path."""
    paths = sorted(set(before) | set(after))
    return [(p, "added" if p not in before else "deleted" if p not in after else "modified")
            for p in paths if before.get(p) != after.get(p)]


def _rel(repo: Repo, path: Path) -> str:
    # .git may live outside the top level (a linked worktree of the user's): name it as git
    if path.is_relative_to(repo.git_dir):
        return ".git/" + path.relative_to(repo.git_dir).as_posix()
    return path.relative_to(repo.root).as_posix()
