"""What andon tells a person when the line stops or the branches drift apart: read from the
store and the repository, never used to decide anything."""

from __future__ import annotations

from collections.abc import Collection

from .config import Config
from .git.refs import base_commit
from .git.repo import Repo
from .store import StoreProtocol


def halting_packet(packets: list[dict], ids: Collection[str]) -> dict | None:
    """The blocked packet that stops the line, of the store's ``packets`` rows still among
    the packet files ``ids`` (a blocked packet whose folder was deleted no longer can): the
    one blocked first (``updated_at``, then id). `andon run` names it when it halts and
    `andon status` as ``halted_by``: with workers, two packets can be blocked by the time
    the line stops, and store order named another than the run did."""
    blocked = [p for p in packets if p["state"] == "blocked" and p["id"] in ids]
    return min(blocked, key=lambda p: (p["updated_at"] or "", p["id"]), default=None)


def halt_message(store: StoreProtocol, row: dict, only: list[str] | None = None) -> str:
    """The message of a halted line: which packet, why, where the evidence is, what to do;
    first, when the run was narrowed to ``only`` (``--only``) other packets, that those did
    not start."""
    attempts = store.attempts(row["id"])
    last = attempts[-1] if attempts else None
    why = last["reason"] if last else "blocked"
    where = last["evidence_dir"] if last else ""
    pid = row["id"]
    asked = ""
    if only and pid not in only:
        done = [o for o in only if (store.packet(o) or {}).get("state") == "done"]
        asked = (f"--only {', '.join(only)}: already done (merged): nothing to start\n"
                 if len(done) == len(only) else
                 f"--only {', '.join(only)}: not started: a blocked packet halts the whole "
                 "line (unblock it first)\n")
    return (f"{asked}line halted: packet {pid} is blocked: {why}\n"
            f"evidence: {where}\n"
            f"what to do: {advice(store, last)}; see `andon show {pid}`, then "
            f"`andon unblock {pid}`")


def advice(store: StoreProtocol, last: dict | None) -> str:
    """What a person should change, from what the blocking attempt ran into: a change to
    the tests' interpreter environment (with the commands that restore it), a write into
    the checkout, a command not found, a change the packet does not allow (a tamper: not the
    packet's fault), else its failure layer."""
    if last is None:
        return "look at the packet"
    gates = store.gate_results(last["id"])
    envs = [g for g in gates if "restore" in g["evidence"]]  # contain/envprint.py
    if envs:
        restore = list(dict.fromkeys(c for g in envs for c in g["evidence"]["restore"]))
        return ("the Python environment the tests run with was changed outside the worktree "
                "(listed above; if you did not make this change, an agent did). andon "
                "removed nothing: look, then restore it"
                + (" with\n    " + "\n    ".join(restore) if restore else
                   " (no installed distribution owns what changed: reinstall by hand)"))
    if any(f["kind"] == "outside-worktree" for g in gates
           for f in g["evidence"].get("findings", [])):
        return ("the agent wrote into your checkout (listed above): look at `git status` "
                "and `git diff` there and undo what it changed; run agents in a container "
                "or VM to stop this")
    stuck = [g for g in gates if g["gate"] == "agent" and g["evidence"].get("advice")]
    if stuck:  # gates/agent.py: the agent could not work; its set-up, not the packet
        return stuck[-1]["evidence"]["advice"]
    missing = [r for r in store.stage_runs(last["id"]) if r["exit_status"] == 127]
    if missing:
        return _not_found(missing[-1])
    if last["failure_layer"] == "permission":  # scope: the packet was not what failed
        kinds = {f["kind"] for g in gates for f in g["evidence"].get("findings", [])}
        if "tamper" in kinds:
            return ("the agent changed a planted test or andon's files (a tamper finding, "
                    "listed above): the packet is not the cause; use another agent")
        if "forged-report" in kinds:
            return ("the test report of the agent's code was forged (forged-report, listed "
                    "above: what changed in the runner, or canaries with the wrong outcome): "
                    "the packet is not the cause; use another agent. If the project's own code "
                    "does this, preflight stops on the base with channel-on-base instead")
        return ("the agent changed paths the packet does not allow (listed above): if that "
                "change was needed, widen the packet's allowed_paths or forbidden_paths; "
                "else use another agent")
    return {
        "specification": "the packet itself is wrong (its planted tests or its spec): "
                         "edit it",
        "verifier": "the reviewer did not return a valid review: fix the reviewer "
                    "(--reviewer / --reviewer-command), not the packet",
        "environment": "the project's suite or environment failed: fix that",
        "harness": "a budget or limit was reached, or andon itself failed (a harness-error "
                   "finding, with its traceback): raise the limit, split the packet, or "
                   "report the error",
    }.get(last["failure_layer"] or "", "the agent keeps failing the same way or ran out "
          "of attempts: sharpen the packet, or use another agent")


