"""andon: run AI coding agents on a queue of work packets and believe nothing they say."""

__version__ = "0.1.0"
