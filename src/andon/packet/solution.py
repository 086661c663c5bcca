"""A packet's reference solution (``solution/`` beside ``plant/``, mirroring the repository
root): the known-good change ``andon validate`` runs as the agent. Here: what ``andon check``
can tell from its paths alone — a solution file the ``scope`` gate would reject can never
pass, so the packet's specification (or the solution) is wrong."""

from __future__ import annotations

from andon.config import CONFIG_NAME
from andon.errors import Problem

from .model import Packet, path_matches


def solution_problems(packet: Packet, packets_dir: str) -> list[Problem]:
    """Every reference-solution file of ``packet`` whose path the scope gate would reject,
    ``packets_dir`` being the packets folder relative to the repository root (andon.toml's
    ``[andon] packets_dir``): a planted or hidden file of the packet, a path in the packets
    folder or andon.toml (tamper), a path outside ``allowed_paths`` or inside
    ``forbidden_paths``. Problems about the folder itself (symlinks, empty) come from parsing.
    Scope rules that need the repository (runner configuration, shadowing modules) are
    judged by ``andon validate``'s real gate. Returns [] when there is nothing to say."""
    if packet.dir is None:
        return []
    owned = packets_dir.strip("/")
    problems = []
    for rel, file in packet.solution_files.items():
        name = f"solution/{rel}"
        if rel in packet.plant_files or rel in packet.hidden_files:
            tree = "plant" if rel in packet.plant_files else "hidden"
            problems.append(Problem(file, None, f"{name} replaces {tree}/{rel}, a file the "
                                    "harness plants: the scope gate rejects any change to it as "
                                    "tamper; remove it from solution/"))
        elif rel == owned or rel.startswith(owned + "/"):
            problems.append(Problem(file, None, f"{name} is in the packets folder ({owned}/), "
                                    "which belongs to the harness: the scope gate rejects it as "
                                    "tamper"))
        elif rel == CONFIG_NAME:
            problems.append(Problem(file, None, f"{name} is andon's configuration: the scope "
                                    "gate rejects any change to it as tamper"))
        elif packet.allowed_paths and not path_matches(rel, packet.allowed_paths):
            problems.append(Problem(packet.source, packet.line_of("allowed_paths"),
                                    f"{name} is outside allowed_paths "
                                    f"({', '.join(packet.allowed_paths)}): the scope gate "
                                    "would reject the reference solution; widen allowed_paths "
                                    "or change the solution"))
        elif path_matches(rel, packet.forbidden_paths):
            problems.append(Problem(packet.source, packet.line_of("forbidden_paths"),
                                    f"{name} matches forbidden_paths "
                                    f"({', '.join(packet.forbidden_paths)}): the scope gate "
                                    "would reject the reference solution"))
    return problems
