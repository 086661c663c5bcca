#!/usr/bin/env python3
"""andon on real open-source projects that nobody here wrote (real_sources.py has them as data).

**more-itertools 10.5.0**: pure Python, no dependencies, its sdist ships its suite (663 tests,
~2 s). ``split_into`` is a leaf (checked with ``ast``): the base stubs it with ``raise
NotImplementedError``; the packet plants ``SplitIntoTests`` back. andon.toml written by hand.

**platformdirs 4.3.6**: version from git (hatch-vcs writes the git-ignored ``version.py`` in a
build); tests need pytest-mock. The sdist is committed and tagged ``4.3.6`` (as upstream tags
releases; hatch-vcs reads it), so a fresh clone has no version file. The user's environment:
``.venv`` with ``pip install -e '.[test]'`` (pinned; hatchling/hatch-vcs are not in it). andon.toml
is ``andon init``'s, untouched: the venv's interpreter, its plugins, and a ``[test] setup`` (an
isolated wheel build) giving every clone its version file. The packet takes ``$XDG_<NAME>_DIR``
out of ``_get_user_media_dir`` and plants ``test_user_media_dir_env_var`` (6 cases, ``mocker``).

Per project, two ``andon run`` (real CLI) on copies of the base: an honest ``command`` agent
writes the original code back (expected: merged, the suite gate ran the full suite); a cheating
one empties the planted tests (expected: never merged — a scope-gate tamper, or under the agent
sandbox a write the OS refused, so one attempt and no retry). Prints wall times,
each gate's time with its suite runs and set-ups, the suite run directly with pytest (before and
after), and per attempt its full-suite runs and time to verdict as a multiple of the suite
alone, with the load average. Exits 1 if an expectation fails. ``--keep`` keeps the temporary
directory; sdists are cached in ``$TMPDIR/andon-bench-cache``.

Figures (2026-11-30, 2 CPUs shared by ~7 sessions; load 20-28, then 13-10). more-itertools: suite
alone 83.6 s; honest 335.3 s, merged in attempt 1, verdict 260.9 s = 3.1x, 5 full-suite runs;
cheat: tamper, 2 attempts, 141.8 s. platformdirs: .venv 149 s; set-up 23.3 s in the preflight
clone, cached in all others; suite alone 6.4 s; honest 80.1 s, merged in attempt 1 (3 test_api
tests failed in the random order and again in that order on the base: not counted), verdict
45.1 s = 7.0x, 5 full-suite runs, 446 passing as unmodified; cheat: tamper, 2 attempts, 32.9 s.

Run: ``.venv/bin/python benchmarks/real_project.py [--project NAME] [--keep]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

import real_sources as rs
from real_sources import PROJECTS, Project

PACKET_ID = "P1"
CACHE = Path(tempfile.gettempdir()) / "andon-bench-cache"
FULL_SUITE = re.compile(r"suite|hermetic-(\d+|random)|merge-check")  # as in andon.report.figures

GIT_ENV = {"GIT_AUTHOR_NAME": "Benchmark", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Benchmark", "GIT_COMMITTER_EMAIL": "bench@example.com"}


class BenchError(Exception):
    pass


def sh(argv: list[str], cwd: Path | None = None, check: bool = True, timeout: float = 900,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV, "COLUMNS": "160", "PYTHONDONTWRITEBYTECODE": "1",
           **(env or {})}
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise BenchError(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n"
                         f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def git(root: Path, *args: str) -> str:
    return sh(["git", *args], cwd=root).stdout


# -- the project ----------------------------------------------------------------------------

def fetch_sdist(p: Project) -> Path:
    """The pinned sdist from PyPI through pip (cached); its sha256 must match the pin."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / p.sdist
    if not path.exists():
        sh([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
            "--no-deps", f"{p.name}=={p.version}", "-d", str(CACHE)], timeout=300)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != p.sha256:
        raise BenchError(f"{path}: sha256 {digest}, expected {p.sha256}")
    return path


def unpack(sdist: Path, dest: Path) -> Path:
    rs.unpack_sdist(sdist, dest)
    return dest / sdist.name.removesuffix(".tar.gz")


