"""Experiments: compare conditions (agents, models, prompts) run on the same packets, with
paired statistics. ``stats`` holds the methods (no I/O), ``runs`` the in-memory run table and
its CSV reader, ``compare`` the comparison built from a run table; see README.md."""
