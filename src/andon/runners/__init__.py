"""Test-runner adapters: run a project's tests as a subprocess the harness controls and read
the outcome of each test id from a report the runner writes (README.md). Today: ``pytest``."""
