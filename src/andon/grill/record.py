"""What the interview leaves behind: ``decisions/NNN-<slug>.md`` and the glossary additions,
as one commit on a branch of their own (``andon/grill/<slug>``), made with plumbing
(:meth:`andon.git.repo.Repo.plant`: a temporary index), so the user's checkout, index and
current branch are never touched and nothing is applied to the code.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from ..errors import UsageError
from ..git.repo import Repo, commit_message
from .log import InterviewLog
from .protocol import Written

BRANCH_PREFIX = "refs/heads/andon/grill/"
NUMBERED = re.compile(r"^(\d{3,})-")
TRAILER = "Andon-Grill-Log"


def branch_of(slug: str) -> str:
    return BRANCH_PREFIX + slug


def next_number(repo: Repo, base: str, decisions_dir: str) -> int:
    """1 + the highest NNN of ``<decisions_dir>/NNN-*.md`` in ``base`` and on every other
    interview's branch (two interviews under way do not both take the same number)."""
    revs = [base, *repo.git("for-each-ref", "--format=%(objectname)",
                            BRANCH_PREFIX.rstrip("/")).split()]
    high = 0
    for rev in revs:
        names = repo.git("ls-tree", "--name-only", f"{rev}:{decisions_dir}", check=False)
        for name in names.splitlines():
            if (m := NUMBERED.match(name)) and name.endswith(".md"):
                high = max(high, int(m.group(1)))
    return high + 1


def render_decisions(log: InterviewLog, written: Written, number: int, title: str) -> str:
    """The decisions file (Markdown): each decision with its reasoning and the alternatives
    refused, then the interview itself — every question, the recommendation, and the answer
    (a person's correction marked as such), so what was said is kept whatever the agent
    wrote."""
    lines = [f"# {number:03d} — {title}", "",
             f"Decisions from the interview about `{log.feature}` (`andon grill`, "
             f"{log.started_at[:10]}).", ""]
    for i, d in enumerate(written.decisions, 1):
        lines += [f"## {i}. {d.title}", "", f"**Decision.** {d.decision}", "",
                  f"**Reasoning.** {d.reasoning}", ""]
        if d.alternatives_refused:
            lines.append("**Alternatives refused.**")
            lines += [f"- {r.option} — {r.why_not}" for r in d.alternatives_refused]
            lines.append("")
        lines += [f"Topics: {', '.join(f'`{t}`' for t in d.topics)}", ""]
    lines += ["## The interview", ""]
    for n, a in enumerate(log.answers, 1):
        q = a.question
        how = "correction by the person" if a.corrected else "recommendation accepted"
        lines += [f"{n}. **{q.question}** ({a.phase}, {q.door} door, topic `{q.topic}`)",
                  f"   - recommended: {q.recommended} — {q.why}",
                  f"   - answer ({how}): {a.answer}"]
    return "\n".join(lines).rstrip() + "\n"


def glossary_with(existing: str | None, written: Written, source: str) -> str | None:
    """The glossary file's new text: ``existing`` (None: no file yet) with a table of the
    new terms appended under a heading naming ``source``; None when there is nothing to add."""
    if not written.glossary:
        return None
    rows = ["| term | meaning |", "| --- | --- |"]
    rows += [f"| {_cell(t.term)} | {_cell(t.meaning)} |" for t in written.glossary]
    if existing is None:
        return "\n".join(["# Glossary", "", *rows]) + "\n"
    head = existing if existing.endswith("\n") or not existing else existing + "\n"
    return head + "\n".join(["", f"## From {source}", "", *rows]) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def glossary_terms(text: str | None) -> tuple[str, ...]:
    """The terms a Markdown glossary defines: the first cell of each table row, and
    ``**term**``/`` `term` `` at the start of a list item or a definition line."""
    if not text:
        return ()
    terms = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|") and not set(s) <= set("|-: "):
            cell = s.strip("|").split("|")[0].strip().strip("`*")
            if cell and cell.lower() not in ("term", "word", "name"):
                terms.append(cell)
        elif m := re.match(r"^(?:[-*]\s+)?(?:\*\*|`)([^*`]+)(?:\*\*|`)", s):
            terms.append(m.group(1).strip())
    return tuple(dict.fromkeys(terms))


def commit_decisions(repo: Repo, log: InterviewLog, files: dict[str, str],
                     subject: str) -> tuple[str, str]:
    """Commit ``files`` (repository-relative path → text) as one child of HEAD on
    ``andon/grill/<slug>`` and return (branch, commit). A branch already there that holds
    this interview's commit (a crash after the ref moved, before the log said so) is taken
    as it is.

    Raises:
        UsageError: the branch exists from another interview (say which, and what to do).
    """
    ref = branch_of(log.slug)
    tip = repo.rev_parse(ref)
    if tip is not None:
        ours = repo.find_commit_with_trailers(ref, {TRAILER: log.id})
        if ours == tip:
            return ref.removeprefix("refs/heads/"), tip
        raise UsageError(f"branch {ref.removeprefix('refs/heads/')} exists and is not this "
                         f"interview's: delete it (git branch -D "
                         f"{ref.removeprefix('refs/heads/')}) or choose another --slug")
    for rel in files:
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts:
            raise UsageError(f"[grill] paths must be inside the repository, got {rel!r}")
    message = commit_message(subject, f"From the interview about {log.feature}.",
                             {TRAILER: log.id})
    sha = repo.plant("HEAD", {k: (v.encode(), False) for k, v in files.items()}, message)
    repo.set_ref(ref, sha, "0" * 40)
    return ref.removeprefix("refs/heads/"), sha
