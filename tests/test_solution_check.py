"""`andon check` knows a packet's reference solution (``solution/`` beside ``plant/``): its files
are read like plant's, and a solution that could never pass the scope gate is a problem of the
packet's specification, named as ``file:line: message``. (`andon validate` runs it: see
test_validate.py.)"""

from __future__ import annotations

import json
import os

from andon.config import load_config
from andon.packet import check_packets, solution_problems

from helpers import CALC, MUL_CODE, andon, make_project, mul_packet


def _solution(root, folder, files):
    for rel, text in files.items():
        target = root / "packets" / folder / "solution" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def test_a_good_solution_is_loaded_and_checks_clean(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    _solution(root, "P1", {"src/calc/ops.py": CALC + MUL_CODE})
    packets, problems = check_packets(root / "packets", root)
    assert problems == []
    (p1,) = packets
    assert sorted(p1.solution_files) == ["src/calc/ops.py"]
    assert p1.solution_blobs()["src/calc/ops.py"][0] == (CALC + MUL_CODE).encode()
    assert solution_problems(p1, load_config(root).andon.packets_dir) == []
    proc = andon(root, "check")
    assert proc.returncode == 0, proc.stdout


def test_the_solution_is_not_part_of_the_packets_content_sha(tmp_path):
    # what agents get is unchanged by a reference solution: attempts carry over as before
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    before = check_packets(root / "packets", root)[0][0].content_sha
    _solution(root, "P1", {"src/calc/ops.py": CALC + MUL_CODE})
    assert check_packets(root / "packets", root)[0][0].content_sha == before


def test_check_names_each_solution_file_that_could_never_pass_scope(tmp_path):
    md, plant = mul_packet("P1", forbidden_paths=["src/calc/secret.py"])
    root = make_project(tmp_path / "repo", {"P1": (md, plant)})
    _solution(root, "P1", {
        "src/calc/ops.py": CALC + MUL_CODE,                  # fine
        "README.md": "x\n",                                  # outside allowed_paths
        "src/calc/secret.py": "x = 1\n",                     # forbidden
        "tests/test_mul_p1.py": "def test_x():\n    pass\n",  # a planted file
        "packets/P1/packet.md": "x\n",                       # the harness's folder
        "andon.toml": "x\n",                                 # andon's configuration
    })
    proc = andon(root, "check")
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    md_path = "packets/P1/packet.md"
    allowed_line = md.splitlines().index('allowed_paths = ["src/calc/**"]') + 1
    forbidden_line = md.splitlines().index('forbidden_paths = ["src/calc/secret.py"]') + 1

    def line_with(fragment):
        found = [ln for ln in lines if fragment in ln]
        assert found, (fragment, proc.stdout)
        return found[0]
    assert line_with("solution/README.md").split(": ")[0] == \
        f"{root / md_path}:{allowed_line}"
    assert "outside allowed_paths" in line_with("solution/README.md")
    assert line_with("solution/src/calc/secret.py").split(": ")[0] == \
        f"{root / md_path}:{forbidden_line}"
    assert "forbidden_paths" in line_with("solution/src/calc/secret.py")
    assert "the harness plants" in line_with("solution/tests/test_mul_p1.py")
    assert "packets folder" in line_with("solution/packets/P1/packet.md")
    assert "andon's configuration" in line_with("solution/andon.toml")
    assert not any("solution/src/calc/ops.py" in ln for ln in lines)
    doc = json.loads(andon(root, "check", "--json").stdout)
    assert doc["ok"] is False and len(doc["problems"]) == 5


def test_symlinks_and_an_empty_solution_folder_are_problems(tmp_path):
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1"), "P2": mul_packet("P2")})
    (root / "packets" / "P1" / "solution").mkdir()
    (root / "packets" / "P2" / "solution" / "src").mkdir(parents=True)
    os.symlink("/etc/passwd", root / "packets" / "P2" / "solution" / "src" / "x.py")
    proc = andon(root, "check")
    assert proc.returncode == 2
    assert "packets/P1/solution: solution/ exists but contains no files" in proc.stdout
    assert "solution/src/x.py: solution/ entries must be regular files, got a symlink" \
        in proc.stdout


def test_run_does_not_refuse_a_solution_that_would_fail_scope(tmp_path):
    # the solution is validate's business: the packet itself still runs with agents
    root = make_project(tmp_path / "repo", {"P1": mul_packet("P1")})
    _solution(root, "P1", {"README.md": "x\n"})
    packets, problems = check_packets(root / "packets", root)
    assert problems == [] and packets[0].solution_files
