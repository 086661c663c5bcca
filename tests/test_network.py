"""Catalogue kind 16 outside the red-team table: ``[test] network`` and ``[agent] network``.

Harness test runs get no network by default (their evidence says ``network: cut``); where the
machine cannot do that they run anyway and say ``not cut: <reason>``, in the evidence and in
the gate's summary. An agent with ``[agent] network = "off"`` runs without network, and `andon
run` refuses to start (exit 2, nothing claimed) where that is impossible. Real subprocesses,
real sockets, real git projects; the one stand-in is the cached probe result for "this
machine cannot", since the kernel here can.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from andon.agents import make_agent
from andon.config import DEFAULT_TOML, Config, load_config
from andon.contain import netless
from andon.errors import ConfigError
from andon.gates.base import GateResult, run_project_suite
from andon.git.repo import Repo
from andon.runners.pytest import run_suite
from andon.state import open_store

from agent_ctx import stage_ctx
from helpers import andon, config_toml, make_project, mul_packet

AVAILABLE, WHY = netless.available()
needs_netns = pytest.mark.skipif(not AVAILABLE, reason=f"network namespaces: {WHY}")

NET_TEST = '''\
import os
import socket


def test_reaches_the_outside_server():
    with socket.create_connection(("127.0.0.1", int(os.environ["OUTSIDE_PORT"])), timeout=5) as s:
        assert s.recv(16) == b"answer"
'''
CONNECT = ('{py} -c "import socket,sys\ntry:\n socket.create_connection((\'127.0.0.1\',{port}),'
           'timeout=5); print(\'reached\')\nexcept OSError: print(\'refused\')" > net.txt')


@pytest.fixture
def cannot_cut(monkeypatch):
    """This process's cached probe says the machine cannot cut the network."""
    monkeypatch.setattr(netless, "_cached", (False, "user namespaces refused (test)"))


def net_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "tests/test_net.py").write_text(NET_TEST)
    return root


def suite(root: Path, tmp_path: Path, network: str, port: int, fork_server: bool = True):
    return run_suite([sys.executable, "-m", "pytest"], root, tmp_path / "ev", "net",
                     extra_env={"OUTSIDE_PORT": str(port)}, network=network,
                     fork_server=fork_server)


# -- config --------------------------------------------------------------------------------

def test_defaults_cut_test_runs_and_let_agents_reach_only_their_model_api(tmp_path):
    c = Config()
    assert (c.test.network, c.agent.network) == ("off", "allow")
    root = make_project(tmp_path / "p", config=DEFAULT_TOML)
    c = load_config(root)  # DEFAULT_TOML names both keys
    assert (c.test.network, c.agent.network) == ("off", "allow")
    assert 'network = "off"' in DEFAULT_TOML and 'network = "allow"' in DEFAULT_TOML


@pytest.mark.parametrize("table,line", [("test", 3), ("agent", 3)])
def test_unknown_value_is_a_config_error_with_file_and_line(tmp_path, table, line):
    (tmp_path / "andon.toml").write_text(f'# x\n[{table}]\nnetwork = "maybe"\n')
    with pytest.raises(ConfigError, match=rf"andon.toml:{line}: {table}.network: .*'(on|off)'"):
        load_config(tmp_path)


# -- test runs -----------------------------------------------------------------------------

@needs_netns
@pytest.mark.parametrize("fork_server", [False, True], ids=["fresh", "forked"])
def test_suite_run_with_network_off_cannot_reach_outside(tmp_path, outside_server, fork_server):
    r = suite(net_project(tmp_path), tmp_path, "off", outside_server, fork_server)
    assert r.network == "cut"
    assert r.results["tests.test_net::test_reaches_the_outside_server"].outcome == "failed"
    ev = r.to_evidence()
    assert ev["network"] == "cut"
    if fork_server:  # the forked child enters its own namespace (contain/zygote.py)
        assert ev["start"] == "fork server" and ev["wrapper"] == []
    else:  # the wrapper execs the fresh process in one
        assert ev["start"] == "fresh" and ev["wrapper"][-1] == "--"
        assert str(netless.WRAPPER) in ev["wrapper"]


