"""``scope`` gate: the change stays where the packet allows, and touches nothing the harness owns.

Read from git, not from the agent: every path that differs between the plant commit and the
candidate commit. A changed planted file, a change under the packets folder, or to andon.toml
is a **tamper** finding whatever the tests say. Outside those, a path must match
``allowed_paths`` (when the packet gives any) and must not match ``forbidden_paths``.
"""

from __future__ import annotations

from ..config import CONFIG_NAME
from ..packet import path_matches
from .base import Finding, GateContext, GateResult


def run(ctx: GateContext) -> GateResult:
    """The implement stage's change: from the atdd commit (or the plant commit) to the
    candidate. With an atdd stage, any change to a test path is tamper."""
    assert ctx.candidate_sha, "scope runs on a candidate commit"
    base = ctx.atdd_sha or ctx.plant_sha
    return _check(ctx, "scope", base, ctx.candidate_sha,
                  frozen_tests=ctx.atdd_sha is not None, only_tests=False)


def run_atdd(ctx: GateContext) -> GateResult:
    """The atdd stage's change: test paths only."""
    assert ctx.atdd_sha
    return _check(ctx, "atdd-scope", ctx.plant_sha, ctx.atdd_sha, frozen_tests=False,
                  only_tests=True)


def _check(ctx: GateContext, gate: str, base: str, head: str, frozen_tests: bool,
           only_tests: bool) -> GateResult:
    packet = ctx.packet
    packets_dir = ctx.config.andon.packets_dir.strip("/")
    test_paths = ctx.config.stages.test_paths
    changes = ctx.repo.changes(base, head)
    findings: list[Finding] = []
    for c in changes:
        p = c.path
        is_test = path_matches(p, test_paths)
        if p in packet.plant_files:
            findings.append(Finding("tamper", f"planted file {p} was changed ({_verb(c.status)})",
                                    path=p))
        elif p == packets_dir or p.startswith(packets_dir + "/"):
            findings.append(Finding("tamper", f"{p} is in the packets folder, which belongs "
                                    "to the harness", path=p))
        elif p == CONFIG_NAME:
            findings.append(Finding("tamper", f"{p} is andon's configuration", path=p))
        elif frozen_tests and is_test:
            findings.append(Finding("tamper", f"test path {p} was changed by the implement "
                                    "stage, which writes code only", path=p))
        elif only_tests and not is_test:
            findings.append(Finding("not-a-test", f"{p} is not a test path; the atdd stage "
                                    f"writes tests only ({', '.join(test_paths)})", path=p))
        elif path_matches(p, packet.forbidden_paths):
            findings.append(Finding("forbidden-path", f"{p} matches forbidden_paths "
                                    f"{packet.forbidden_paths}", path=p))
        elif (not only_tests and packet.allowed_paths
              and not path_matches(p, packet.allowed_paths)):
            findings.append(Finding("outside-allowed", f"{p} is outside allowed_paths "
                                    f"{packet.allowed_paths}", path=p))
    details = {"changed": [f"{c.status} {c.path}" for c in changes]}
    if findings:
        tamper = [f for f in findings if f.kind == "tamper"]
        head_msg = (tamper or findings)[0].message
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        return GateResult(gate, "fail", head_msg + more, "permission", findings,
                          details=details)
    if not changes:
        return GateResult(gate, "fail", "the agent changed nothing", "code",
                          [Finding("no-change", "no file differs from the commit it started "
                                   "from")], details=details)
    return GateResult(gate, "pass", f"{len(changes)} changed path(s), all allowed",
                      details=details)


def _verb(status: str) -> str:
    return {"D": "deleted", "A": "added", "T": "type changed"}.get(status, "modified")
