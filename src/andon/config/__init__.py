"""``andon.toml``: where packets live, how the project's tests run, gate and agent settings.

The file sits at the repository root. Every key has a default that fits a pytest project,
so an empty file is valid. Unknown keys are errors (a misspelt gate setting must not be
silently ignored). Errors name the file and line. ``model`` holds the settings (pydantic
models), ``load`` reads the file and words its problems; callers import from here.
"""

from .load import DEFAULT_TOML, PACKETS_CONFTEST, load_config, packets_dir_despite_errors
from .model import (
    CONFIG_NAME,
    STATE_DIR,
    Agent,
    AgentSettings,
    Andon,
    Budget,
    Budgets,
    Config,
    Gates,
    PatternRule,
    Patterns,
    PlanSettings,
    Price,
    StageAgentSettings,
    StageName,
    Stages,
    Test,
)

__all__ = ["CONFIG_NAME", "DEFAULT_TOML", "PACKETS_CONFTEST", "STATE_DIR", "Agent",
           "AgentSettings", "Andon", "Budget", "Budgets", "Config", "Gates", "PatternRule",
           "Patterns", "PlanSettings", "Price", "StageAgentSettings", "StageName", "Stages", "Test",
           "load_config", "packets_dir_despite_errors"]
