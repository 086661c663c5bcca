"""What cutting the network costs a harness test run: N runs of a small pytest suite through
``run_suite`` with ``network="on"`` and N with ``network="off"`` (interleaved, so drift in the
machine's load hits both alike), and the added milliseconds per run.

Prints one line per mode and, as its last line::

    netless: +X ms per test run (median on M ms, off O ms; N runs each)

Exits 2 (printing why) where network namespaces are not available.

    .venv/bin/python benchmarks/netless.py [--runs 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from andon.contain import netless
from andon.runners.pytest import run_suite

OPS = "def add(a, b):\n    return a + b\n"
TESTS = "from calc.ops import add\n\n\n" + "".join(
    f"def test_add_{i}():\n    assert add({i}, {i}) == {2 * i}\n\n\n" for i in range(20))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    ok, why = netless.available()
    if not ok:
        print(f"netless: network namespaces not available here: {why}")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="andon-netless-bench-"))
    try:
        root = tmp / "proj"
        (root / "src/calc").mkdir(parents=True)
        (root / "tests").mkdir()
        (root / "src/calc/__init__.py").write_text("")
        (root / "src/calc/ops.py").write_text(OPS)
        (root / "tests/test_ops.py").write_text(TESTS)
        times: dict[str, list[float]] = {"on": [], "off": []}
        for i in range(args.runs + 1):
            for mode in ("on", "off"):
                r = run_suite([sys.executable, "-m", "pytest"], root, tmp / "ev", f"{mode}-{i}",
                              pythonpath=[root / "src"], network=mode)  # type: ignore[arg-type]
                assert len(r.ids_with("passed")) == 20, (r.network, r.output_tail)
                assert r.network == ("cut" if mode == "off" else "on")
                if i:  # the first round warms caches
                    times[mode].append(r.duration_s * 1000)
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        for mode in ("on", "off"):
            t = times[mode]
            print(f"network {mode:<3}: median {statistics.median(t):7.1f} ms, "
                  f"min {min(t):7.1f} ms over {len(t)} runs")
        print(f"netless: +{off - on:.0f} ms per test run (median on {on:.0f} ms, "
              f"off {off:.0f} ms; {args.runs} runs each)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
