"""The default worktree root is a predictable name in the shared temp dir
(``<temp>/wt-<hash of the repository's path>``): a folder another user made there first, or
a link, would let them read or swap what the agents work on. ``andon run`` refuses it before
anything is claimed, and closes a folder of the user's own that others could enter."""

import os
import stat

import pytest

from andon.errors import UsageError

from helpers import honest_mul, make_project, mul_packet, runner_for


def _runner(tmp_path, agent=honest_mul):
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")})
    return runner_for(root, {"P1": agent})


def test_a_link_at_the_worktree_roots_name_is_refused_and_nothing_runs(tmp_path):
    runner = _runner(tmp_path)
    elsewhere = tmp_path / "someone-elses"
    elsewhere.mkdir()
    runner.worktree_root.symlink_to(elsewhere)
    try:
        with pytest.raises(UsageError, match="not a folder only you can enter"):
            runner.run()
        assert os.listdir(elsewhere) == []
        assert runner.store.packet("P1") is None  # not even registered
    finally:
        runner.worktree_root.unlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user's needs root")
def test_a_worktree_root_another_user_made_first_is_refused(tmp_path):
    runner = _runner(tmp_path)
    runner.worktree_root.mkdir(mode=0o777)
    os.chown(runner.worktree_root, 65534, 65534)
    try:
        with pytest.raises(UsageError, match="another user made it first"):
            runner.run()
        assert os.listdir(runner.worktree_root) == []
    finally:
        runner.worktree_root.rmdir()


def test_a_worktree_root_of_the_users_own_that_others_could_enter_is_closed(tmp_path):
    seen = {}

    def agent(ctx):
        seen["mode"] = stat.S_IMODE(os.stat(ctx.worktree.parent).st_mode)
        return honest_mul(ctx)

    runner = _runner(tmp_path, agent)
    runner.worktree_root.mkdir()
    runner.worktree_root.chmod(0o777)
    assert runner.run().merged == ["P1"]
    assert seen == {"mode": 0o700}
