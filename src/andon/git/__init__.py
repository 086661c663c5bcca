"""git plumbing: every git command andon runs, and what it reads of a repository without one
(README.md beside this file). Nothing is imported here: each caller names the module it
uses (``from andon.git.repo import Repo``), so that reading a ref never loads the rest."""