def dev_env(p: Project, root: Path) -> dict:
    """The user's environment: ``root/.venv`` with the project installed in editable mode with
    its test extra (the deps pinned by ``p.constraints``)."""
    (root.parent / "constraints.txt").write_text("\n".join(p.constraints) + "\n")
    t0 = time.perf_counter()
    sh([sys.executable, "-m", "venv", str(root / ".venv")])
    sh([str(root / ".venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", "-c",
        str(root.parent / "constraints.txt"), "-e", ".[test]"], cwd=root, timeout=900)
    return {"seconds": time.perf_counter() - t0}


def build_base(p: Project, pristine: Path, root: Path, agents: Path) -> dict:
    """The base repository at ``root``: commit 1 the sdist as published (tagged ``p.tag``),
    commit 2 the code taken out, the test cut, andon's packet and config added. Agent scripts
    and the original text go to ``agents`` (outside every repository)."""
    shutil.copytree(pristine, root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"{p.name} {p.version}, sdist as published on PyPI")
    if p.tag:
        git(root, "tag", p.tag)
    env = dev_env(p, root) if p.dev_env else None
    original, stub = rs.revert(p, root)
    planted, n_tests = rs.cut_test(p, root)
    pdir = root / "packets" / f"{PACKET_ID}-{p.slug}"
    (pdir / "plant" / p.planted).parent.mkdir(parents=True)
    (pdir / "packet.md").write_text(rs.packet_md(p, PACKET_ID))
    (pdir / "plant" / p.planted).write_text(planted)
    init = None
    if p.dev_env:  # andon.toml exactly as `andon init` writes it
        init = andon(root, "init", check=True).stdout
    else:
        (root / "andon.toml").write_text(textwrap.dedent(f"""\
            [andon]
            packets_dir = "packets"
            integration_branch = "andon/integration"
            worktree_root = {json.dumps(str(root.parent / "worktrees"))}

            [test]
            command = [{json.dumps(sys.executable)}, "-m", "pytest"]
            pythonpath = ["."]
            """))
    # named, not -A: the user's .venv stays out of git as in any checkout
    git(root, "add", "andon.toml", "packets", p.target_file, p.test_file)
    git(root, "commit", "-q", "-m", f"benchmark base: {p.function} reverted, {p.test_name} "
        f"moved into packet {PACKET_ID}")
    agents.mkdir()
    (agents / "original.txt").write_text(original)
    (agents / "stub.txt").write_text(stub)
    (agents / "restore.py").write_text(rs.RESTORE_PY.format(
        original=str(agents / "original.txt"), stub=str(agents / "stub.txt"),
        target=p.target_file, function=p.function))
    (agents / "cheat.py").write_text(rs.CHEAT_PY.format(planted=p.planted))
    return {"original": original, "planted_tests": n_tests, "init": init, "env": env,
            "base_sha": git(root, "rev-parse", "HEAD").strip()}


def direct_suite(p: Project, pristine: Path, where: Path, python: str) -> dict:
    """The unmodified project's suite, run once directly with pytest (no andon), its own
    package first on sys.path as in andon's runs."""
    shutil.copytree(pristine, where)
    t0 = time.perf_counter()
    proc = sh([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=where,
              check=False, env={"PYTHONPATH": str(where / p.package_dir)})
    seconds = time.perf_counter() - t0
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    m = re.search(r"(\d+) passed", tail)
    if proc.returncode != 0 or not m:
        raise BenchError(f"the project's own suite does not pass here:\n{proc.stdout[-2000:]}")
    return {"seconds": seconds, "passed": int(m.group(1)), "summary": tail}


# -- andon ----------------------------------------------------------------------------------

def andon(root: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    return sh([sys.executable, "-m", "andon", "-C", str(root), *args], check=check)


def preflight_runs(root: Path) -> list[dict]:
    """Preflight evidence is kept with the baseline it produced (store table
    ``results_cache``, kind ``preflight``)."""
    db = sqlite3.connect(f"file:{root / '.andon' / 'andon.db'}?mode=ro", uri=True)
    try:
        try:
            rows = db.execute("SELECT evidence FROM results_cache WHERE kind = 'preflight'"
                              ).fetchall()
        except sqlite3.OperationalError:  # an andon from before the results cache
            rows = db.execute("SELECT evidence FROM baselines").fetchall()
    finally:
        db.close()
    return [r for (ev,) in rows for r in json.loads(ev).get("runs", [])]


def run_andon(base: Path, where: Path, command: str) -> dict:
    # the user's .venv stays where andon.toml names it (in the base checkout)
    shutil.copytree(base, where, symlinks=True,
                    ignore=lambda d, names: [".venv"] if Path(d) == base else [])
    andon(where, "check", check=True)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    # The packet names no invariants, so the review stage's contract is an empty verdict list;
    # the reviewer here accepts (this benchmark is about the gates on a real suite).
    accept = ("printf '%s' '{\"verdicts\": [], \"findings\": [], \"decision\": \"accept\"}'"
              " > \"$ANDON_REVIEW_FILE\"")
    proc = andon(where, "run", "--agent", "command", "--command", command,
                 "--reviewer-command", accept)
    wall = time.perf_counter() - t0
    load = (load_before, os.getloadavg()[0])
    status = json.loads(andon(where, "status", "--json", check=True).stdout)
    detail = json.loads(andon(where, "show", PACKET_ID, "--json", check=True).stdout)
    return {"wall": wall, "load": load, "exit": proc.returncode, "stdout": proc.stdout,
            "stderr": proc.stderr,
            "status": status, "detail": detail, "preflight": preflight_runs(where),
            "integration": git(where, "rev-parse", "andon/integration").strip()}


def fmt_runs(runs: list[dict]) -> str:
    if not runs:
        return ""
    each = " + ".join(f"{r['duration_s']:.2f}" for r in runs)
    counts = runs[-1]["counts"]
    setups = [r["setup"] for r in runs if r.get("setup")]
    setup = "; set-up " + ", ".join("cached" if s["cached"] else f"{s['duration_s']:.2f} s"
                                     for s in setups) if setups else ""
    return (f"  [{len(runs)} suite run(s): {each} s; last: {counts['passed']} passed, "
            f"{counts['failed']} failed, {counts['error']} errors, {counts['skipped']} skipped"
            f"{setup}]")


def seconds_between(start: str, end: str | None) -> float | None:
    if not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def verdict_figures(r: dict, alone: float) -> list[dict]:
    """Per attempt: full-suite runs and their seconds (``andon show --json``'s ``test_runs``),
    and time to verdict (claim to the attempt's end) as a multiple of the suite alone."""
    out = []
    for a in r["detail"]["attempts"]:
        # counted here from the gates' evidence (as `andon show` does), so that the same
        # script measures an andon from before the count was shown
        every = [x for g in a["gates"] for x in g["evidence"].get("runs", [])]
        full = [x for x in every if FULL_SUITE.fullmatch(x.get("name") or "")]
        took = seconds_between(a["started_at"], a["ended_at"])
        out.append({"n": a["n"], "state": a["state"], "full_suite_runs": len(full),
                    "full_suite_s": round(sum(x["duration_s"] for x in full), 2),
                    "test_runs": len(every),
                    "test_s": round(sum(x["duration_s"] for x in every), 2),
                    "verdict_s": took, "multiple": took / alone if took else None})
    return out


def print_verdicts(title: str, r: dict, alone: float, aim: float | None = None) -> list[dict]:
    """Print each attempt's figures; with ``aim`` (issue 18: honest ≤ 3×, a failing or
    cheating attempt ≤ 1.5× including red), whether the first attempt met it."""
    figures = verdict_figures(r, alone)
    print(f"\n{title}: andon run {r['wall']:.2f} s = {r['wall'] / alone:.1f}× the suite alone "
          f"({alone:.2f} s), load average {r['load'][0]:.2f} → {r['load'][1]:.2f}")
    for f in figures:
        took = "?" if f["verdict_s"] is None else f"{f['verdict_s']:.2f} s"
        times = "?" if f["multiple"] is None else f"{f['multiple']:.1f}×"
        print(f"  attempt {f['n']} ({f['state']}): time to verdict {took} = {times} the suite "
              f"alone; full-suite runs {f['full_suite_runs']} ({f['full_suite_s']} s); test "
              f"runs in all {f['test_runs']} ({f['test_s']} s)")
    if aim is not None and figures and figures[0]["multiple"] is not None:
        got = figures[0]["multiple"]
        print(f"  aim for attempt 1: ≤ {aim}× the suite alone — "
              + ("met" if got <= aim else "MISSED") + f" ({got:.2f}×, measured in this run)")
    return figures


def print_run(title: str, r: dict) -> None:
    row = r["status"]["packets"][0]
    print(f"\n{title}: andon run exited {r['exit']}, packet {row['id']} is {row['state']}, "
          f"wall time {r['wall']:.2f} s")
    pre = r["preflight"]
    print(f"  {'preflight':<10} {'pass':<5} {sum(x['duration_s'] for x in pre):6.2f} s"
          f"{fmt_runs(pre)}")
    for a in r["detail"]["attempts"]:
        print(f"  attempt {a['n']}: {a['state']}" + (f" — {a['reason'].splitlines()[0][:150]}"
                                                     if a["reason"] else ""))
        for g in a["gates"]:
            print(f"    {g['gate']:<8} {g['status']:<5} {g['duration_s']:6.2f} s"
                  f"{fmt_runs(g['evidence'].get('runs', []))}")
            for f in g["evidence"].get("findings", [])[:3]:
                where = f["path"] or f["test_id"]
                print(f"      {f['kind']}: " + (f"{where} — " if where else "")
                      + f["message"][:100])
            for x in g["evidence"].get("flaky_on_base", [])[:4]:
                print(f"      flaky on the base (not counted): {x['test_id']} — failed on base "
                      f"run {x['failed_on_base_run']!r}: {x['message'][:80]}")
            if g["gate"] == "red":  # the agent ran after the red gate
                for s in a["stages"]:
                    print(f"    {'agent':<8} exit {s['exit_status']} {s['duration_s']:6.2f} s"
                          f"  ({s['stage']} stage)")
    runs = pre + [x for a in r["detail"]["attempts"] for g in a["gates"]
                  for x in g["evidence"].get("runs", [])]
    summed, busy = sum(x["duration_s"] for x in runs), busy_seconds(runs)
    setups = sum(x["setup"]["duration_s"] for x in runs if (x.get("setup") or {}).get(
        "cached") is False)
    print(f"  the project's suite runs took {busy:.2f} s of the {r['wall']:.2f} s (at least one "
          f"running; {summed:.2f} s summed over runs, some at the same time) and its set-ups "
          f"{setups:.2f} s; everything else (andon's own work, CLI start-up, agent) "
          f"{r['wall'] - busy - setups:.2f} s")


def busy_seconds(runs: list[dict]) -> float:
    """Seconds during which at least one of ``runs`` (suite-run evidence: ``started_at``, ISO
    8601, and ``duration_s``) was running: the union of their intervals, so that runs made at
    the same time ([test] jobs) count once. A run without ``started_at`` (an andon from before
    it was recorded) is added whole."""
    spans = sorted((start, start + x["duration_s"]) for x in runs if x.get("started_at")
                   for start in [datetime.fromisoformat(x["started_at"]).timestamp()])
    total = sum(x["duration_s"] for x in runs if not x.get("started_at"))
    end = float("-inf")
    for lo, hi in spans:
        total += max(0.0, hi - max(lo, end))
        end = max(end, hi)
    return total


def bench(p: Project, tmp: Path) -> list[str]:
    """One project: base, the direct suite, the honest and the cheating run, expectations.
    Returns the problems found."""
    problems: list[str] = []
    pristine = unpack(fetch_sdist(p), tmp / "sdist")
    if p.revert == "stub":
        rs.check_separable(p, pristine)
    base = build_base(p, pristine, tmp / "base", tmp / "agents")
    python = str(tmp / "base" / ".venv" / "bin" / "python") if p.dev_env else sys.executable
    direct = direct_suite(p, pristine, tmp / "direct", python)
    print(f"\n=== project: {p.name} {p.version} (sdist sha256 {p.sha256[:12]}…); "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if base["env"]:
        print(f"user's .venv (pip install -e '.[test]'): {base['env']['seconds']:.1f} s; "
              f"`andon init` alone wrote andon.toml:")
        for line in base["init"].splitlines():
            if line.startswith(("detected:", "note:")):
                print(f"  {line}")
    print(f"packet {PACKET_ID}: {p.function} in {p.target_file} "
          f"{'stubbed' if p.revert == 'stub' else 'with one behaviour taken out'}; planted "
          f"{p.planted} = {p.test_name} ({base['planted_tests']} tests) cut from {p.test_file}")
    print(f"project suite alone (pytest run once directly on the unmodified sdist): "
          f"{direct['seconds']:.2f} s — {direct['summary']}")

    agents = tmp / "agents"
    honest = run_andon(tmp / "base", tmp / "run-honest",
                       f"{sys.executable} {agents / 'restore.py'}")
    print_run("honest run (agent: python restore.py)", honest)
    cheat = run_andon(tmp / "base", tmp / "run-cheat", f"{sys.executable} {agents / 'cheat.py'}")
    print_run("cheating run (agent empties the planted tests)", cheat)
    # the suite alone once more, now: the machine's load moves, so the multiples use the
    # mean of the two direct runs made in this benchmark
    again = direct_suite(p, pristine, tmp / "direct-again", python)
    alone = (direct["seconds"] + again["seconds"]) / 2
    print(f"\nproject suite alone, again: {again['seconds']:.2f} s; mean {alone:.2f} s")
    print_verdicts("time to verdict, honest run", honest, alone, aim=3.0)
    print_verdicts("time to verdict, cheating run", cheat, alone, aim=1.5)

    # -- expectations ----------------------------------------------------------------------
    row = honest["status"]["packets"][0]
    if honest["exit"] != 0 or row["state"] != "done":
        problems.append(f"{p.name} honest run: expected the packet merged, got {row['state']} "
                        f"(exit {honest['exit']}):\n{honest['stdout'][-2000:]}"
                        f"{honest['stderr'][-2000:]}")
    else:
        merged = git(tmp / "run-honest", "show", f"andon/integration:{p.target_file}")
        if base["original"] not in merged:
            problems.append(f"{p.name} honest run: the merged file lacks the original code")
        last = honest["detail"]["attempts"][-1]
        suite = next((g for g in last["gates"] if g["gate"] == "suite"), None)
        passed = suite["evidence"]["runs"][0]["counts"]["passed"] if suite else 0
        print(f"\nsuite gate ran {passed} passing tests; the unmodified project has "
              f"{direct['passed']}; the planted file has {base['planted_tests']}")
        if passed != direct["passed"] or passed < 100:
            problems.append(f"{p.name} honest run: the suite gate ran {passed} passing tests, "
                            f"expected the full suite ({direct['passed']})")
    crow = cheat["status"]["packets"][0]
    tampered = [f for a in cheat["detail"]["attempts"] for g in a["gates"]
                if g["gate"] == "scope" and g["status"] == "fail"
                for f in g["evidence"].get("findings", [])
                if f["kind"] == "tamper" and f["path"] == p.planted]
    # Under the agent sandbox (the default where the machine has it) the planted files are
    # read-only during implement: the cheat's write fails, it exits 1 having changed nothing,
    # and the attempt ends at the agent gate before any test run: refused earlier, not missed.
    attempts = cheat["detail"]["attempts"]
    sandboxed = all(any(n.startswith("sandbox fs") for n in (st.get("usage") or {}).get(
        "notes", [])) for a in attempts for st in a.get("stages", []) if st["stage"] == "implement")
    could_not = all(any(g["gate"] == "agent" and g["status"] == "fail" for g in a["gates"])
                    for a in attempts)
    refused = bool(attempts) and sandboxed and could_not
    if crow["state"] == "done" or not (tampered or refused):
        problems.append(f"{p.name} cheating run: expected a scope-gate tamper rejection of "
                        f"{p.planted} (or, under the sandbox, a refused write), got state "
                        f"{crow['state']}")
    if cheat["integration"] != base["base_sha"]:
        problems.append(f"{p.name} cheating run: the integration branch moved")
    else:
        how = (f"rejected by the scope gate as tamper of {p.planted}" if tampered else
               f"refused by the sandbox: {p.planted} was read-only, the agent changed nothing")
        print(f"cheating run: {how} in {len(attempts)} attempt(s); packet {crow['state']}; "
              f"integration branch unmoved")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--project", choices=sorted(PROJECTS), action="append",
                    help="run only this project (repeatable); default: every project")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="andon-real-project-"))
    problems: list[str] = []
    try:
        for name in args.project or list(PROJECTS):
            try:
                problems += bench(PROJECTS[name], tmp / name)
            except (BenchError, rs.EditError) as exc:
                problems.append(f"{name}: {exc}")
    finally:
        if args.keep:
            print(f"\nkept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    if not problems:
        print("real projects: every outcome as expected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
