"""The ``agent`` gate: an agent stage that could not work is not the packet's fault.

A CLI that stops before doing anything — a flag it refuses (Claude Code's bypass flag as
root), no credentials, the model API unreachable, rate limited or failing, a crash, or no
answer before the timeout — leaves the worktree as it was. Judged by the scope gate, that is
"the agent changed nothing" (layer ``code``), which is retried and then blocks the packet as
"no new evidence", with advice to sharpen the packet: wrong on every count. This gate runs
first and names the failure for what it is: layer ``environment``, the agent's own message
(its result text, else the tail of its stderr) as the reason, and advice naming the setting
to fix (``details["advice"]``, read by :func:`andon.advice.advice`).

The rule, from what the harness saw itself: nothing in the worktree changed, AND the process
exited non-zero or was killed at the timeout, AND its usage holds no output token (``None``
or 0: the model produced nothing). The exit status only names the layer of an attempt that
fails anyway; it never lets anything pass. An agent that does nothing and exits 0 is still
``no-change`` (layer ``code``); one that spent output tokens and changed nothing too.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import plain_file
from ..agents.base import AgentRun, last_line
from .base import Finding, GateResult

NAME = "agent"
MESSAGE_CHARS = 400

# (pattern in the agent's message, advice); the first that matches wins. {a}: adapter name.
_ADVICE = (
    (r"root/sudo|root privileges",
     ("the agent CLI refuses its permission flag when run as root: remove "
     "`--dangerously-skip-permissions` (or `bypassPermissions`) from `[agents.{a}] "
     "permission_args` — andon's default as root is the allowlist `--permission-mode "
     "acceptEdits --allowedTools=Bash` — or, in a disposable container, pass `IS_SANDBOX=1` "
     "through `[agents.{a}] env_passthrough`; or run andon as a user other than root")),
    (r"\b401\b|api[ _-]?key|authenticat|unauthori[sz]ed|/login|not logged in|credential",
     ("the agent has no valid credentials: set its API key variable (`andon doctor` lists "
     "the ones it reads) or log the CLI in; other variables it needs go in `[agents.{a}] "
     "env_passthrough`")),
    (r"\b429\b|rate[ _-]?limit|overloaded|\b529\b|quota",
     ("the model API is rate limiting or over quota: wait, or use another model "
     "(`[agents.{a}] model`), then unblock")),
    ((r"ECONNREFUSED|ENOTFOUND|unreachable|connection (refused|error)|fetch failed|"
     r"network|timed? ?out|ETIMEDOUT"),
     ("the model API could not be reached: check the network and the base URL the agent "
     "uses (pass e.g. ANTHROPIC_BASE_URL through `[agents.{a}] env_passthrough`); "
     "`[agent] network = \"off\"` cuts agents off")),
    (r"\b5\d\d\b|api error|internal server error|high demand|temporary errors",
     "the model API failed: look at the agent's message above, retry later, then unblock"),
)

# The same advice for the ``command`` adapter, chosen only on evidence: a command's output is
# its own script's, where "line 521", "timeout=30", "network.toml" or "timed out" are a
# crash's words, not a model API's. An HTTP status counts after the word that says it is one,
# a network failure by the error's own name; read with the traceback frames left out.
_STATUS = r"(?:HTTP(?: Error)?|status(?: code)?|API Error|Error code)\W{0,3}"
_COMMAND_ADVICE = (
    (r"root/sudo|root privileges", _ADVICE[0][1]),
    (_STATUS + r"401\b|api[ _-]?key|authenticat|unauthori[sz]ed|not logged in|credential",
     _ADVICE[1][1]),
    (_STATUS + r"429\b|too many requests|rate[ _-]?limit|RateLimitError|overloaded|"
     r"insufficient_quota|quota exceeded", _ADVICE[2][1]),
    (r"ECONNREFUSED|ECONNRESET|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|"
     r"connection (refused|reset|error|timed out)|name or service not known|"
     r"temporary failure in name resolution|nodename nor servname|could not resolve host|"
     r"network is unreachable|no route to host|getaddrinfo|fetch failed|"
     r"failed to establish a new connection|max retries exceeded|HTTPS?ConnectionPool|"
     r"URLError|Connect(ion)?Error|ConnectTimeout|APIConnectionError|APITimeoutError",
     _ADVICE[3][1]),
    (_STATUS + r"5\d\d\b|internal server error|bad gateway|service unavailable|"
     r"gateway timeout|InternalServerError|high demand", _ADVICE[4][1]),
)
# a JavaScript stack's frame line: ``    at f (x.js:1:2)``
_JS_FRAME = re.compile(r"^\s+at \S")


def could_not_work(run: AgentRun, stage: str, changed: bool) -> GateResult | None:
    """A failing ``agent`` gate result (layer ``environment``) if the stage's agent could
    not work (see the module docstring), else None.

    Args:
        run: the stage's agent run as recorded (exit status, timeout, claim, usage).
        stage: ``atdd`` or ``implement``.
        changed: whether the snapshot of the worktree differs from where the stage began.
    """
    if run.limit_hit:  # a cap of [agent] ended the stage: whatever it left is not judged
        return GateResult(NAME, "fail", f"the {stage} agent ({run.agent}) was ended at a "
                          f"limit: {run.limit_hit}", "environment",
                          [Finding("resource-limit", run.limit_hit)],
                          details={"advice": "the stage hit a cap of [agent] in andon.toml "
                                   "(memory_mb, max_processes): raise it if the work needs "
                                   "more, else the agent ran away (a fork bomb, a leak)",
                                   "limit": run.limit_hit})
    if changed or not (run.timed_out or run.exit_status not in (0, None)
                       or run.provider_error):
        return None
    out = run.usage.output_tokens if run.usage is not None else None
    if out:
        return None
    message = agent_message(run)
    a = run.agent
    how = ("was killed at the timeout" if run.timed_out else
           f"exited {run.exit_status}" + (" but its model API failed" if run.provider_error
                                           else ""))
    if a == "command":
        advice = _command_advice(run)
        summary = (f"the {stage} agent ({a}) could not work: it {how} without changing a file "
                   f"— " + (f"its output ends: {message}" if message else "it printed nothing"))
    else:
        summary = (f"the {stage} agent ({a}) could not work: it {how} without changing a file "
                   f"or producing output — " + (message or "it printed no message"))
        hint = next((h for p, h in _ADVICE if re.search(p, message, re.IGNORECASE)), None)
        if hint is None and run.timed_out:
            hint = ("the agent produced nothing before `[agents.{a}] timeout_s` (or `[agent] "
                    "timeout_s`): is its model API answering? raise the timeout if it is slow")
        advice = (hint or "").format(a=a) or (
            f"fix the agent's set-up: `[agents.{a}]` in andon.toml (permission_args, "
            "env_passthrough, extra_args) and its credentials")
    advice += " — not the packet; `andon doctor` checks the agent CLIs (see docs/agents/)"
    return GateResult(NAME, "fail", summary, "environment",
                      [Finding("agent-could-not-work", message or how)],
                      details={"advice": advice, "exit_status": run.exit_status,
                               "timed_out": run.timed_out,
                               "provider_error": run.provider_error})


def _command_advice(run: AgentRun) -> str:
    """The advice for a ``command`` agent that could not work: the model API's words (as
    for the CLIs) only where its output shows a network or API failure (``_COMMAND_ADVICE``,
    traceback frames left out), else what was seen — the exit status, or the timeout, and
    the last line it printed."""
    said = _without_frames(_said(run))
    hint = next((h for p, h in _COMMAND_ADVICE if re.search(p, said, re.IGNORECASE)), None)
    if hint is not None:
        return hint.format(a=run.agent)
    tail = last_line(said, 200)
    ending = f"its output ending: {tail}" if tail else "having printed nothing"
    if run.timed_out:
        return (f"the agent's command was killed at `[agent] timeout_s`, {ending}: raise the "
                "timeout if the work is slow, else fix what it waits on (`--command`, or "
                "`[agent] command` in andon.toml)")
    return ("fix the agent's command: `--command` (or `[agent] command` in andon.toml) and "
            f"what it runs: it exited {run.exit_status}, {ending} (nothing in it points to "
            "the network or a model API)")


def _without_frames(text: str) -> str:
    """``text`` without the frames of its stack traces: in a Python traceback every indented
    line (``  File "x.py", line 521, in f``, the source line, its carets) up to the
    exception's own line; in a JavaScript stack the ``    at …`` lines."""
    kept, in_traceback = [], False
    for ln in text.splitlines():
        if ln.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        if in_traceback and ln[:1].isspace():
            continue
        in_traceback = False
        if not _JS_FRAME.match(ln):
            kept.append(ln)
    return "\n".join(kept)


def agent_message(run: AgentRun) -> str:
    """What the agent said about why it stopped: its claim (the CLI's result text, or the
    tail of its stderr when it printed no result), else the tail of ``<stage>.stderr.log``
    next to the transcript; the last ``MESSAGE_CHARS`` characters, whitespace folded."""
    text = " ".join(_said(run).split())
    return text[-MESSAGE_CHARS:]


def _said(run: AgentRun) -> str:
    """The agent's claim, else its ``<stage>.stderr.log``, lines kept; '' for neither."""
    text = (run.claim or "").strip()
    if not text:
        stderr = Path(str(run.transcript_path).replace(".transcript.log", ".stderr.log"))
        try:  # in the evidence, the agent's to write: a link or a FIFO is not read
            text = plain_file.tail(stderr, 64 * 1024).strip()
        except OSError:
            text = ""
    return text
