"""Keys of the one results cache (store table ``results_cache``): never run what cannot
change the verdict.

A key is the SHA-256 of everything that can change a cached outcome: what kind of result it
is, andon's version, the test settings that reach a test process (``[test] command`` as run,
``pythonpath``, ``plugins``, ``network``, ``timeout_s``, the set-up run in every clone
before its tests, the packets folder the harness ignores), the locale passed to them, the
tests' interpreter's environment (:func:`andon.contain.envprint.digest` of its
fingerprint: a package installed, upgraded or edited there changes what the same tree's
tests report), and the parts the caller names (tree shas, file bytes, run counts). Anything
else — the agent, the packet's prose, the time of day — is left out on purpose: it cannot
change what a test run on that tree reports.

- ``baseline_key(config, tree, env)``: the preflight's passed ids for a tree (also stored
  after a merge, from the hermetic runs of the merged tree); ``run_baseline_key(config,
  tree, scope)`` the same for one run when the environment has no digest.
- ``red_key(ctx, tests, runs)``: red's outcome on the commit it ran on (base tree + planted
  bytes = the plant commit's tree; the atdd commit's tree when there is one), the packet's
  hidden bytes, the test files judged and ``red_runs``, in the environment
  ``ctx.env_digest`` names.
"""

from __future__ import annotations

import hashlib
import json
import os
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
            "setup": list(t.setup), "setup_inputs": list(t.setup_inputs),
            "setup_timeout_s": t.setup_timeout_s, "packets_dir": config.andon.packets_dir}


# Of the person's variables every test process gets (runners/pytest.py PASSED_ENV), those that
# change what a test reports: the locale (formatting, sorting, decoding). The session's others
# (OLDPWD, SHLVL, …) change with every shell and would only empty the cache.
LOCALE_ENV = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE")


def key(kind: str, config: Config, *parts: Any) -> str:
    """64 hex digits naming ``kind``, andon's version, the test settings, the locale this
    process passes to test processes (``LOCALE_ENV``) and ``parts`` (strings, numbers,
    lists, or bytes, which are hashed first)."""
    norm = [hashlib.sha256(p).hexdigest() if isinstance(p, bytes) else p for p in parts]
    locale = {k: os.environ.get(k) for k in LOCALE_ENV}
    material = json.dumps([kind, __version__, test_settings(config), locale, norm],
                          sort_keys=True)
    return f"{kind}:" + hashlib.sha256(material.encode()).hexdigest()


def baseline_key(config: Config, tree: str, env: str) -> str:
    """The preflight baseline's key: ``tree`` (a tree sha) tested in the environment whose
    fingerprint digest is ``env``."""
    return key("preflight", config, tree, env)


def run_scope_prefix(scope: str = "") -> str:
    """What every key of :func:`run_baseline_key` for the run ``scope`` starts with (no
    scope: the keys of every run)."""
    return f"preflight-run:{scope}:" if scope else "preflight-run:"


def run_baseline_key(config: Config, tree: str, scope: str) -> str:
    """The preflight baseline's key for ``tree`` when the environment has no digest (a
    wrapper test command): good for one run only, ``scope`` (a random token the run's
    worker processes share), and dropped with the rest of that run's when it ends."""
    return key(run_scope_prefix(scope)[:-1], config, tree)


def red_key(ctx: GateContext, tests: list[str], runs: int) -> str | None:
    """Red's key; None when ``ctx.env_digest`` is unknown (then red is neither read from
    nor written to the cache)."""
    if ctx.env_digest is None:
        return None
    tip = ctx.atdd_sha or ctx.plant_sha
    tree = ctx.repo.rev_parse(f"{tip}^{{tree}}") or tip
    base = ctx.repo.rev_parse(f"{ctx.base_sha}^{{tree}}") or ctx.base_sha
    hidden = hashlib.sha256()
    for rel, (data, executable) in sorted(ctx.packet.hidden_blobs().items()):
        hidden.update(f"{rel}\0{int(executable)}\0{len(data)}\0".encode() + data)
    # the packets folder: what the clash check (gates/clash.py), which a cached pass skips,
    # leaves out of the suite
    return key("red", ctx.config, base, tree, hidden.hexdigest(), sorted(tests), runs,
               ctx.env_digest, ctx.config.andon.packets_dir)
