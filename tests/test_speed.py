"""Time to verdict (issue 18): cached red results, concurrent independent runs, the count
and time of full-suite runs per attempt, and the budget on them.

Real git repositories, real pytest subprocesses, the real Runner with scripted agents. Test
runs are counted by the tests themselves: a planted module appends a line to a counter file
(an absolute path outside every clone) each time a pytest process imports it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import (
    MUL_TEST,
    config_toml,
    honest_mul,
    make_project,
    packet_md,
    runner_for,
    write,
)


def counting_mul_test(counter: Path) -> str:
    """MUL_TEST that appends one line to ``counter`` whenever a test process imports it."""
    return (f"with open({str(counter)!r}, 'a') as _f:\n    _f.write('x\\n')\n\n\n"
            + MUL_TEST)


def count(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def wrong_mul(ctx) -> str:
    write(ctx, "src/calc/ops.py", "\n\ndef mul(a, b):\n    return a + b\n", append=True)
    return "done"


def test_a_retry_on_the_same_base_repeats_no_red_run(tmp_path):
    """Attempt 1 (wrong mul) runs red twice and fails in the suite; attempt 2 on the same
    base records red as cached and starts no pytest before its agent: the planted module was
    imported exactly as often when attempt 2's agent started as when attempt 1 ended."""
    counter = tmp_path / "imports.txt"
    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py":
                                                        counting_mul_test(counter)})},
                        config=config_toml(red_runs=2, hermetic_runs=1,
                                           hermetic_random_order=False))
    seen = []

    def agent(ctx):
        seen.append(count(counter))
        return (wrong_mul if ctx.attempt == 1 else honest_mul)(ctx)

    runner = runner_for(root, agent)
    report = runner.run()
    assert report.merged == ["P1"], report.message
    a1, a2 = runner.store.attempts("P1")
    red1 = next(g for g in runner.store.gate_results(a1["id"]) if g["gate"] == "red")
    red2 = next(g for g in runner.store.gate_results(a2["id"]) if g["gate"] == "red")
    assert [r["name"] for r in red1["evidence"]["runs"]] == ["red-1", "red-2"]
    assert red2["status"] == "pass" and "cached" in red2["summary"]
    assert red2["evidence"]["runs"] == [] and red2["evidence"]["cached"] is True
    assert red2["evidence"]["red_ids"] == red1["evidence"]["red_ids"]
    # attempt 1: 2 red runs before its agent; then its suite run (1): attempt 2's agent
    # starts with no run in between
    assert seen == [2, 3]


def test_cache_keys_name_what_can_change_a_test_outcome_and_nothing_else(tmp_path):
    """The red key changes with the tree red runs on (planted bytes), the hidden bytes, the
    test command, the number of runs and andon's version; not with agent settings."""
    from andon import gates
    from andon.config import load_config
    from andon.gates.base import GateContext
    from andon.gates.cache import baseline_key, red_key
    from andon.packet import load_packets
    from andon.workspace import Repo

    md = packet_md("P1", "multiply", "calc.ops.mul multiplies.", allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": (md, {"tests/test_mul_p1.py": MUL_TEST})})
    repo, config = Repo(root), load_config(root)
    base = repo.rev_parse("HEAD")

    def red_of(plant_text=MUL_TEST, hidden=None, cfg=config, runs=3):
        (root / "packets/P1/plant/tests/test_mul_p1.py").write_text(plant_text)
        h = root / "packets/P1/hidden/tests/test_mul_hidden.py"
        if hidden is None:
            shutil.rmtree(root / "packets/P1/hidden", ignore_errors=True)
        else:
            h.parent.mkdir(parents=True, exist_ok=True)
            h.write_text(hidden)
        packet = load_packets(root / "packets", root)[0]
        plant = repo.plant(base, packet.plant_blobs(), "plant")
        ctx = GateContext(repo, cfg, packet, root, tmp_path / "ev", base, plant)
        return red_key(ctx, ["tests/test_mul_p1.py"], runs)

    first = red_of()
    assert red_of() == first  # the same inputs, the same key (planting is deterministic)
    assert red_of(MUL_TEST + "\n# changed\n") != first
    assert red_of(hidden="def test_h():\n    pass\n") != first
    assert red_of(runs=2) != first
    other_cmd = config.model_copy(deep=True)
    other_cmd.test.command = ["python", "-m", "pytest", "-x"]
    assert red_of(cfg=other_cmd) != first
    other_agent = config.model_copy(deep=True)
    other_agent.agent.timeout_s = 5
    assert red_of(cfg=other_agent) == first
    tree = repo.rev_parse("HEAD^{tree}")
    assert baseline_key(config, tree) != baseline_key(other_cmd, tree)
    assert baseline_key(config, tree) == baseline_key(other_agent, tree)
    before, real = baseline_key(config, tree), gates.cache.__version__
    try:
        gates.cache.__version__ = "999"  # another andon: nothing it cached is reused
        assert baseline_key(config, tree) != before
        assert red_of() != first
    finally:
        gates.cache.__version__ = real
