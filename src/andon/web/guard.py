"""Who may use the dashboard: the per-server token, the CSRF value, the allowed hosts and
the security headers every response carries.

The token is printed once when ``andon serve`` starts: every page lives under
``/t/TOKEN/`` (another local user cannot read the evidence or act without it). Not a cookie:
a browser sends the cookies of 127.0.0.1 to every port, so another local user's server
would receive it. Links to other sites carry no Referer (``Referrer-Policy: same-origin``;
``no-referrer`` would make the browser send ``Origin: null`` with the forms). Every action
also needs the CSRF value of the page's form (HMAC of the token) and, when the browser sends
one, an Origin of this server. A Host other than 127.0.0.1 or
localhost is refused (a DNS-rebinding page cannot reach the server by another name).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})

# No inline script or style, nothing from another host, no frames of this site elsewhere,
# no form posting away, no <base> trick. Applies to every page and fragment.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'self'; base-uri 'none'; "
       "frame-src 'self'")
# The comparison report (experiments/html.py) keeps its style sheet inline and has no
# script at all: it is served in a sandbox that runs none.
REPORT_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
              "frame-ancestors 'self'; base-uri 'none'; form-action 'none'; sandbox")
# The context view (andon.context.html) draws with inline script over the transcript's data:
# its scripts run, but in a sandbox without allow-same-origin (an opaque origin: no cookie,
# no token page, no storage of this server) and with no request allowed to any host.
CONTEXT_CSP = ("sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; "
               "style-src 'unsafe-inline'; img-src data:; connect-src 'none'; "
               "frame-ancestors 'self'; base-uri 'none'; form-action 'none'")
HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
           "Cross-Origin-Opener-Policy": "same-origin",
           "Cross-Origin-Resource-Policy": "same-origin", "Cache-Control": "no-store"}


def new_token() -> str:
    """A fresh random token: 32 bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def csrf_value(token: str) -> str:
    """The value every form carries: HMAC-SHA256 of a fixed label under the token (hex)."""
    return hmac.new(token.encode(), b"andon-csrf", hashlib.sha256).hexdigest()


def same(a: str | None, b: str) -> bool:
    """Constant-time equality; None is never equal."""
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def token_of(path: str) -> str | None:
    """The token of a request path ``/t/TOKEN/...``, or None."""
    parts = path.split("/", 3)
    return parts[2] if len(parts) >= 3 and parts[0] == "" and parts[1] == "t" else None


def host_allowed(host_header: str | None) -> bool:
    """True when the Host header names this machine's loopback (any port)."""
    if not host_header:
        return False
    return (urlsplit(f"//{host_header}").hostname or "") in LOCAL_HOSTS


def origin_allowed(origin: str | None, host_header: str | None) -> bool:
    """An action's Origin: absent (an old browser, curl) or exactly this server."""
    if origin is None:
        return True
    return host_header is not None and origin in (f"http://{host_header}",)
