"""Keys of the one results cache (store table ``results_cache``): never run what cannot
change the verdict.

A key is the SHA-256 of everything that can change a cached outcome: what kind of result it
is, andon's version, the test settings that reach a test process (``[test] command`` as run,
``pythonpath``, ``plugins``, ``network``, ``timeout_s``, the packets folder the harness
ignores), and the parts the caller names (tree shas, file bytes, run counts). Anything else
— the agent, the packet's prose, the time of day — is left out on purpose: it cannot change
what a test run on that tree reports.

- ``baseline_key(config, tree)``: the preflight's passed ids for a tree (also stored after a
  merge, from the hermetic runs of the merged tree).
- ``red_key(ctx, tests, runs)``: red's outcome on the commit it ran on (base tree + planted
  bytes = the plant commit's tree; the atdd commit's tree when there is one), the packet's
  hidden bytes, the test files judged and ``red_runs``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..config import Config

if TYPE_CHECKING:
    from .base import GateContext


def test_settings(config: Config) -> dict[str, Any]:
    """The settings that reach a harness test run, as JSON-able values."""
    t = config.test
    return {"argv": config.test_argv(), "pythonpath": list(t.pythonpath),
            "plugins": list(t.plugins), "network": t.network, "timeout_s": t.timeout_s,
            "packets_dir": config.andon.packets_dir}


def key(kind: str, config: Config, *parts: Any) -> str:
    """64 hex digits naming ``kind``, andon's version, the test settings and ``parts``
    (strings, numbers, lists, or bytes, which are hashed first)."""
    norm = [hashlib.sha256(p).hexdigest() if isinstance(p, bytes) else p for p in parts]
    material = json.dumps([kind, __version__, test_settings(config), norm], sort_keys=True)
    return f"{kind}:" + hashlib.sha256(material.encode()).hexdigest()


def baseline_key(config: Config, tree: str) -> str:
    return key("preflight", config, tree)


def red_key(ctx: GateContext, tests: list[str], runs: int) -> str:
    tip = ctx.atdd_sha or ctx.plant_sha
    tree = ctx.repo.rev_parse(f"{tip}^{{tree}}") or tip
    base = ctx.repo.rev_parse(f"{ctx.base_sha}^{{tree}}") or ctx.base_sha
    hidden = hashlib.sha256()
    for rel, (data, executable) in sorted(ctx.packet.hidden_blobs().items()):
        hidden.update(f"{rel}\0{int(executable)}\0{len(data)}\0".encode() + data)
    return key("red", ctx.config, base, tree, hidden.hexdigest(), sorted(tests), runs)
