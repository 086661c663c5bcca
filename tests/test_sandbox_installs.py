"""The installations an agent stage runs from are bound read-only wherever they live (issue
11, docs/sandbox.md "Tools"): a console script in a virtualenv below ``/tmp`` (the stage's
``/tmp`` is private) still finds its packages; a node package is bound up to
``node_modules``; a folder that holds a hidden path is never bound; the agent cannot write
into the bound installation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from andon.sandbox import probe
from andon.sandbox.installs import installation_of, tools_for
from andon.sandbox.plan import Plan

CAPS = probe.capabilities()
needs_fs = pytest.mark.skipif(not CAPS.fs[0], reason=f"no fs sandbox here: {CAPS.fs[1]}")


def fake_venv(prefix: Path) -> Path:
    """A virtualenv's shape (pyvenv.cfg, bin/python linked to this interpreter, a package in
    lib/) with a console script ``tool`` whose #! names the venv's python; its path."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    os.symlink(sys.executable, prefix / "bin" / "python")
    (prefix / "lib" / "toolpkg").mkdir(parents=True)
    (prefix / "lib" / "toolpkg" / "__init__.py").write_text("WORD = 'tool-ran'\n")
    tool = prefix / "bin" / "tool"
    tool.write_text(f"#!{prefix}/bin/python\nimport sys\nsys.path.insert(0, '{prefix}/lib')\n"
                    "import toolpkg\nprint(toolpkg.WORD)\n")
    tool.chmod(0o755)
    return tool


def test_a_console_script_is_bound_with_its_whole_virtualenv(tmp_path):
    tool = fake_venv(tmp_path / "venv")
    base = Path(os.path.realpath(Path(sys.executable).parent)).parent  # pyvenv.cfg's home
    real = Path(os.path.realpath(sys.executable)).parent.parent  # where python really is
    want = list(dict.fromkeys([tmp_path.resolve() / "venv", base, real]))
    assert installation_of(tool) == want
    assert installation_of(tmp_path / "venv" / "bin" / "python") == want


def test_a_virtualenv_brings_the_prefix_of_the_interpreter_it_was_made_from(tmp_path):
    """pyenv keeps the base interpreter under HOME (~/.pyenv/versions/X), which the stage
    makes private: a venv made from it needs its prefix (the standard library) bound too."""
    base = tmp_path / "home" / ".pyenv" / "versions" / "3.11.7"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\ninclude-system-site-packages"
                                     " = false\n")
    os.symlink(base / "bin" / "python3.11", venv / "bin" / "python")
    assert installation_of(venv / "bin" / "python") == [venv.resolve(), base.resolve()]
    # an interpreter outside any venv brings its prefix (lib/ beside bin/), never /
    assert installation_of(base / "bin" / "python3.11") == [base.resolve()]


def test_a_node_package_is_bound_up_to_node_modules(tmp_path):
    pkg = tmp_path / "node_modules" / "cli" / "bin"
    pkg.mkdir(parents=True)
    (pkg / "cli.js").write_text("#!/usr/bin/env node\n")
    (tmp_path / "node_modules" / ".bin").mkdir()
    os.symlink(pkg / "cli.js", tmp_path / "node_modules" / ".bin" / "cli")
    assert installation_of(tmp_path / "node_modules" / ".bin" / "cli") == [
        tmp_path.resolve() / "node_modules"]


def test_the_command_words_and_the_test_interpreter_are_followed(tmp_path):
    tool = fake_venv(tmp_path / "venv")
    got = tools_for(f"{tool} --flag", "/usr/bin", ["python", "-m", "pytest"])
    assert tmp_path.resolve() / "venv" in got
    assert Path(sys.prefix).resolve() in got or Path(sys.executable).resolve().parent in got
    assert tools_for("echo 'unclosed", "/usr/bin") == []   # a command sh would reject


def test_a_folder_holding_a_hidden_path_is_never_bound(tmp_path):
    checkout = tmp_path / "repo"
    plan = Plan("fs", tmp_path / "wt", hidden=(checkout,), readonly=(tmp_path,))
    argv, _ = plan.wrap(["true"], tmp_path, {"PATH": "/usr/bin"})
    assert str(tmp_path) not in [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]


