"""run_process: stderr kept apart from a machine-readable stdout, and the tail of a capped
output kept, so a runaway agent's final result line survives the cap."""

import sys

from andon.agents.process import run_process


def run(tmp_path, code, **kw):
    stdin = tmp_path / "stdin"
    stdin.write_text("")
    return run_process([sys.executable, "-c", code], tmp_path, {"PATH": "/usr/bin:/bin"},
                       stdin, tmp_path / "out.log", 30, **kw)


def test_stderr_can_be_kept_apart(tmp_path):
    p = run(tmp_path, "import sys; print('{\"a\": 1}'); sys.stderr.write('warning\\n')",
            stderr_path=tmp_path / "err.log")
    assert (tmp_path / "out.log").read_bytes() == b'{"a": 1}\n'
    assert (tmp_path / "err.log").read_bytes() == b"warning\n"
    assert p.stderr_path == tmp_path / "err.log" and p.exit_status == 0


def test_without_stderr_path_both_streams_share_the_transcript(tmp_path):
    p = run(tmp_path, "import sys; sys.stderr.write('e\\n'); sys.stderr.flush(); print('o')")
    assert sorted((tmp_path / "out.log").read_text().split()) == ["e", "o"]
    assert p.stderr_path is None


def test_cap_keeps_head_and_tail_with_a_marker(tmp_path):
    code = ("import sys\n"
            "for i in range(20000): sys.stdout.write(f'line {i:05d}\\n')\n"
            "sys.stdout.write('{\"type\": \"result\"}\\n')\n")
    p = run(tmp_path, code, max_bytes=4000, keep_tail=1000)
    data = (tmp_path / "out.log").read_bytes()
    total = 20000 * 11 + len('{"type": "result"}\n')
    assert p.bytes_written == 4000 and p.bytes_dropped == total - 4000
    assert data.startswith(b"line 00000\n")
    assert f"[andon: {total - 4000} bytes dropped]".encode() in data
    assert data.endswith(b'{"type": "result"}\n')
    assert len(data) < 4100


def test_cap_without_tail_drops_the_rest(tmp_path):
    p = run(tmp_path, "import sys; sys.stdout.write('x' * 100000)", max_bytes=1000)
    assert (tmp_path / "out.log").read_bytes() == b"x" * 1000
    assert p.bytes_dropped == 99000


def test_output_under_the_cap_is_whole_even_with_a_tail(tmp_path):
    p = run(tmp_path, "import sys; sys.stdout.write('y' * 3000)", max_bytes=4000,
            keep_tail=2000)
    assert (tmp_path / "out.log").read_bytes() == b"y" * 3000
    assert p.bytes_dropped == 0