def test_suite_run_with_network_on_reaches_outside(tmp_path, outside_server):
    """The control: the same test passes when the run keeps the network."""
    r = suite(net_project(tmp_path), tmp_path, "on", outside_server)
    assert r.network == "on" and r.wrapper == []
    assert r.results["tests.test_net::test_reaches_the_outside_server"].outcome == "passed"


def test_machine_that_cannot_cut_runs_with_network_and_says_so(tmp_path, outside_server,
                                                                cannot_cut):
    r = suite(net_project(tmp_path), tmp_path, "off", outside_server)
    assert r.network == "not cut: user namespaces refused (test)"
    assert r.to_evidence()["network"] == r.network
    assert r.results["tests.test_net::test_reaches_the_outside_server"].outcome == "passed"
    g = GateResult("suite", "pass", "1 tests passed", runs=[r])
    assert g.summary == "1 tests passed (network not cut: user namespaces refused (test))"


def test_project_suite_follows_test_network(tmp_path):
    root = make_project(tmp_path / "p", config=config_toml(test_network="on"))
    cfg = load_config(root)
    assert cfg.test.network == "on"
    assert run_project_suite(cfg, root, tmp_path / "ev", "x").network == "on"
    r = run_project_suite(Config(), root, tmp_path / "ev", "y")
    assert r.network == ("cut" if AVAILABLE else f"not cut: {WHY}")
    assert r.ids_with("passed")  # the project's own tests are unaffected


def test_bad_network_value_is_refused():
    with pytest.raises(ValueError, match='network must be "on" or "off"'):
        run_suite(["pytest"], Path("/tmp"), Path("/nonexistent/ev"), "n", network="no")


# -- agents --------------------------------------------------------------------------------

@needs_netns
def test_command_agent_with_network_off_cannot_reach_outside(tmp_path, outside_server):
    cmd = CONNECT.format(py=sys.executable, port=outside_server)
    cfg = Config.model_validate({"agent": {"network": "off"}})
    ctx = stage_ctx(tmp_path)
    run = make_agent("command", cmd, cfg).run(ctx)
    assert run.exit_status == 0
    assert (ctx.worktree / "net.txt").read_text().strip() == "refused"


def test_command_agent_keeps_the_network_by_default(tmp_path, outside_server):
    cmd = CONNECT.format(py=sys.executable, port=outside_server)
    ctx = stage_ctx(tmp_path)
    run = make_agent("command", cmd, Config()).run(ctx)
    assert run.exit_status == 0
    assert (ctx.worktree / "net.txt").read_text().strip() == "reached"


def test_scripted_agent_cannot_be_contained():
    cfg = Config.model_validate({"agent": {"network": "off"}})
    with pytest.raises(ValueError, match="scripted adapter"):
        make_agent("scripted:helpers:accept_review", None, cfg)


def test_agent_network_off_where_impossible_is_refused_before_any_attempt(tmp_path):
    """A real refusal: ANDON_NETLESS_TEST_FLAGS makes the kernel reject the probe's unshare
    (EINVAL) in the CLI's process; `andon run` exits 2 and claims nothing."""
    root = make_project(tmp_path / "p", {"P1": mul_packet("P1")},
                        config=config_toml(agent_network="off"))
    assert load_config(root).agent.network == "off"
    p = andon(root, "run", "--agent", "command", "--command", "true",
              env={netless.TEST_FLAGS_ENV: "1"})
    assert p.returncode == 2, p.stderr
    assert '[agent] network = "off"' in p.stderr and 'network = "on"' in p.stderr
    assert "Invalid argument" in p.stderr  # the kernel's own reason
    assert open_store(Repo(root)).attempts("P1") == []


def test_doctor_reports_network_namespaces(tmp_path):
    root = make_project(tmp_path / "p")
    p = andon(root, "doctor", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["network_namespaces"] == {"available": AVAILABLE, "reason": WHY}
    p = andon(root, "doctor", env={netless.TEST_FLAGS_ENV: "1"})
    assert "network namespaces: not available here" in p.stdout