@needs_fs
def test_a_tool_in_a_venv_below_tmp_runs_inside_the_sandbox_and_cannot_be_changed(tmp_path):
    assert str(tmp_path).startswith("/tmp"), "the case under test: a venv the private /tmp hides"
    tool = fake_venv(tmp_path / "venv")
    wt = tmp_path / "wt"
    wt.mkdir()
    plan = Plan("fs", wt, readonly=tuple(installation_of(tool)))
    script = f"{tool} && ! echo x >> {tool} 2>/dev/null && echo refused"
    argv, env = plan.wrap(["/bin/sh", "-c", script], wt,
                          {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")})
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["tool-ran", "refused"]
    # and without the rule the private /tmp hides it: the test can fail
    bare = Plan("fs", wt)
    argv, env = bare.wrap([str(tool)], wt, {"PATH": "/usr/bin:/bin"})
    assert subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode != 0


@needs_fs
def test_a_tool_named_through_a_link_runs_by_its_name_and_on_path(tmp_path):
    """A CLI reached through a symlinked folder (``.tools`` linked into a clone below /tmp):
    the installation is bound at its real path, and the agent runs the CLI by the name it
    was given and finds it on PATH by the linked folder's name."""
    tool = fake_venv(tmp_path / "real" / "venv")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    named = tmp_path / "link" / "venv" / "bin" / "tool"
    wt = tmp_path / "wt"
    wt.mkdir()
    plan = Plan("fs", wt, readonly=tuple(installation_of(named)))
    env = {"PATH": f"{named.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    for cmd in ([str(named)], ["/bin/sh", "-c", "tool"]):
        argv, wenv = plan.wrap(cmd, wt, env)
        r = subprocess.run(argv, env=wenv, capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stdout.strip()) == (0, "tool-ran"), (cmd, r.stderr)
    assert tool.is_file()


def version_manager(home: Path) -> Path:
    """pyenv's shape under ``home``: ``.vm/shims/tool`` execs ``.vm/libexec/vm`` by absolute
    path (as pyenv's shims do), ``.vm/bin/vm`` links to it, and ``.local/bin/cli`` links
    into a virtualenv under ``.local/share`` (pipx's shape). The manager's root."""
    root = home / ".vm"
    for d in ("shims", "libexec", "bin"):
        (root / d).mkdir(parents=True)
    (root / "libexec" / "vm").write_text('#!/bin/sh\necho "vm-ran $*"\n')
    (root / "shims" / "tool").write_text(f'#!/bin/sh\nexec "{root}/libexec/vm" exec tool\n')
    for f in (root / "libexec" / "vm", root / "shims" / "tool"):
        f.chmod(0o755)
    os.symlink("../libexec/vm", root / "bin" / "vm")
    cli = fake_venv(home / ".local" / "share" / "pipx" / "venvs" / "cli")
    (home / ".local" / "bin").mkdir(parents=True)
    os.symlink(cli, home / ".local" / "bin" / "cli")
    return root


@needs_fs
def test_tools_on_path_under_the_private_home_keep_what_they_run_from(tmp_path):
    """A ``shims`` folder on PATH (pyenv, rbenv, asdf) brings its manager's root, and a link
    on PATH under the private HOME brings the installation it points into (pipx): a newcomer
    pass found ``python3`` on PATH (a pyenv shim) failing in every agent stage with
    ``/root/.pyenv/libexec/pyenv: No such file or directory``."""
    home = tmp_path / "home"
    root = version_manager(home)
    wt = tmp_path / "wt"
    wt.mkdir()
    path = f"{root}/shims:{root}/bin:{home}/.local/bin:/usr/bin:/bin"
    argv, env = Plan("fs", wt).wrap(["/bin/sh", "-c", "tool && vm x && cli"], wt,
                                    {"PATH": path, "HOME": str(home)})
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.splitlines()) == (
        0, ["vm-ran exec tool", "vm-ran x", "tool-ran"]), r.stderr
    # the rest of HOME stays private
    (home / "secret").write_text("x")
    argv, env = Plan("fs", wt).wrap(["/bin/cat", str(home / "secret")], wt,
                                    {"PATH": path, "HOME": str(home)})
    assert subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode != 0


def test_a_command_naming_the_store_or_a_hidden_test_does_not_bind_it(tmp_path):
    """The person's command may name a script kept in the checkout (bound read-only), but
    never shows the agent the store, the evidence or a packet's hidden tests."""
    from andon.sandbox import command_files
    root = tmp_path / "repo"
    files = {"tools/agent.sh": "#!/bin/sh\n", ".andon/andon.db": "", "packets/P1/hidden/"
             "tests/test_h.py": "def test_h(): pass\n", "packets/P1/packet.md": "x\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    command = " ".join(str(root / rel) for rel in files)
    assert command_files(command, root) == [root / "tools/agent.sh", root / "packets/P1/packet.md"]