def _not_found(run: dict) -> str:
    """Exit 127 is the shell's "command not found", for the stage's command or for any tool
    its script runs: the stage's last line says which; where stages run says why."""
    from .agents.base import last_line  # here: `andon status` loads no agents, no sandbox

    said = f": {last}" if (last := last_line(run["claim"])) else ""
    notes = (run["usage"] or {}).get("notes") or []
    boxed = any(n.startswith("sandbox fs") for n in notes)  # sandbox/plan.py Plan.describe
    return (f"the {run['stage']} stage exited 127 (a command it runs was not found){said}. "
            "Stages run in the attempt's worktree, where your checkout's untracked scripts "
            "do not exist (give them by absolute path)" + (
                ", inside the agent sandbox, which shows only the worktree, the folders on "
                "PATH and the tools andon binds (docs/sandbox.md, \"Tools\"): bind what is "
                "missing with [agent] sandbox_paths" if boxed else ""))


def base_drift(repo: Repo, config: Config) -> dict | None:
    """Commits on the base branch that the integration branch lacks, not counting those that
    touch only the packets folder: ``{"base_branch",
    "integration_branch", "commits"}``, or None when there are none, the integration branch
    does not exist yet, or no base branch can be named (detached HEAD and no
    ``[andon] base_branch``). andon never merges the base into the integration branch itself:
    that is the user's decision, so it is only reported."""
    return _gap(repo, config, base_side=True)


def _gap(repo: Repo, config: Config, base_side: bool) -> dict | None:
    """Commits one branch has that the other lacks: the base's over the integration
    branch's (``base_side``), or the other way round; None as ``base_drift`` says."""
    integration = config.andon.integration_branch
    base, base_sha = base_commit(repo, config.andon.base_branch)
    if base in ("HEAD", integration):
        return None
    integration_sha = repo.rev_parse(f"refs/heads/{integration}")
    if not base_sha or not integration_sha:
        return None
    has, lacks = (base_sha, integration_sha) if base_side else (integration_sha, base_sha)
    # packets are read from the checkout, never from the integration branch: a commit that
    # only adds or edits packets leaves nothing to merge
    only = ["--", ".", f":(exclude){config.andon.packets_dir}"] if base_side else []
    n = int(repo.git("rev-list", "--count", has, "^" + lacks, *only).strip())
    return {"base_branch": base, "integration_branch": integration, "commits": n} if n else None


def drift_notice(drift: dict) -> str:
    """One line for people: what moved and what to do about it."""
    b, i, n = drift["base_branch"], drift["integration_branch"], drift["commits"]
    return (f"note: {b} has {n} commit{'s' if n != 1 else ''} that {i} does not; andon merges "
            f"packets onto {i} only and never pulls {b} in — to build on them, run `git merge "
            f"{b}` with {i} checked out (or delete {i} to start it again from {b})")


def merged_ahead(repo: Repo, config: Config) -> dict | None:
    """Commits andon merged onto the integration branch that the base branch lacks:
    ``{"base_branch", "integration_branch", "commits"}``, or None when there are none or a
    branch cannot be named. The work stays there until the user takes it: andon never moves
    the base branch."""
    return _gap(repo, config, base_side=False)


def ahead_notice(ahead: dict) -> str:
    """One line for people: where the merged work is and how to take it."""
    b, i, n = ahead["base_branch"], ahead["integration_branch"], ahead["commits"]
    return (f"the merged work is on {i}, {n} commit{'s' if n != 1 else ''} ahead of {b} "
            f"(andon never moves {b}): read it with `git log -p {b}..{i}`, take it with "
            f"`git merge {i}` with {b} checked out")
