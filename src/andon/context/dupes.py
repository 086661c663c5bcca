"""Repeated content: identical segments, and near-identical ones (MinHash, ``datasketch``).

Only segments of at least ``MIN_TOKENS`` tokens are compared (short ones — "ok", a closing
brace — repeat by nature). A group's redundant tokens are every copy after the first; the
share is redundant tokens over all tokens of the transcript.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

MIN_TOKENS = 32
NEAR_MIN_TOKENS = 64
NEAR_THRESHOLD = 0.8
_PERMUTATIONS = 64
_WORD = re.compile(r"\w+")


@dataclass(slots=True)
class Seg:
    """A segment where it lies: thread, message index, source, component, tokens, text."""

    thread: str
    message: int
    source: str
    component: str
    tokens: int
    text: str
    label: str | None = None


@dataclass(slots=True)
class Group:
    kind: str  # "exact" or "near"
    members: list[Seg] = field(default_factory=list)

    def as_dict(self, total: int) -> dict[str, Any]:
        redundant = sum(s.tokens for s in self.members[1:])
        return {"kind": self.kind, "copies": len(self.members), "tokens": self.members[0].tokens,
                "redundant_tokens": redundant,
                "share": round(redundant / total, 4) if total else 0.0,
                "component": self.members[0].component,
                "excerpt": self.members[0].text[:160],
                "locations": [f"{s.thread} {s.source}" for s in self.members]}


def find(segs: list[Seg], near: bool = True) -> list[Group]:
    """Groups of repeated segments, largest redundancy first."""
    by_hash: dict[bytes, list[Seg]] = {}
    for s in segs:
        if s.tokens >= MIN_TOKENS:
            key = hashlib.blake2b(s.text.strip().encode(), digest_size=16).digest()
            by_hash.setdefault(key, []).append(s)
    groups = [Group("exact", m) for m in by_hash.values() if len(m) > 1]
    if near:
        reps = [m[0] for m in by_hash.values() if m[0].tokens >= NEAR_MIN_TOKENS]
        groups += _near(reps)
    groups.sort(key=lambda g: -sum(s.tokens for s in g.members[1:]))
    return groups


def _shingles(text: str) -> set[bytes]:
    words = _WORD.findall(text.lower())
    return {" ".join(words[i:i + 5]).encode() for i in range(max(1, len(words) - 4))}


def _near(reps: list[Seg]) -> list[Group]:
    """Distinct segments (one per exact group) whose 5-word shingles are ≥ 80 % alike."""
    if len(reps) < 2:
        return []
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=NEAR_THRESHOLD, num_perm=_PERMUTATIONS)
    hashes = []
    # crc32 (C) instead of datasketch's default sha1 per shingle: the same 32-bit hash width,
    # several times faster, deterministic across runs; the permutations are drawn once
    first = MinHash(num_perm=_PERMUTATIONS, seed=1, hashfunc=zlib.crc32)
    for i, s in enumerate(reps):
        mh = MinHash(num_perm=_PERMUTATIONS, seed=1, hashfunc=zlib.crc32,
                     permutations=first.permutations, scheme=first.scheme)
        mh.update_batch(list(_shingles(s.text)))
        hashes.append(mh)
        lsh.insert(str(i), mh)
    parent = list(range(len(reps)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, mh in enumerate(hashes):
        for j in lsh.query(mh):
            a, b = root(i), root(int(j))
            if a != b:
                parent[max(a, b)] = min(a, b)
    clusters: dict[int, list[Seg]] = {}
    for i, s in enumerate(reps):
        clusters.setdefault(root(i), []).append(s)
    return [Group("near", m) for m in clusters.values() if len(m) > 1]
