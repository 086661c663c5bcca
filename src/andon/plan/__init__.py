"""``andon plan``: a planning agent drafts packets from a spec, the harness checks every draft
mechanically, and only a person's acceptance makes one ready. See README.md for the modules.

Nothing is imported here, so that the runner can use :mod:`andon.plan.drafts` without
loading the planning stage.
"""
