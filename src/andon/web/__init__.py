"""``andon serve``: the dashboard, a local web page over the store (see README.md).

Public face: :class:`Settings` (what one server serves), :func:`create_app` (the ASGI
application) and :func:`missing` (which of the ``andon[web]`` packages are not installed).
Importing this package needs the extra; ``cli/serve.py`` calls :func:`missing` first.
"""

from __future__ import annotations

import importlib.util

WEB_PACKAGES = ("starlette", "uvicorn", "jinja2", "pygments")


def missing() -> list[str]:
    """The packages of the ``andon[web]`` extra that cannot be imported here."""
    return [m for m in WEB_PACKAGES if importlib.util.find_spec(m) is None]


def create_app(settings):  # imported late: the extra may be missing
    """The ASGI application for ``settings`` (an :class:`andon.web.app.Settings`)."""
    from .app import create_app as build
    return build(settings)


__all__ = ["WEB_PACKAGES", "create_app", "missing"]
