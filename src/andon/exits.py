"""The exit statuses of ``andon run`` (and of the commands that share them), for scripts.

A module of its own, with no imports, so that the CLI can name a status without loading the
runner, and ``workers.py`` (which the runner imports) without repeating it.
"""

EXIT_OK = 0
EXIT_HALTED = 1  # a blocked packet halts the line
EXIT_USAGE = 2  # the request cannot be carried out as given (a UsageError)
EXIT_PREFLIGHT = 3  # the integration branch fails its own suite: nothing was attempted
# `andon run` stopped by Ctrl-C after its running attempts finished (the shell's 128 + 2)
EXIT_INTERRUPTED = 130
# the reader of the output went away (`andon status | head -1`): 128 + SIGPIPE, as for a
# program the signal ended; never 1, which means "line halted"
EXIT_BROKEN_PIPE = 141
