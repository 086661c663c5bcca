"""How long the fingerprint of the tests' interpreter takes (contain/envprint.py), taken about
ten times per attempt (before and after each agent stage, after each gate).

    .venv/bin/python benchmarks/envprint.py [--repeat 9]

Prints the number of entries walked and the median, min and max milliseconds of a fingerprint
of andon's own interpreter (the venv it runs in), after one warm-up walk.
"""

from __future__ import annotations

import argparse
import statistics
import time

from andon.contain import envprint


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args(argv)
    where = envprint.layout(None, ())
    entries = len(envprint.fingerprint(where))  # warm-up: the second walk of a run is typical
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        envprint.fingerprint(where)
        times.append((time.perf_counter() - t0) * 1000)
    print(f"envprint: {entries} entries; median {statistics.median(times):.0f} ms "
          f"(min {min(times):.0f}, max {max(times):.0f}) over {args.repeat} walks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
