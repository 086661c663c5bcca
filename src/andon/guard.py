"""What an agent must not change outside its worktree: what andon reads, obeys or runs from
the user's checkout (andon.toml, packets, prompt templates, agent scripts kept there) and
the git configuration its own git commands follow (.git/config, .git/hooks, .git/info). The
agent process is not sandboxed and can reach the checkout by absolute path, so the runner
fingerprints these before and after every agent stage and before every attempt; a
difference is evidence, never silently planted or obeyed.

Other writes to the checkout (source files, untracked files) are not watched: a person may
be editing there while the queue runs. Containing the agent is the sandbox's job.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from .packet import is_cache
from .workspace import Repo, file_marker, manifest


def fingerprint(repo: Repo, config_file: Path, packets_dir: Path,
                extra: tuple[Path, ...] = ()) -> dict[str, str]:
    """Repo-relative path → content marker (see :func:`workspace.file_marker`) of every file
    andon reads, obeys or runs from the checkout: ``config_file``, each
    ``<packets_dir>/<name>/packet.md`` with its ``plant/`` and ``hidden/`` trees and every
    flat ``<packets_dir>/<name>.md`` (a new packet too: it would be work the agent queued for
    itself), ``.git/config``, ``.git/hooks/``,
    ``.git/info/`` (attributes there can hide lines from a diff) and ``extra`` files or
    folders (prompt templates, agent scripts kept in the checkout). Other files in a packet
    folder (an editor's swap file, notes) are not watched: andon never reads them. Anything
    that does not exist contributes nothing."""
    files = [config_file]
    dirs = [repo.git_dir / "hooks", repo.git_dir / "info"]
    for packet_md in sorted(packets_dir.glob("*/packet.md")):
        files.append(packet_md)
        dirs += [packet_md.parent / "plant", packet_md.parent / "hidden"]
    files += sorted(packets_dir.glob("*.md"))  # flat packets: <packets_dir>/<name>.md
    for p in extra:
        (dirs if p.is_dir() else files).append(p)
    out: dict[str, str] = {".git/config": _git_config_marker(repo.git_dir / "config")}
    for f in files:
        marker = file_marker(f)
        if marker is not None:
            out[_rel(repo, f)] = marker
    for d in dirs:
        if d.is_dir() and not d.is_symlink():
            out.update({_rel(repo, d / rel): marker for rel, marker in manifest(d).items()
                        if not is_cache(rel)})
    return out


def _git_config_marker(path: Path) -> str:
    """The repository's git config without the ``branch.*`` and ``remote.*`` entries a person
    changes in passing (setting an upstream, adding a remote) and andon never uses; the
    rest (hooksPath, filters, fsmonitor, includes, diff drivers…) can change what andon's
    own git commands do. Raw bytes if git cannot read it."""
    proc = subprocess.run(["git", "config", "--file", str(path), "--list", "-z"],
                          capture_output=True)
    if proc.returncode != 0:
        return file_marker(path) or ""
    kept = [e for e in proc.stdout.split(b"\0")
            if e and not e.startswith((b"branch.", b"remote."))]
    return hashlib.sha256(b"\0".join(kept)).hexdigest()


def new_packets(changed: list[tuple[str, str]], before: dict[str, str],
                packets_rel: str) -> set[str]:
    """The changed paths that belong to a packet that did not exist in ``before`` (a packet
    file or folder added while the stage ran: possibly a person writing the next packet).
    The run stops on them before its next attempt rather than blaming the agent."""
    def packet_of(path: str) -> str | None:
        if not path.startswith(packets_rel + "/"):
            return None
        first = path[len(packets_rel) + 1:].split("/", 1)[0]
        return first.removesuffix(".md")

    existing = {packet_of(p) for p in before} - {None}
    return {p for p, how in changed if how == "added" and packet_of(p) not in existing
            and packet_of(p) is not None}


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
