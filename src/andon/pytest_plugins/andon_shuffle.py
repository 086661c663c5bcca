"""pytest plugin: run the collected tests in an order the harness chose by seed.

Loaded by the harness with ``-p andon_shuffle --andon-shuffle-seed=<int>`` and this directory on
PYTHONPATH, so it works in any project without the project installing anything (such as
pytest-randomly). Without the option it changes nothing.
"""

from __future__ import annotations

import random

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--andon-shuffle-seed", type=int, default=None, help="shuffle the tests with this seed"
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("andon_shuffle_seed")
    return None if seed is None else f"andon-shuffle-seed: {seed}"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    # -q hides the header, so the seed is also written at the end where every log has it.
    if (line := pytest_report_header(config)) is not None:
        terminalreporter.write_line(line)


# trylast: the harness owns the final order, whatever other plugins or conftests did before us.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = config.getoption("andon_shuffle_seed")
    if seed is not None:
        random.Random(seed).shuffle(items)
