"""`andon run --only P2` while another packet is blocked: found by a newcomer pass (parse
1.20.2), where the run printed the board and "line halted: packet P01 is blocked" and nothing
said that the packet asked for had not started, nor why."""

from __future__ import annotations

from andon.exits import EXIT_HALTED

from helpers import honest_mul, make_project, mul_packet, runner_for


def test_only_a_packet_behind_a_halted_line_says_it_did_not_start(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1),
                                            "P2": mul_packet("P2")})
    runner = runner_for(root, {"P1": lambda ctx: "nothing to do", "P2": honest_mul})
    assert runner.run(only=["P1"]).halted_by == "P1"

    report = runner_for(root, {"P1": honest_mul, "P2": honest_mul}).run(only=["P2"])

    assert (report.exit_status, report.halted_by, report.merged) == (EXIT_HALTED, "P1", [])
    assert report.message.startswith(
        "--only P2: not started: a blocked packet halts the whole line (unblock it first)\n"
        "line halted: packet P1 is blocked: "), report.message
    assert runner.store.packet("P2")["state"] == "ready"


def test_only_a_packet_already_done_says_so_not_that_the_line_stopped_it(tmp_path):
    """`--only P2` when P2 is merged and P1 is blocked: P2 has nothing to start whatever the
    line does; the message said a blocked packet kept it from starting (newcomer pass)."""
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1", max_attempts=1),
                                            "P2": mul_packet("P2")})
    runner = runner_for(root, {"P1": lambda ctx: "nothing to do", "P2": honest_mul})
    assert runner.run(only=["P2"]).merged == ["P2"]
    assert runner.run(only=["P1"]).halted_by == "P1"

    report = runner_for(root, {"P1": honest_mul, "P2": honest_mul}).run(only=["P2"])

    assert report.message.startswith("--only P2: already done (merged): nothing to start\n"
                                     "line halted: packet P1 is blocked: "), report.message
