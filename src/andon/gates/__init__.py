"""Gates run by the harness, never by the agent. One module per gate; see ``base.py``."""
