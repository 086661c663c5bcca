"""Budgets stop work at the limit, layer `harness`, with the reason recorded and the
evidence kept; checked after each stage run and before the next one."""

from andon.agents import CommandAgent
from andon.config import load_config
from andon.exits import EXIT_HALTED
from andon.git.repo import Repo
from andon.runner import Runner
from andon.state import open_store

from helpers import MUL_CODE, SHIPPED, git, make_project, mul_packet, packet_md

# An agent that reports its cost through the usage file and does the work (or not).
HONEST = ("printf '{\"model\": \"claude-opus-4-5\", \"input_tokens\": 100, \"output_tokens\": "
          "10, \"cost_usd\": %s}' \"$(cat {cost_file})\" > \"$ANDON_USAGE_FILE\"\n"
          f"printf '{MUL_CODE}' >> src/calc/ops.py\n")
LAZY = HONEST.splitlines()[0] + "\n"


def project(tmp_path, budgets: str, packets=("P1",)):
    cfg = SHIPPED + "\n" + budgets
    return make_project(tmp_path / "repo", {
        p: mul_packet(p, stages=["implement"]) for p in packets}, config=cfg)


def runner(root, script, cost="0.6"):
    cost_file = root.parent / "cost"
    cost_file.write_text(cost)
    agent = CommandAgent(script.replace("{cost_file}", str(cost_file)))
    repo = Repo(root)
    return Runner(repo, load_config(root), open_store(repo), lambda p, stage: agent), cost_file


def budget_gate(store, packet_id, n):
    a = store.attempts(packet_id)[n - 1]
    return a, {g["gate"]: g for g in store.gate_results(a["id"])}.get("budget")


def test_attempt_cost_budget_blocks_and_keeps_the_evidence(tmp_path):
    root = project(tmp_path, "[budgets.attempt]\nmax_cost_usd = 0.5\n")
    head = git(root, "rev-parse", "main").strip()
    r, _ = runner(root, HONEST)
    report = r.run()
    assert report.exit_status == EXIT_HALTED and report.halted_by == "P1"
    a, g = budget_gate(r.store, "P1", 1)
    assert g["status"] == "fail" and g["failure_layer"] == "harness"
    assert g["summary"] == "attempt budget exceeded: agents cost $0.6000, max_cost_usd is $0.5"
    assert g["evidence"]["scope"] == "attempt" and g["evidence"]["cost_usd"] == 0.6
    assert r.store.packet("P1")["state"] == "blocked"
    assert "budget gate (harness)" in a["reason"]
    # no gate ran after the stop; the agent's work and transcript are kept
    assert [x["gate"] for x in r.store.gate_results(a["id"])] == ["red", "budget"]
    [stage] = r.store.stage_runs(a["id"])
    assert stage["usage"]["cost_usd"] == 0.6
    assert MUL_CODE in git(root, "show", f"{a['candidate_sha']}:src/calc/ops.py")
    assert git(root, "rev-parse", "andon/integration").strip() == head


def test_packet_budget_counts_every_attempt_and_is_checked_before_a_stage(tmp_path):
    root = project(tmp_path, "[budgets.packet]\nmax_cost_usd = 1.0\n")
    r, _ = runner(root, LAZY)
    report = r.run()    # attempt 1: $0.6, no change → needs work; attempt 2: $1.2 > $1
    assert report.exit_status == EXIT_HALTED
    _, g = budget_gate(r.store, "P1", 2)
    assert g["summary"] == "packet budget exceeded: agents cost $1.2000, max_cost_usd is $1"
    assert budget_gate(r.store, "P1", 1)[1] is None
    # unblocked without raising the budget: the next attempt stops before its agent runs
    r.store.transition("P1", "ready", "unblocked")
    r.run()
    a3, g = budget_gate(r.store, "P1", 3)
    assert g["summary"].startswith("packet budget no budget left to start a stage: agents "
                                   "cost $1.2000")
    assert r.store.stage_runs(a3["id"]) == []


SUB_TEST = "from calc.ops import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
SUB_CODE = "\\n\\ndef sub(a, b):\\n    return a - b\\n"


def test_run_budget_spans_packets(tmp_path):
    cfg = SHIPPED + "\n[budgets.run]\nmax_cost_usd = 0.5\n"
    sub = packet_md("P2", "subtract", "calc.ops.sub subtracts.", stages=["implement"],
                    allowed_paths=["src/calc/**"])
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", stages=["implement"]),
                                            "P2": (sub, {"tests/test_sub.py": SUB_TEST})},
                        config=cfg)
    both = (LAZY + f'if [ "$ANDON_PACKET_ID" = P1 ]; then printf \'{MUL_CODE}\' >> '
            f'src/calc/ops.py; else printf \'{SUB_CODE}\' >> src/calc/ops.py; fi\n')
    r, _ = runner(root, both, cost="0.3")
    report = r.run()
    assert r.store.packet("P1")["state"] == "done"      # $0.3 of $0.5
    assert report.halted_by == "P2"                      # $0.6 > $0.5
    _, g = budget_gate(r.store, "P2", 1)
    assert g["evidence"]["scope"] == "run" and g["evidence"]["cost_usd"] == 0.6
    assert g["summary"] == "run budget exceeded: agents cost $0.6000, max_cost_usd is $0.5"


def test_wall_budget(tmp_path):
    root = project(tmp_path, "[budgets.attempt]\nmax_wall_s = 0.000001\n")
    r, _ = runner(root, HONEST)
    r.run()
    _, g = budget_gate(r.store, "P1", 1)
    assert g["evidence"]["kind"] == "wall"
    assert g["summary"].startswith("attempt budget exceeded: agents ran ")


def test_unknown_cost_cannot_be_kept_under_a_cost_budget(tmp_path):
    root = project(tmp_path, "[budgets.attempt]\nmax_cost_usd = 5\n")
    r, _ = runner(root, f"printf '{MUL_CODE}' >> src/calc/ops.py\n")
    r.run()
    _, g = budget_gate(r.store, "P1", 1)
    assert "cannot be kept: the cost of 1 of 1 stage run(s) is unknown" in g["summary"]


def test_within_budget_nothing_changes(tmp_path):
    root = project(tmp_path, "[budgets.attempt]\nmax_cost_usd = 1\n[budgets.run]\n"
                             "max_cost_usd = 1\nmax_wall_s = 3600\n")
    r, _ = runner(root, HONEST)
    assert r.run().merged == ["P1"]
